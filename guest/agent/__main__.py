"""Guest entry point: run the agent on a workspace and write its records.

    python3 -m guest.agent --task-dir D --workspace W --records OUT.json
        (--script FILE | --endpoint URL [--uds PATH] --model NAME --max-tokens N
         --request-timeout-s S) --limits JSON --approvals POLICY --agent-version V

Run through the runtime gate (guest/gate/bootstrap.py), never directly, as root: it
prepares the sandbox (guest/tools/sandbox.py: the workspace becomes the agent uid's,
the records' directory must be out of that uid's reach) and every command a tool runs
for the model runs as that uid in its own cgroup. After the loop it reads what is left
of the uid. Writes one canonical JSON object {agent, turns, tool_calls} of closed
records to OUT (as root, where the agent's code cannot write); prints nothing of the
model's or the tools' text.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from guest.agent.loop import AgentLimits, AgentRun, run_agent
from guest.agent.policy import ModelPolicy, Policy, ScriptedPolicy
from guest.task import load_task
from guest.tools.registry import ToolSet
from guest.tools.sandbox import AGENT_CGROUP, CgroupLimits, Sandbox, finish, prepare
from receipts.agentclis import AgentIdentity
from receipts.canonical import canonical


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="guest.agent")
    parser.add_argument("--task-dir", type=Path, required=True)
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--records", type=Path, required=True)
    parser.add_argument("--limits", required=True, help="JSON object of AgentLimits fields")
    parser.add_argument("--approvals", default="approve_all")
    parser.add_argument(
        "--agent-version", required=True, help="the harness's version: this loop's own"
    )
    parser.add_argument("--script", type=Path)
    parser.add_argument("--endpoint")
    parser.add_argument("--uds")
    parser.add_argument("--model", default="model")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--tool-choice", choices=("auto", "required"), default="auto")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--request-timeout-s", type=float, default=600.0)
    parser.add_argument("--cgroup-parent", type=Path, default=AGENT_CGROUP)
    parser.add_argument(
        "--cgroup-limits",
        choices=("on", "off"),
        default="on",
        help="off: no controller limits, for a host whose cgroup v2 has no controllers "
        "(the test host's hybrid hierarchy); a trial never passes it",
    )
    return parser.parse_args(argv)


def records_json(run: AgentRun) -> bytes:
    return canonical(
        {
            "agent": run.agent.to_json(),
            "turns": [turn.to_json() for turn in run.turns],
            "tool_calls": [call.to_json() for call in run.tool_calls],
        }
    )


async def main_async(args: argparse.Namespace, sandbox: Sandbox) -> AgentRun:
    task = load_task(args.task_dir, full=False)
    limits = AgentLimits(**json.loads(args.limits))
    policy: Policy
    model: ModelPolicy | None = None
    if args.script is not None:
        policy = ScriptedPolicy.from_file(args.script)
    else:
        model = ModelPolicy(
            args.endpoint,
            args.model,
            uds=args.uds,
            tool_choice=args.tool_choice,
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            seed=args.seed,
            request_timeout_s=args.request_timeout_s,
        )
        policy = model
    try:
        with ToolSet(
            args.workspace, list(task.tests.command), [], args.approvals, sandbox=sandbox
        ) as tools:
            identity = AgentIdentity.harness_loop(args.agent_version)
            return await run_agent(
                task, tools, policy, limits, lambda: finish(sandbox), identity=identity
            )
    finally:
        if model is not None:
            await model.aclose()


def main(argv: list[str]) -> int:
    args = parse(argv)
    sandbox = Sandbox(
        parent=args.cgroup_parent,
        limits=CgroupLimits() if args.cgroup_limits == "on" else None,
    )
    prepare(sandbox, args.workspace, args.records)  # refuses (exits non-zero) if it cannot
    run = asyncio.run(main_async(args, sandbox))
    args.records.write_bytes(records_json(run))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
