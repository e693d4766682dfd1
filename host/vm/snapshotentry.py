"""A verified snapshot entry as a VM restores it (host/vm/snapshot.py makes and checks it).

Its own module so that the VM spec can name it without importing the store, which
starts guests itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Snapshot:
    """A verified entry: its key, the memory stream, the root disk's layer."""

    key: str
    memory: Path
    disk: Path
