"""`run_tests {}`: run the task's declared test command, confined, and summarize.

The command is fixed when the tool set is built (an argv list from the task), never
taken from the model: the model chooses *when* to run the tests, not *what* runs.
The model gets the exit category, whether the network was isolated, and the last
lines of output; the result's details carry only categories and counts. With a
sandbox (the agent runner always gives one) the command runs as the agent's uid in
its own cgroup, killed and shown empty when it ends (guest/tools/sandbox.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel

from guest.tools.base import ARGS_CONFIG, Tool
from guest.tools.categories import NetPolicy
from guest.tools.confine import RunLimits, run_confined
from guest.tools.jail import RelPath
from guest.tools.result import RunTestsDetails, ToolOutput, refusal
from guest.tools.sandbox import Sandbox, SandboxUnavailable


class RunTestsArgs(BaseModel):
    model_config = ARGS_CONFIG


class RunTestsTool(Tool[RunTestsArgs]):
    name = "run_tests"
    description = (
        "Runs the task's test suite in the workspace (no network, with time and resource "
        "limits) and returns the outcome and the last lines of its output. Takes no arguments."
    )
    args_model = RunTestsArgs

    def __init__(
        self,
        workspace_root: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        limits: RunLimits,
        net_policy: NetPolicy,
        mechanism: Literal["auto", "unshare_syscall", "unshare_binary"] = "auto",
        sandbox: Sandbox | None = None,
    ) -> None:
        if not argv or any(not isinstance(a, str) or "\x00" in a for a in argv):
            raise ValueError("test command must be a non-empty argv list of strings")
        self._root = workspace_root
        self._argv = tuple(argv)
        self._env = dict(env)
        self._limits = limits
        self._net_policy = net_policy
        self._mechanism = mechanism
        self._sandbox = sandbox

    def run(self, args: RunTestsArgs, path: RelPath | None) -> ToolOutput:
        del args, path
        try:
            report = run_confined(
                self._argv,
                cwd=self._root,
                env=self._env,
                limits=self._limits,
                net_policy=self._net_policy,
                mechanism=self._mechanism,
                sandbox=self._sandbox,
            )
        except SandboxUnavailable:
            return refusal("spawn_failed")  # the call's cgroup could not be made
        except OSError:
            return refusal("spawn_failed")
        if report.exit is None:
            return refusal("net_isolation_unavailable")
        status = (
            report.exit
            if report.returncode is None
            else (f"{report.exit} (exit status {report.returncode})")
        )
        head = (
            f"status: {status}\n"
            f"network isolation: {report.net_isolation}\n"
            f"duration_ms: {report.duration_ms}\n"
        )
        if report.omitted_bytes:
            head += (
                f"output: {report.output_bytes} bytes, last "
                f"{self._limits.tail_lines} lines at most shown\n"
            )
        text = head + "--- output ---\n" + report.tail + "\n"
        return ToolOutput(
            outcome="ok",
            text=text,
            truncated=report.omitted_bytes > 0,
            omitted_bytes=report.omitted_bytes,
            details=RunTestsDetails(
                exit=report.exit,
                returncode=report.returncode,
                net_isolation=report.net_isolation,
                net_mechanism=report.net_mechanism,
                cgroup_end=report.cgroup_end,
                output_bytes=report.output_bytes,
            ),
        )
