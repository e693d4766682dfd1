"""Whether a process still runs, as /proc says.

Its own module because every release path reads it (host/release.py proves a killed
process gone, the VM backends and the host worker prove theirs), and host/release.py
sits below host/vm/: the reading must not pull the VM package in.
"""

from __future__ import annotations

from pathlib import Path


def process_running(pid: int) -> bool:
    """Whether `pid` still runs. A zombie (Z) or dead (X) entry holds no resources but
    its pid: it waits only for a parent's (or a slow init's) reap."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell: never claim a process is gone without reading it
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")
