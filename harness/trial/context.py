"""What every stage of a trial reads: what was asked for and which trial this is.

Fixed before the first stage runs (frozen): a stage cannot change what the trial was
asked to do, only record what it did (evidence.py) and hand on what it made
(`Prepared`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.dispatch import SuiteMembership
from harness.profiles import Profile
from harness.profiles.load import PROFILES_DIR
from harness.trial.diskfiles import REPO
from harness.trial.gueststart import GuestStartRequest
from harness.trial.modelstage import PreparedModel
from harness.trial.worker import Worker
from harness.version import HARNESS_VERSION
from host.image.build import GuestImage
from host.runtime import GuestRuntime
from host.vm.backend import VmBackend
from host.vm.categories import AccelRequest
from receipts.agentclis import AgentIdentity
from receipts.records.agent import AgentName
from receipts.records.trial import Policy
from receipts.vocabulary import Backend, PlacementRequest


@dataclass(frozen=True)
class TrialOptions:
    profile: Profile
    task: str
    script: Path | None
    """A scripted policy's steps; None when the model drives."""
    out_dir: Path
    backend: Backend = "qemu"
    accel: AccelRequest = "auto"
    dispatch: Path | None = None
    suite_member: SuiteMembership | None = None
    """With a suite ticket as `dispatch`: the suite run and member slot this trial is."""
    ledger: Path | None = None
    cache: Path = Path.home() / ".cache" / "harness"
    placement: PlacementRequest | None = None
    """Overrides the profile's `worker.placement` (None keeps the profile's)."""
    locks: Path = PROFILES_DIR
    """Where the operator's pin locks are (hf_snapshot profiles): beside the profiles."""
    guest_start: GuestStartRequest = "snapshot"
    """Restore guests from the image's snapshot where possible, or always boot cold."""
    agent: AgentName = "harness_loop"
    """Whose code is the agent: the harness's own loop, or a pinned agent CLI
    (receipts/agentclis.py) driven by the model or, with `script`, by the scripted model."""


@dataclass(frozen=True)
class TrialContext:
    """The options, the trial's identity and the VM backend it runs its guests on."""

    options: TrialOptions
    trial_id: str
    tag: str
    """The trial id's first 16 hex digits: what its host resources are named by."""
    backend: VmBackend

    @property
    def profile(self) -> Profile:
        return self.options.profile

    @property
    def task_dir(self) -> Path:
        return REPO / "profiles" / "tasks" / self.options.task

    @property
    def trials_root(self) -> Path:
        """Where trials keep their leases, scratch directories and guests' folders."""
        return self.options.cache / "trials"

    @property
    def dispatched(self) -> bool:
        return self.options.dispatch is not None

    @property
    def policy(self) -> Policy:
        if self.options.script is not None:
            return "scripted"
        if self.profile.agent.tool_choice == "required":
            # The loop asks for it; for an agent CLI (which asks `auto`) the worker is
            # started to apply it (harness/trial/worker.py `client_flags`).
            return "model_tool_required"
        return "model"

    @property
    def agent(self) -> AgentIdentity:
        """Whose code is the agent: what the host launches and the agent record must name."""
        if self.options.agent == "harness_loop":
            return AgentIdentity.harness_loop(HARNESS_VERSION)
        return AgentIdentity.cli(self.options.agent)

    @property
    def placement_requested(self) -> PlacementRequest:
        return self.options.placement or self.profile.worker.placement


@dataclass
class Prepared:
    """What a stage made for the stages after it: the model, the image, the guest
    runtime, and where the worker runs. Not evidence: the records say what was made."""

    model: PreparedModel | None = None
    image: GuestImage | None = None
    runtime: GuestRuntime | None = None
    """What the agent and the verifier import (and the gate stage verifies)."""
    worker: Worker | None = None
    """Where the worker runs (harness/trial/worker.py); None for a scripted trial."""
