"""What the host asks of the guest's agent and of the worker, for each kind of agent:
the loop at the harness's version, or the pinned CLI with its executable and digest,
and the worker options only a CLI needs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from harness.commands.trial import parse_agent
from harness.profiles import load_profile
from harness.trial.context import TrialContext, TrialOptions
from harness.trial.guestrun import CLI_EXECUTABLE, agent_args
from harness.trial.modelstage import PreparedModel
from harness.trial.worker import Worker, client_flags
from harness.version import HARNESS_VERSION
from host.agents.opencode import PIN
from host.vm.backend import VmBackend
from receipts.records.agent import AgentName

SCRIPT = Path("profiles/tasks/py-one-line-fix/scripts/solution.json")
WORKER = cast(Worker, SimpleNamespace(url="http://10.0.2.100:8080"))
MODEL = cast(PreparedModel, SimpleNamespace(record=SimpleNamespace(gguf_sha256="ab" * 32)))


def _context(
    agent: AgentName, *, script: Path | None = None, profile: str = "qwen-coder"
) -> TrialContext:
    options = TrialOptions(
        profile=load_profile(profile),
        task="py-one-line-fix",
        script=script,
        out_dir=Path("/nonexistent"),
        agent=agent,
    )
    return TrialContext(options, "0" * 64, "0" * 16, cast(VmBackend, None))


def _value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("model", ("harness_loop", None)),
        (f"scripted:{SCRIPT}", ("harness_loop", SCRIPT)),
        ("opencode", ("opencode", None)),
        ("opencode+model", ("opencode", None)),
        (f"opencode+scripted:{SCRIPT}", ("opencode", SCRIPT)),
    ],
)
def test_agent_spec_names_whose_code_and_what_drives_it(
    spec: str, expected: tuple[str, Path | None]
) -> None:
    assert parse_agent(spec) == expected


@pytest.mark.parametrize(
    "spec", ["opencodex", "aider", "opencode+", "model+opencode", "scripted:/no/such/file"]
)
def test_an_agent_spec_that_is_not_one_is_refused(spec: str) -> None:
    with pytest.raises(ValueError):
        parse_agent(spec)


def test_the_loop_is_launched_at_the_harness_version_without_cli_arguments() -> None:
    args = agent_args(_context("harness_loop"), WORKER, MODEL)
    assert _value(args, "--agent-version") == HARNESS_VERSION
    assert "--cli" not in args and "--cli-sha256" not in args
    assert _value(args, "--tool-choice") == "required"  # qwen-coder's policy


def test_opencode_is_launched_with_its_pinned_executable_and_digest() -> None:
    args = agent_args(_context("opencode"), WORKER, MODEL)
    assert _value(args, "--cli") == "opencode"
    assert _value(args, "--cli-executable") == CLI_EXECUTABLE
    assert _value(args, "--cli-sha256") == PIN.sha256
    assert _value(args, "--agent-version") == PIN.version
    assert _value(args, "--endpoint") == WORKER.url
    assert _value(args, "--tool-choice") == "required"


def test_a_scripted_opencode_gets_the_script_and_no_endpoint() -> None:
    args = agent_args(_context("opencode", script=SCRIPT), None, None)
    assert _value(args, "--cli") == "opencode"
    assert _value(args, "--script") is not None
    assert "--endpoint" not in args


def test_a_profile_without_required_tools_asks_auto() -> None:
    context = _context("opencode", profile="smollm2")
    assert context.policy == "model"
    assert _value(agent_args(context, WORKER, MODEL), "--tool-choice") == "auto"


def test_only_a_cli_gets_worker_client_flags() -> None:
    assert client_flags(agent_cli=False, tools_required=True) == ()
    assert client_flags(agent_cli=True, tools_required=False) == ("--close-connections",)
    assert client_flags(agent_cli=True, tools_required=True) == (
        "--close-connections",
        "--tools-required",
    )
