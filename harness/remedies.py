"""The one line that tells an operator how to fix a failed trial (receipts/failure.py).

Why: a verdict like `failed_model` says nothing a newcomer can act on; the reason
(`pins_missing`) and its fix were only inside the ZIP. Each remedy id names the command
that fixes it, filled with the trial's profile. Fixed texts only: nothing here comes
from a run's output.
"""

from __future__ import annotations

from receipts.failure import FailureReason, Remedy

_COMMANDS: dict[Remedy, str] = {
    "model_pin": "harness model pin --profile {profile} --source DIR",
    "model_prepare": "harness model prepare --profile {profile} --source DIR",
    "free_memory": "harness doctor  (free host memory up to the profile's admission floor)",
    "free_disk": "harness gc  (then free space under ~/.cache/harness; harness doctor checks)",
    "accel_tcg": "harness trial --profile {profile} --accel tcg",
    "cgroup_controller": "harness doctor  (mount a cgroup memory controller, v1 or v2)",
    "clean_checkout": "git stash --include-untracked  (the harness checkout must be clean)",
    "new_ticket": "harness dispatch issue --profile {profile}  (a ticket is used once)",
    "fill_cache": "run `make setup` with network access, or the steps it runs: "
    "`harness image build`, `harness model prepare --profile {profile}` (they fill "
    "~/.cache/harness; later trials run offline)",
    "loopback_up": "ip link set lo up  (this network namespace's loopback is down, e.g. "
    "under `unshare -n`; the SSH forward to the guest needs it; `make setup` does this)",
}


def fix_command(remedy: Remedy, profile: str) -> str:
    """The command line that fixes `remedy` for `profile`."""
    return _COMMANDS[remedy].format(profile=profile)


def describe(reason: FailureReason | None, profile: str) -> list[tuple[str, str]]:
    """Labelled lines for human output: the failed stage, its category, and a fix."""
    if reason is None:
        return []
    lines = [("failed", f"{reason.stage}: {reason.category}")]
    if reason.remedy is not None:
        lines.append(("fix", fix_command(reason.remedy, profile)))
    return lines
