"""`harness trial` refuses what it cannot honestly run, before any stage starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
SOLUTION = "profiles/tasks/py-one-line-fix/scripts/solution.json"


@pytest.mark.parametrize("agent", ["model", f"scripted:{SOLUTION}"])
def test_libvirt_backend_is_refused_for_every_agent(agent: str, tmp_path: Path) -> None:
    # A scripted trial must not run under qemu while its record says libvirt.
    done = subprocess.run(
        [
            *(sys.executable, "-m", "harness.cli", "trial", "--profile", "tiny"),
            *("--agent", agent, "--backend", "libvirt", "--out", str(tmp_path)),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2
    assert "libvirt" in done.stderr
    assert list(tmp_path.iterdir()) == []
