"""A real agent sandbox on the test host (imported, not collected).

The guest mounts cgroup v2 with the cpu, memory and pids controllers; this host's
cgroup v2 (the hybrid hierarchy's /sys/fs/cgroup/unified) has none of them, so here
the sandbox applies no controller limit (`limits=None`) and everything else is real:
the agent uid, no groups, no_new_privs, the private mounts, one cgroup per call,
cgroup.kill and the emptiness read. The limits are exercised in a real guest
(tests/harness/trial/test_confinement_vm.py).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path

from guest.tools.sandbox import (
    CGROUP_ROOT,
    CgroupLimits,
    Sandbox,
    create_parent,
    finish,
    give_workspace,
)

HYBRID_V2 = Path("/sys/fs/cgroup/unified")


def sandbox_root() -> tuple[Path, bool]:
    """Where this host's cgroup v2 is, and whether its controllers can be enabled there."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return CGROUP_ROOT, True
    return HYBRID_V2, False


@contextlib.contextmanager
def host_sandbox(workspace: Path | None = None) -> Iterator[Sandbox]:
    """A parent cgroup of our own (a random name), the workspace given to the agent uid;
    on exit every call cgroup and the parent are killed and removed."""
    root, controllers = sandbox_root()
    sandbox = Sandbox(
        parent=root / f"harness-agent-test-{secrets.token_hex(4)}",
        limits=CgroupLimits() if controllers else None,
    )
    create_parent(sandbox)
    if workspace is not None:
        give_workspace(workspace, sandbox)
    try:
        yield sandbox
    finally:
        finish(sandbox)
