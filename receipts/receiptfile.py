"""What a trial's receipt file is called: `trial-<trial id>.zip` in its output directory.

One home for the name: the trial writes its receipt under it, and the suite executors
find a member's receipt by it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

RECEIPT_GLOB: Final = "trial-*.zip"


def receipt_path(out_dir: Path, trial_id: str) -> Path:
    """Where the trial `trial_id` writes its receipt."""
    return out_dir / f"trial-{trial_id}.zip"


def receipt_files(directory: Path) -> list[Path]:
    """Every trial receipt name in `directory`, sorted; none when it is not a directory."""
    return sorted(directory.glob(RECEIPT_GLOB)) if directory.is_dir() else []
