"""The fix lines an operator reads (harness/remedies.py)."""

from __future__ import annotations

import typing

from harness.remedies import fix_command
from receipts.failure import Remedy


def test_every_remedy_has_a_command_line() -> None:
    for remedy in typing.get_args(Remedy):
        assert fix_command(remedy, "tiny").strip()


def test_a_fetch_failure_names_set_up_and_the_steps_it_runs_for_the_profile() -> None:
    """What tests/harness/trial/test_offline_trial.py reads from a real offline trial;
    here without a VM, so a changed text fails the fast suite first."""
    fix = fix_command("fill_cache", "smollm2")
    assert fix.startswith("run `make setup`") and "network" in fix
    assert "harness image build" in fix
    assert "harness model prepare --profile smollm2" in fix
