"""One row of the trial's stage table, and the state the stages share.

A stage is a name (the closed `Stage`), a progress deadline, what it does, and what
must follow it however it ended. The pipeline runs the table's rows in order
(pipeline.py); which rows a trial runs is receipts/verdict.py's `trial_stages`, the same
answer the audit requires records by. Each row hands its stage function only the parts
of the state it may touch: the function's parameters are that list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from harness.trial.context import Prepared, TrialContext
from harness.trial.evidence import Evidence
from harness.trial.guests import Guests
from harness.trial.owned import OwnedResources
from harness.trial.verifierprep import VerifierPreparation
from receipts.records.trial import Stage


@dataclass(frozen=True)
class TrialState:
    """What the stages share: what they read (`context`), where the trial's files go
    (`scratch`), where what they acquire is registered (`owned`), what they hand on
    (`prepared`), the guests they reach (`guests`), what they record (`evidence`), and
    the verification guest's preparation (`verifier`, begun beside the agent or after)."""

    context: TrialContext
    scratch: Path
    owned: OwnedResources
    prepared: Prepared
    guests: Guests
    evidence: Evidence
    verifier: VerifierPreparation


StageAction = Callable[[TrialState], Awaitable[None]]


def _no_deadline(_state: TrialState) -> float | None:
    return None


@dataclass(frozen=True)
class StageSpec:
    name: Stage
    run: StageAction
    """Raises StageFailed once its record says why the trial ends here."""
    deadline_s: Callable[[TrialState], float | None] = _no_deadline
    """The deadline the progress display shows (the stage enforces its own)."""
    after: StageAction | None = None
    """What runs once the stage has ended, however it ended, before the next one (the
    worker stops after the agent: its records are final only then)."""
