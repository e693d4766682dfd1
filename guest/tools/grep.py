"""`grep {pattern, path?, include?}`: Python `re` over workspace files, bounded.

Python's `re` backtracks and cannot be interrupted from inside: `(a+)+$` against a
line of 40 `a`s runs for hours, and a per-line time check never gets control back.
So the scan runs in a forked child that streams its matches over a pipe, and the
parent kills it at the deadline, keeping what already arrived. The child also has
a CPU rlimit as a backstop. Forking (not spawning a new interpreter) keeps the
scan in code the runtime gate already verified.

Bounds: pattern length, files examined, bytes scanned, per-file size (larger files
are skipped and counted), matches reported, characters per line, output bytes and
wall time. Files are visited in sorted order, lines in order, so results are
deterministic whenever the scan completes within its bounds.
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import select
import signal
import time
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, Field

from guest.tools.base import ARGS_CONFIG, Tool
from guest.tools.bounded import BoundedText, utf8_len
from guest.tools.globpattern import MAX_PATTERN_CHARS, Glob, PatternError, compile_glob
from guest.tools.jail import Jail, JailError, RelPath
from guest.tools.read import SNIFF_BYTES, looks_binary
from guest.tools.result import ToolOutput, refusal
from guest.tools.walk import WalkBudget, walk

MAX_REGEX_CHARS = 512
MAX_MATCHES = 100
MAX_LINE_CHARS = 2000
MAX_FILES = 5000
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_SCAN_BYTES = 32 * 1024 * 1024
MAX_OUTPUT_BYTES = 50 * 1024
MAX_CHILD_BYTES = 2 * 1024 * 1024
DEFAULT_DEADLINE_S = 5.0
KILL_GRACE_S = 1.0  # the child stops itself at the deadline; killed this much later
CPU_MARGIN_S = 4  # CPU rlimit backstop: ceil(deadline) + margin, well after the kill


class GrepArgs(BaseModel):
    model_config = ARGS_CONFIG
    pattern: Annotated[
        str,
        Field(max_length=4 * MAX_REGEX_CHARS, description="Python regular expression to search"),
    ]
    path: Annotated[
        str | None,
        Field(
            max_length=4096,
            description="Directory to search, relative to the workspace root (default: root)",
        ),
    ] = None
    include: Annotated[
        str | None,
        Field(
            max_length=4 * MAX_PATTERN_CHARS,
            description="Glob for files to search, such as '*.py' or '*.{ts,tsx}'",
        ),
    ] = None


@dataclass
class _Scan:
    lines: list[str]
    total_matches: int
    omitted_bytes: int
    complete: bool


class GrepTool(Tool[GrepArgs]):
    name = "grep"
    description = (
        "Searches file contents in the workspace with a Python regular expression. "
        "Optional path (directory relative to the workspace root) and include (file glob "
        "such as '*.py'). Returns 'path:line: text' lines, sorted, at most 100 matches."
    )
    args_model = GrepArgs

    def __init__(self, jail: Jail, *, deadline_s: float = DEFAULT_DEADLINE_S) -> None:
        self._jail = jail
        self._deadline_s = deadline_s

    def target(self, args: GrepArgs) -> str:
        return args.path or ""

    def run(self, args: GrepArgs, path: RelPath | None) -> ToolOutput:
        assert path is not None
        if len(args.pattern) > MAX_REGEX_CHARS:
            return refusal("pattern_too_long")
        try:
            regex = re.compile(args.pattern)
        except (re.error, RecursionError, OverflowError, ValueError):
            return refusal("invalid_pattern")
        include: Glob | None = None
        if args.include is not None:
            try:
                include = compile_glob(args.include)
            except PatternError as exc:
                return refusal(exc.category)
        try:
            with self._jail.directory(path):
                pass
        except JailError as exc:
            return refusal(exc.category)
        scan = _scan_in_child(self._jail, path, regex, include, self._deadline_s)
        body = BoundedText(MAX_OUTPUT_BYTES)
        for line in scan.lines:
            body.add(line)
        body.count_omitted(scan.omitted_bytes)
        if not scan.complete:
            body.mark_incomplete()
        if scan.total_matches == 0:
            head = "No matches found\n"
        else:
            head = f"Found {scan.total_matches} matches\n"
        text = head + body.text
        if not scan.complete:
            text += "(Search stopped at its time or size bound; narrow path or include.)\n"
        elif body.truncated:
            text += "(Results are truncated. Use a more specific path, include or pattern.)\n"
        return ToolOutput(
            outcome="ok", text=text, truncated=body.truncated, omitted_bytes=body.omitted_bytes
        )


def _scan_in_child(
    jail: Jail, start: RelPath, regex: re.Pattern[str], include: Glob | None, deadline_s: float
) -> _Scan:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: scan, stream, and never return into the caller's stack
        code = 1
        try:
            os.close(read_fd)
            cpu = math.ceil(deadline_s) + CPU_MARGIN_S
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            soft_deadline = time.monotonic() + deadline_s
            with os.fdopen(write_fd, "wb") as out:
                for record in _scan(jail, start, regex, include, soft_deadline):
                    out.write(json.dumps(record).encode("utf-8") + b"\n")
                    out.flush()
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    return _collect(pid, read_fd, time.monotonic() + deadline_s + KILL_GRACE_S)


def _collect(pid: int, read_fd: int, hard_deadline: float) -> _Scan:
    """Read the child's stream until EOF, the deadline, or the byte bound; reap it."""
    chunks: list[bytes] = []
    size = 0
    killed = False
    try:
        while True:
            remaining = hard_deadline - time.monotonic()
            if remaining <= 0 or size > MAX_CHILD_BYTES:
                os.kill(pid, signal.SIGKILL)
                killed = True
                break
            ready, _, _ = select.select([read_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
    lines: list[str] = []
    total = 0
    omitted = 0
    complete = False
    for raw in b"".join(chunks).split(b"\n"):
        if not raw:
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            break  # a line cut by the kill
        if "m" in record:
            lines.append(str(record["m"]))
            total += 1
        elif "done" in record:
            done = record["done"]
            total = int(done["matches"])
            omitted = int(done["omitted"])
            complete = bool(done["complete"]) and not killed
    if killed or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        complete = False
    return _Scan(lines, total, omitted, complete)


def _scan(
    jail: Jail, start: RelPath, regex: re.Pattern[str], include: Glob | None, deadline: float
) -> Any:
    """Yield `{"m": line}` for the first matches, then one `{"done": stats}`."""
    budget = WalkBudget()
    matches = 0
    omitted = 0
    scanned = 0
    files = 0
    complete = True
    base = len(start.parts)
    for entry in walk(jail, start, budget):
        if time.monotonic() > deadline or scanned > MAX_SCAN_BYTES or files >= MAX_FILES:
            complete = False
            break
        if entry.kind != "file":  # hard links are refused by the jail when opened
            continue
        if include is not None and not include.matches("/".join(entry.path.parts[base:])):
            continue
        if entry.size > MAX_FILE_BYTES:
            complete = False
            continue
        files += 1
        try:
            with jail.regular_file(entry.path) as (fd, _st):
                if looks_binary(os.pread(fd, SNIFF_BYTES, 0)):
                    continue
                with os.fdopen(os.dup(fd), "rb") as stream:
                    for lineno, raw in enumerate(stream, 1):
                        scanned += len(raw)
                        text = raw.rstrip(b"\n").decode("utf-8", "replace")
                        if regex.search(text) is None:
                            continue
                        matches += 1
                        kept = text[:MAX_LINE_CHARS]
                        line = f"{entry.path.text}:{lineno}: {kept}\n"
                        cut = utf8_len(text) - utf8_len(kept)
                        if matches <= MAX_MATCHES:
                            omitted += cut
                            yield {"m": line}
                        else:
                            omitted += utf8_len(line) + cut
        except JailError:
            continue
    if budget.exhausted:
        complete = False
    yield {"done": {"matches": matches, "omitted": omitted, "complete": complete}}
