"""The loopback probe and .ci/loopback-up, in a real fresh network namespace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from host.loopback import loopback_usable

REPO = Path(__file__).resolve().parents[2]
PROBE = "from host.loopback import loopback_usable; print(loopback_usable())"


def _in_new_netns(script: str) -> str:
    """Run `script` with sh in a new network namespace (loopback down), return stdout."""
    done = subprocess.run(
        ["unshare", "-n", "sh", "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_this_hosts_loopback_is_usable() -> None:
    assert loopback_usable() is True


def test_a_fresh_namespace_with_lo_down_is_refused() -> None:
    # Binding and listening succeed there; only the connect fails. A probe that
    # stops at bind/listen answers True here.
    assert _in_new_netns(f"{sys.executable} -c '{PROBE}'").strip() == "False"


def test_loopback_up_fixes_it_and_is_idempotent() -> None:
    out = _in_new_netns(
        f"bash .ci/loopback-up && bash .ci/loopback-up && {sys.executable} -c '{PROBE}'"
    )
    lines = out.strip().splitlines()
    assert lines[-1] == "True"
    assert (
        lines.count(
            "setup: bringing the loopback interface up (it is down in this network namespace)"
        )
        == 1
    )
