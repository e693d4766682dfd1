"""The operator's run budgets (RunLimits) are bounded at both ends, exactly.

Why bounds: a budget outside them is a profile error, refused when the profile is read,
not a confusing failure of the first test run: no time, CPU or process at all; an
address space too small for the interpreter to start (64 MiB); more than a 48-bit
address space or file; more output kept than the model could be shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from guest.tools.confine import RunLimits

MIB = 1024 * 1024

# field: (smallest accepted, just below it, largest accepted, just above it)
BOUNDS: dict[str, tuple[Any, Any, Any, Any]] = {
    "wall_seconds": (1e-6, 0.0, 24 * 3600.0, 24 * 3600 + 1e-6),
    "cpu_seconds": (1, 0, 24 * 3600, 24 * 3600 + 1),
    "address_space_bytes": (64 * MIB, 64 * MIB - 1, 2**48, 2**48 + 1),
    "file_size_bytes": (1, 0, 2**48, 2**48 + 1),
    "nproc": (1, 0, 1_000_000, 1_000_001),
    "tail_lines": (1, 0, 1000, 1001),
    "tail_bytes": (256, 255, MIB, MIB + 1),
}


@pytest.mark.parametrize("field", sorted(BOUNDS))
def test_each_budget_is_bounded_exactly(field: str) -> None:
    low, below, high, above = BOUNDS[field]
    assert getattr(RunLimits.model_validate({field: low}), field) == low
    assert getattr(RunLimits.model_validate({field: high}), field) == high
    for bad in (below, above):
        with pytest.raises(ValidationError):
            RunLimits.model_validate({field: bad})


def test_budgets_are_closed_and_frozen() -> None:
    with pytest.raises(ValidationError):
        RunLimits.model_validate({"wall_seconds": 1.0, "unknown": 1})
    with pytest.raises(ValidationError):
        RunLimits.model_validate({"cpu_seconds": "5"})  # strict: a string is not seconds
    limits = RunLimits()
    with pytest.raises(ValidationError):
        limits.nproc = 2  # type: ignore[misc]


def test_default_budgets_are_the_ones_every_agent_run_gets() -> None:
    """No profile field sets RunLimits: the agent's ToolSet is built without
    `run_limits` (guest/agent/__main__.py), so every run_tests call gets exactly these,
    and the verifier (guest/verify/run.py) overrides only wall and CPU time. They are
    what docs/receipts.md promises a reviewer; this reads them from there, so the code
    and the page cannot drift apart."""
    documented = _documented_run_limits()
    assert RunLimits().model_dump() == documented
    assert documented == {
        "wall_seconds": 600,
        "cpu_seconds": 600,
        "address_space_bytes": 4 * 1024**3,  # 4 GiB
        "file_size_bytes": 256 * MIB,
        "nproc": 1024,
        "tail_lines": 60,
        "tail_bytes": 16 * 1024,  # 16 KiB
    }


def _documented_run_limits() -> dict[str, int]:
    """The table after the `run-limits` marker in docs/receipts.md: `| name | value ... |`."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "receipts.md").read_text()
    table = text.split("<!-- run-limits: read by tests/guest/tools/test_run_limits.py -->", 1)[1]
    limits: dict[str, int] = {}
    for line in table.strip().splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 2:
            break
        limits[cells[0].strip("`")] = int(cells[1].split()[0])
    return limits
