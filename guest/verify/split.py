"""Run a task's hidden pytest command as a split judgement: two processes, two users.

The judge (guest/verify/judgeside.py: pytest, the hidden tests, the report) runs as
JUDGE, a uid that is neither the agent's nor `nobody`; the solution's process
(guest/verify/agentside.py: the agent's modules) runs as `nobody` in the workspace
copy. Both get the verifier's rlimits, deadline and an empty network namespace
(guest/tools/confine.run_confined), and each its own process group.

Why two users: the agent's process must not be able to signal, trace or write into
the judge. The hidden tests, the judge's directory and the report directory are not
writable by `nobody` (the hidden tests live outside the workspace copy, whose
directory `nobody` owns and could otherwise rename them away); the socket's directory
is the judge's, searchable but not listable or writable by anyone else, and the judge
accepts one connection, from `nobody` only (SO_PEERCRED).

Both processes import our modules from the runtime root this verifier was loaded
from: the gate verified that root, and it is a read-only mount (guest/gate), so a
child re-importing it imports the verified bytes. Each removes the root from its
sys.path before pytest or the agent's code is imported.
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import guest
from guest.tools.confine import RunAs, RunLimits, RunReport, run_confined

JUDGE: RunAs = (64990, 64990)
"""The judge's uid and gid: not root, not `nobody` (65534), not the agent's (61000)."""
RUNTIME_ROOT = str(Path(guest.__file__).resolve().parent.parent)
SERVER_GRACE_S = 10.0
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); import guest.verify.{} as m; "
    "sys.exit(m.main(sys.argv[1:]))"
)


@dataclass(frozen=True)
class SplitRun:
    judge: RunReport
    server: RunReport | None
    """None when the solution's process could not be started at all."""


def judge_argv(
    pytest_args: Sequence[str], socket_path: str, peer_uid: int, stubs: Path, python: str
) -> list[str]:
    boot = _BOOT.format("judgeside")
    return [python, "-I", "-B", "-c", boot, RUNTIME_ROOT, socket_path, str(peer_uid), str(stubs),
            "--", *pytest_args]  # fmt: skip


def server_argv(socket_path: str, workspace: Path, python: str) -> list[str]:
    boot = _BOOT.format("agentside")
    return [python, "-I", "-B", "-c", boot, RUNTIME_ROOT, socket_path, str(workspace)]


def run_split(
    pytest_args: Sequence[str],
    *,
    judge_dir: Path,
    workspace: Path,
    ipc_dir: Path,
    stubs: Path,
    limits: RunLimits,
    env: Mapping[str, str],
    server_as: RunAs | None,
    judge_as: RunAs | None,
    python: str = "python3",
) -> SplitRun:
    """Run the judge and the solution's process side by side until the judge ends.

    `server_as`/`judge_as` None run as the caller (host tests that are not root)."""
    socket_path = str(ipc_dir / "judge.sock")
    peer_uid = server_as[0] if server_as is not None else os.getuid()
    confined = {"limits": limits, "net_policy": "required", "mechanism": "unshare_syscall"}
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        server = pool.submit(
            run_confined,
            server_argv(socket_path, workspace, python),
            cwd=str(workspace),
            env={**env, "HOME": str(workspace)},
            run_as=server_as,
            **confined,  # type: ignore[arg-type]
        )
        judge = run_confined(
            judge_argv(pytest_args, socket_path, peer_uid, stubs, python),
            cwd=str(judge_dir),
            env={**env, "HOME": str(judge_dir)},
            run_as=judge_as,
            **confined,  # type: ignore[arg-type]
        )
        # The judge closed its end: the solution's process reads EOF and exits; its own
        # deadline (the same limits) bounds it if it does not.
        try:
            served: RunReport | None = server.result()
        except OSError:
            served = None
    return SplitRun(judge=judge, server=served)


def default_python() -> str:
    """The guest's interpreter for the children (the verifier's own, on the host)."""
    return "python3" if sys.executable.startswith("/usr/bin/") else sys.executable
