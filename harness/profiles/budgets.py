"""Memory budgets that can be met together: the relations a profile's budgets must satisfy.

Why: each budget is enforced where it is applied (docs/engineering.md §11), so budgets
that contradict each other do not fail loudly, they fail as a refused request or a
killed VM an hour into a trial. The qwen4b profile shipped a request floor (10.5 GiB)
that could never be met inside its own 11 GiB worker cgroup once the model was loaded:
every request was refused. These checks refuse such a profile before anything starts.

What the worker's admission actually computes (guest/worker/memory.py, engine.py):
headroom `h` is the minimum of `limit - (usage - inactive_file)` over the worker's
cgroup and each ancestor with a limit, and of the host's MemAvailable; a request is
admitted when `need + request_admission_floor <= h`, where `need` is what the request
adds beyond the loaded model (llama.cpp allocates and clears the whole context's KV
cache at load, so the KV cache is in the loaded working set, not in `need`); during
generation the watchdog cancels when `h < runtime_guard`. Mapped weights count as used
once a forward pass has touched them (they move to the active file list), so after the
first request `h` is `worker_cgroup_limit - model_working_set` at best.

With G guest_ram, Q qemu_cgroup_limit, H host_admission_floor, W worker_cgroup_limit,
F request_admission_floor, R runtime_guard, M model_working_set, T the TCG translation
cache (vm.tcg_tb_size_mib) and N = REQUEST_NEED_BOUND, every profile must satisfy:

1. Q >= G + T. QEMU's cgroup holds guest RAM and QEMU's own memory; under TCG the
   translation cache alone is T, outside guest RAM. Less, and a guest that uses its RAM
   gets QEMU OOM-killed by the host.
2. H >= Q. The host admits a trial only with room for the VM's whole budget.
3. Worker in the guest (placement guest, or auto under KVM): W < G. The worker's
   cgroup sits inside the guest's RAM, beside the guest's kernel and the agent.
4. Worker on the host (placement host, or auto under TCG): H >= Q + W. Both cgroups
   live on the host at once; if the host floor does not cover both limits, the host can
   run out before either limit is reached, and neither budget is a budget. `auto` must
   satisfy 3 and 4, since the accelerator decides which applies.
5. R <= F. An admitted request leaves at least F of headroom once its `need` is used;
   a guard above F would cancel a request that behaved exactly as admitted.
6. M + N + F <= W. After the first request the best headroom inside the worker's own
   cgroup is W - M; a request needs `need + F` of it. If this fails, no request is ever
   admitted once the model's weights are active (or only the first one is).
"""

from __future__ import annotations

from typing import Final

from receipts.vocabulary import PlacementRequest

MIB: Final = 1 << 20

REQUEST_NEED_BOUND: Final = 64 * MIB
"""Upper bound of the worker's per-request `need` (guest/worker/engine.py `need_bytes`:
two float32 logit rows of the vocabulary plus 16 MiB of scratch, 17.2 MiB at Qwen's
151,936 tokens; below 64 MiB for any vocabulary under 6 million tokens)."""


def budget_contradiction(
    *,
    guest_ram: int,
    qemu_cgroup_limit: int,
    host_admission_floor: int,
    worker_cgroup_limit: int,
    request_admission_floor: int,
    runtime_guard: int,
    model_working_set: int,
    tcg_tb_size_mib: int,
    placement: PlacementRequest,
) -> str | None:
    """The first relation (module docstring) the budgets break, as a stable one-line
    message naming the keys; None when they can be met together."""
    if qemu_cgroup_limit < guest_ram + tcg_tb_size_mib * MIB:
        return (
            "memory.qemu_cgroup_limit must be at least memory.guest_ram + vm.tcg_tb_size_mib"
            " (QEMU's translation cache lives outside guest RAM)"
        )
    if host_admission_floor < qemu_cgroup_limit:
        return "memory.host_admission_floor must be at least memory.qemu_cgroup_limit"
    if placement in ("guest", "auto") and worker_cgroup_limit >= guest_ram:
        return (
            f'with placement = "{placement}", memory.worker_cgroup_limit must be below'
            " memory.guest_ram (the worker's cgroup is inside the guest)"
        )
    if placement in ("host", "auto") and (
        host_admission_floor < qemu_cgroup_limit + worker_cgroup_limit
    ):
        return (
            f'with placement = "{placement}", memory.host_admission_floor must be at least'
            " memory.qemu_cgroup_limit + memory.worker_cgroup_limit (both cgroups are on"
            " the host)"
        )
    if runtime_guard > request_admission_floor:
        return "memory.runtime_guard must not exceed memory.request_admission_floor"
    if model_working_set + REQUEST_NEED_BOUND + request_admission_floor > worker_cgroup_limit:
        return (
            "memory.model_working_set + 64 MiB (a request's need) +"
            " memory.request_admission_floor must fit in memory.worker_cgroup_limit"
        )
    return None
