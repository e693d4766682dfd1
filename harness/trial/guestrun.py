"""The stages that run in the agent's guest: the runtime gate, the worker, the agent.

Each is handed the agent's guest (the only one that exists while they run), the runtime
the gate verifies, and what it records into.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness.trial.context import TrialContext
from harness.trial.evidence import Evidence, StageFailed
from harness.trial.guestcmd import GATE_SOURCE, READ_ONLY, gated_command, parse_gate_line
from harness.trial.guestrecords import GuestOutputInvalid, read_agent_output, unread_agent_record
from harness.trial.guests import Guest
from harness.trial.modelstage import PreparedModel
from harness.trial.owned import OwnedResources
from harness.trial.turnbinding import bind_turns
from harness.trial.worker import Worker, WorkerLaunch, WorkerStageFailed, client_flags
from host.runtime import GuestRuntime
from receipts.records import GateRecord
from receipts.verdict import stage_succeeded

WORK = "/work"
GATE_DEADLINE_S = 60.0


def _ms(since: float) -> int:
    return int((time.monotonic() - since) * 1000)


async def gate_stage(runtime: GuestRuntime | None, guest: Guest, evidence: Evidence) -> None:
    """The guest runtime verified against its pin table before anything imports it."""
    assert runtime is not None
    started = time.monotonic()
    result = await guest.run(
        gated_command(runtime.pins_sha256, "guest.gate.ready"),
        GATE_DEADLINE_S,
        stdin=GATE_SOURCE,
    )
    line = parse_gate_line(result.stdout)
    category = line.category if line is not None else "unread"
    verified = line.files_verified if line is not None else 0
    evidence.put(
        "gate",
        GateRecord(
            category=category,
            pin_table_sha256=runtime.pins_sha256,
            files_verified=verified,
            duration_ms=_ms(started),
        ),
    )
    if category != "ok" or result.exit_status != 0:
        raise StageFailed


async def worker_stage(
    *,
    context: TrialContext,
    scratch: Path,
    owned: OwnedResources,
    worker: Worker | None,
    model: PreparedModel | None,
    guest: Guest,
    evidence: Evidence,
) -> None:
    """Start the worker where its placement says; it registers what it owns there."""
    assert model is not None and model.gguf is not None and worker is not None
    sha256 = model.record.gguf_sha256
    assert sha256 is not None
    launch = WorkerLaunch(
        profile=context.profile,
        gguf=model.gguf,
        sha256=sha256,
        scratch=scratch,
        tag=context.tag,
        owner=owned.owner(worker.owns),
        session=guest.session,
        guest_gone=guest.gone,
        client_flags=client_flags(
            agent_cli=context.agent.sha256 is not None,
            tools_required=context.policy == "model_tool_required",
        ),
    )
    try:
        await worker.start(launch)
    except WorkerStageFailed as failure:
        evidence.put("worker", worker.failed_record(failure.category, sha256))
        raise StageFailed from None


async def stop_worker(
    worker: Worker | None, owned: OwnedResources, evidence: Evidence, *, agent_cli: bool = False
) -> None:
    """Stop the worker before verification; its records are final once it has exited.
    For an agent CLI (`agent_cli`), each turn is then bound to the request it was, by the
    worker's records (harness/trial/turnbinding.py)."""
    stopped = await worker.stop(owned) if worker is not None else None
    if stopped is not None:
        record, evidence.worker_requests = stopped
        evidence.put("worker", record)
        if agent_cli:
            evidence.turns = bind_turns(evidence.turns, evidence.worker_requests)


CLI_EXECUTABLE = f"{READ_ONLY}/agents/cli"
"""Where the read-only disk holds the pinned agent CLI's executable (guestboot.py)."""


def agent_args(
    context: TrialContext, worker: Worker | None, model: PreparedModel | None
) -> list[str]:
    """`guest.agent`'s arguments: the task, the workspace, the budgets, which agent (the
    loop at the harness version, or a pinned CLI with its executable and digest), and
    either the script or the worker's endpoint with the model's name and inference
    settings."""
    profile, options, agent = context.profile, context.options, context.agent
    limits = {
        "max_turns": profile.agent.max_turns,
        "max_tool_calls": profile.agent.max_tool_calls,
        "max_invalid_outputs": profile.agent.max_invalid_outputs,
        "max_total_tokens": profile.agent.max_total_tokens,
        "wall_deadline_s": profile.agent.wall_deadline_s,
    }
    args = [
        "--task-dir",
        f"{WORK}/task/{options.task}",
        "--workspace",
        f"{WORK}/workspace",
        "--records",
        f"{WORK}/agent.json",
        "--limits",
        json.dumps(limits),
        "--approvals",
        profile.agent.approvals,
        "--agent-version",
        agent.version,
    ]
    if agent.sha256 is not None:
        args += [
            "--cli",
            agent.name,
            "--cli-executable",
            CLI_EXECUTABLE,
            "--cli-sha256",
            agent.sha256,
            "--context-tokens",
            str(profile.inference.context_tokens),
        ]
    if options.script is not None:
        return [*args, "--script", f"{READ_ONLY}/script.json"]
    assert model is not None and model.record.gguf_sha256 is not None
    assert worker is not None
    inference = profile.inference
    tool_choice = "required" if context.policy == "model_tool_required" else "auto"
    return [
        *args,
        "--endpoint",
        worker.url,
        "--model",
        f"gguf-{model.record.gguf_sha256[:12]}",
        "--max-tokens",
        str(inference.max_tokens),
        "--tool-choice",
        tool_choice,
        "--temperature",
        "0",
        "--seed",
        "0",
        "--request-timeout-s",
        str(inference.request_deadline_s),
    ]


async def agent_stage(
    *,
    context: TrialContext,
    runtime: GuestRuntime | None,
    worker: Worker | None,
    model: PreparedModel | None,
    guest: Guest,
    evidence: Evidence,
) -> None:
    """The task copied to the agent's working tree, then the agent through the gate; its
    record, turns and tool calls as the guest wrote them (or the host's reading)."""
    assert runtime is not None
    task = context.options.task
    prepare = (
        f"mkdir -m 0755 -p {WORK} && cp -a {READ_ONLY}/workspace {WORK}/workspace && "
        f"mkdir -p {WORK}/task && cp -a {READ_ONLY}/task/{task} {WORK}/task/"
    )
    result = await guest.run(prepare, 60.0)
    if result.exit_status != 0:
        raise StageFailed
    args = agent_args(context, worker, model)
    deadline = float(context.profile.agent.wall_deadline_s) + 60.0
    failure = await guest.gated(runtime.pins_sha256, "guest.agent", args, deadline)
    if failure is not None:
        evidence.put("agent", unread_agent_record(context.policy, context.agent, failure))
        raise StageFailed
    try:
        output = read_agent_output(await guest.fetch(f"{WORK}/agent.json"), context.agent)
    except GuestOutputInvalid:
        evidence.put("agent", unread_agent_record(context.policy, context.agent))
        raise StageFailed from None
    evidence.put("agent", output.agent)
    evidence.turns, evidence.tool_calls = output.turns, output.tool_calls
    if not stage_succeeded(output.agent):
        raise StageFailed
