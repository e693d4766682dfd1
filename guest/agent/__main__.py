"""Guest entry point: run the agent on a workspace and write its records.

    python3 -m guest.agent --task-dir D --workspace W --records OUT.json
        (--script FILE | --endpoint URL [--uds PATH] --model NAME --max-tokens N
         --request-timeout-s S) --limits JSON --approvals POLICY --agent-version V
        [--cli NAME --cli-executable PATH --cli-sha256 HEX --context-tokens N]

Run through the runtime gate (guest/gate/bootstrap.py), never directly, as root: it
prepares the sandbox (guest/tools/sandbox.py: the workspace becomes the agent uid's,
the records' directory must be out of that uid's reach) and every command a tool runs
for the model runs as that uid in its own cgroup. After the loop it reads what is left
of the uid. Writes one canonical JSON object {agent, turns, tool_calls} of closed
records to OUT (as root, where the agent's code cannot write); prints nothing of the
model's or the tools' text.

With `--cli`, a pinned agent CLI (guest/agent/cli/) is the agent instead of the loop,
against the endpoint, or with `--script` against a scripted model on the guest's
loopback (guest/agent/cli/scripted_model.py); `--agent-version` is then the CLI's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from guest.agent.cli.adapter import CliAdapter, CliSettings
from guest.agent.cli.opencode import OpenCode
from guest.agent.cli.run import run_cli
from guest.agent.cli.scripted_model import scripted_model
from guest.agent.loop import AgentLimits, AgentRun, run_agent
from guest.agent.policy import ModelPolicy, Policy, ScriptedPolicy
from guest.task import load_task
from guest.tools.registry import ToolSet
from guest.tools.sandbox import AGENT_CGROUP, CgroupLimits, Sandbox, finish, prepare
from receipts.agentclis import AgentIdentity
from receipts.canonical import canonical
from receipts.records.agent import AgentName
from receipts.records.trial import Policy as PolicyName

CLI_ADAPTERS: dict[AgentName, type[CliAdapter]] = {"opencode": OpenCode}
SCRIPTED_MODEL = "scripted"
"""The model name a CLI is given for the scripted model."""


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="guest.agent")
    parser.add_argument("--task-dir", type=Path, required=True)
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--records", type=Path, required=True)
    parser.add_argument("--limits", required=True, help="JSON object of AgentLimits fields")
    parser.add_argument("--approvals", default="approve_all")
    parser.add_argument(
        "--agent-version", required=True, help="the harness's version, or the CLI's pinned one"
    )
    parser.add_argument("--cli", choices=sorted(CLI_ADAPTERS), help="an agent CLI, not the loop")
    parser.add_argument("--cli-executable", type=Path, help="the CLI's pinned executable")
    parser.add_argument("--cli-sha256", help="its pinned SHA-256, checked before it runs")
    parser.add_argument("--context-tokens", type=int, default=4096)
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


def cli_run(args: argparse.Namespace, sandbox: Sandbox) -> AgentRun:
    """An agent CLI on the task, against the worker's endpoint or the scripted model.
    Raises ExecutableRefused (the process exits non-zero, no records) before it runs."""
    task = load_task(args.task_dir, full=False)
    limits = AgentLimits(**json.loads(args.limits))
    adapter = CLI_ADAPTERS[args.cli]()
    identity = AgentIdentity(args.cli, args.agent_version, args.cli_sha256)
    prompt = adapter.prompt(task.prompt, list(task.tests.command))

    def run(endpoint: str, model: str, policy: PolicyName) -> AgentRun:
        settings = CliSettings(
            endpoint=endpoint,
            model=model,
            max_tokens=args.max_tokens,
            context_tokens=args.context_tokens,
            max_turns=limits.max_turns,
            wall_deadline_s=limits.wall_deadline_s,
            scripted=policy == "scripted",
        )
        return run_cli(
            adapter=adapter,
            executable=args.cli_executable,
            identity=identity,
            prompt=prompt,
            workspace=args.workspace,
            settings=settings,
            sandbox=sandbox,
            confinement=lambda: finish(sandbox),
            policy=policy,
        )

    if args.script is not None:
        with scripted_model(ScriptedPolicy.from_file(args.script).steps, SCRIPTED_MODEL) as url:
            return run(url, SCRIPTED_MODEL, "scripted")
    return run(args.endpoint, args.model, CLI_POLICY[args.tool_choice])


CLI_POLICY: dict[str, PolicyName] = {"auto": "model", "required": "model_tool_required"}
"""What a CLI's run records as its policy: `required` is the worker's to apply to a CLI's
requests (it asks `auto`), and the host started the worker so."""


def main(argv: list[str]) -> int:
    args = parse(argv)
    sandbox = Sandbox(
        parent=args.cgroup_parent,
        limits=CgroupLimits() if args.cgroup_limits == "on" else None,
    )
    prepare(sandbox, args.workspace, args.records)  # refuses (exits non-zero) if it cannot
    run = cli_run(args, sandbox) if args.cli is not None else asyncio.run(main_async(args, sandbox))
    args.records.write_bytes(records_json(run))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
