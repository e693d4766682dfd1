"""Every `docs/engineering.md §N` a comment cites names a rule that file has.

Why: a comment that cites a standards file outside this repository sends someone who
cloned it nowhere. A citation of a section that does not exist (a
renumbering, a typo) would send a reader nowhere again.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUTSIDE = "STAN" + "DARDS"
"""The old citations' file name, spelled so this file does not match itself."""
CITATION = re.compile(r"docs/engineering\.md\s+§(\d+)((?:,\s*§\d+)*)")


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files", "*.py", "*.md", "*.toml"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return [REPO / name for name in names]


def test_every_citation_names_an_existing_rule() -> None:
    doc = (REPO / "docs" / "engineering.md").read_text()
    sections = set(re.findall(r"^## (\d+)\. ", doc, flags=re.M))
    cited: dict[str, list[str]] = {}
    for path in _tracked_text_files():
        if not path.is_file():
            continue
        for match in CITATION.finditer(path.read_text(errors="replace")):
            numbers = [match.group(1), *re.findall(r"\d+", match.group(2))]
            for number in numbers:
                cited.setdefault(number, []).append(path.name)
    assert cited, "no citations found: the pattern no longer matches the comments"
    missing = {n: files for n, files in cited.items() if n not in sections}
    assert not missing


def test_nothing_cites_the_file_outside_the_repository() -> None:
    offenders = [
        path.relative_to(REPO)
        for path in _tracked_text_files()
        if path.is_file() and OUTSIDE in path.read_text(errors="replace")
    ]
    assert offenders == []
