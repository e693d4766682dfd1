"""The pinned OpenCode as the agent, run as the guest runs it (guest/agent/cli/run.py), on
the host: the agent's uid, its own cgroup, a private /tmp, the scripted model on
loopback. The executable is the cached pinned one (host/agents/opencode.py, filled by
set-up); the VM trials (tests/harness/trial/test_opencode_vm.py) run the same in a guest.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from guest.agent.cli.adapter import CliSettings
from guest.agent.cli.opencode import OpenCode
from guest.agent.cli.run import ExecutableRefused, run_cli, spawn_confined
from guest.agent.cli.scripted_model import scripted_model
from guest.agent.loop import AgentRun
from guest.agent.policy import ScriptedPolicy
from guest.tools.sandbox import AGENT_UID, Sandbox, finish, processes_of
from host.agents.opencode import ensure_opencode
from receipts.agentclis import AgentIdentity
from receipts.records.agent import CgroupEnd
from tests.guest.support_sandbox import host_sandbox
from tests.guest.support_tasks import TASKS, scratch

__all__ = ["scratch"]
pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parent / "fixtures"
OPENCODE = AgentIdentity.cli("opencode")


@pytest.fixture(scope="module")
def executable() -> Path:
    return ensure_opencode().path


@pytest.fixture
def workspace(scratch: Path) -> Path:
    target = scratch / "workspace"
    shutil.copytree(TASKS / "py-one-line-fix" / "workspace", target)
    return target


LEFT_BEFORE_FINISH: list[int | None] = []
"""What `processes_of` read of the agent uid when the run handed over to `finish`: the
runner's own kill of the CLI's cgroup, not `finish`'s sweep, must have emptied it."""


def _finish_after_reading(sandbox: Sandbox) -> tuple[int | None, CgroupEnd]:
    LEFT_BEFORE_FINISH.append(processes_of(AGENT_UID))
    return finish(sandbox)


def _run(
    executable: Path,
    workspace: Path,
    steps: list[dict[str, object]] | Path,
    *,
    wall_s: float = 240.0,
    identity: AgentIdentity = OPENCODE,
) -> AgentRun:
    script = steps if isinstance(steps, Path) else workspace.parent / "script.json"
    if not isinstance(steps, Path):
        script.write_text(json.dumps(steps))
    with (
        host_sandbox(workspace) as sandbox,
        scripted_model(ScriptedPolicy.from_file(script).steps, "scripted") as url,
    ):
        settings = CliSettings(
            endpoint=url,
            model="scripted",
            max_tokens=256,
            context_tokens=8192,
            max_turns=12,
            wall_deadline_s=wall_s,
            scripted=True,
        )
        return run_cli(
            adapter=OpenCode(),
            executable=executable,
            identity=identity,
            prompt="Fix moving_sum in stats.py.",
            workspace=workspace,
            settings=settings,
            sandbox=sandbox,
            confinement=lambda: _finish_after_reading(sandbox),
            policy="scripted",
        )


FIX = "range(len(values) - width + 1)"
"""The solution script's edit (the task's visible tests do not catch the bug)."""


def _fixed(workspace: Path) -> bool:
    return FIX in (workspace / "stats.py").read_text()


def test_the_solution_script_fixes_the_task_through_opencodes_tools(
    executable: Path, workspace: Path
) -> None:
    run = _run(executable, workspace, FIXTURES / "solution-script.json")
    agent = run.agent
    assert (agent.category, agent.policy, agent.agent) == ("finished", "scripted", "opencode")
    assert (agent.agent_version, agent.agent_sha256) == (OPENCODE.version, OPENCODE.sha256)
    assert [(c.tool, c.outcome) for c in run.tool_calls] == [
        ("read", "ok"),
        ("edit", "ok"),
        ("bash", "ok"),
    ]
    assert (agent.processes_left, agent.agent_cgroup) == (0, "emptied")
    assert _fixed(workspace)  # OpenCode's edit tool made the fix


def test_what_opencode_refuses_is_named_and_a_survivor_is_gone(
    executable: Path, workspace: Path
) -> None:
    """The refusal script: a missing file, an edit that does not match, a denied and an
    unknown tool, arguments of the wrong type, a path outside the workspace, and a bash
    call that leaves a detached `sleep` behind. The run's cgroup is killed at its end:
    no process of the agent's uid is left."""
    run = _run(executable, workspace, FIXTURES / "refusals-script.json")
    assert run.agent.category == "finished"
    assert [t.invalid_category for t in run.turns if t.kind == "invalid_tool_call"] == [
        "unknown_tool",
        "unknown_tool",
        "invalid_arguments",
    ]
    assert [c.outcome for c in run.tool_calls] == [
        "not_found",
        "old_string_not_found",
        "permission_denied",
        "ok",
    ]
    assert (run.agent.processes_left, run.agent.agent_cgroup) == (0, "emptied")
    assert LEFT_BEFORE_FINISH[-1] == 0  # the detached sleep died with the run's cgroup
    assert not _fixed(workspace)  # nothing was fixed


def test_the_wall_deadline_stops_a_run_that_hangs(executable: Path, workspace: Path) -> None:
    steps: list[dict[str, object]] = [
        {"tool": "bash", "arguments": {"command": "sleep 600", "description": "hang"}},
        {"tool": "finish", "arguments": {}},
    ]
    run = _run(executable, workspace, steps, wall_s=30.0)
    assert run.agent.category == "wall_limit"
    assert run.agent.duration_ms < 60_000
    assert (run.agent.processes_left, run.agent.agent_cgroup) == (0, "emptied")
    assert LEFT_BEFORE_FINISH[-1] == 0


def test_opencode_cannot_read_the_runners_files_or_write_outside(
    executable: Path, workspace: Path
) -> None:
    """The code OpenCode runs is the agent uid's: root's files stay unreadable and a write
    outside the workspace fails; its private /tmp is not the host's. (The paths are built
    inside Python: OpenCode's bash tool itself refuses a command that names a path
    outside the project, and this is about what holds when its own check does not.)"""
    marker = Path("/tmp") / f"harness-oc-marker-{os.getpid()}"
    probe = (
        "import os\n"
        "out = open('out.txt', 'w')\n"
        f"for path in ('/' + 'root/.bashrc', '/' + 'etc/harness-oc-test', {str(marker)!r}):\n"
        "    try:\n"
        "        open(path, 'a').close()\n"
        "        out.write('opened ' + path + '\\n')\n"
        "    except OSError as exc:\n"
        "        out.write(type(exc).__name__ + '\\n')\n"
        "out.write(str(os.getuid()))\n"
    )
    steps: list[dict[str, object]] = [
        {"tool": "write", "arguments": {"filePath": "probe.py", "content": probe}},
        {"tool": "bash", "arguments": {"command": "python3 probe.py", "description": "probe"}},
        {"tool": "finish", "arguments": {}},
    ]
    run = _run(executable, workspace, steps)
    assert run.agent.category == "finished"
    assert [c.outcome for c in run.tool_calls] == ["ok", "ok"]
    lines = (workspace / "out.txt").read_text().splitlines()
    assert lines[:2] == ["PermissionError", "PermissionError"]
    assert lines[2] == f"opened {marker}"  # in its own /tmp ...
    assert not marker.exists()  # ... which is not the host's
    assert lines[3] == str(AGENT_UID)
    assert not Path("/etc/harness-oc-test").exists()


def test_an_executable_that_is_not_the_pinned_file_never_runs(
    executable: Path, workspace: Path, scratch: Path
) -> None:
    """Mutation control: without the digest check in open_executable, the copy with one
    byte changed would be run (and exit with whatever that byte makes of it)."""
    tampered = scratch / "opencode"
    shutil.copy(executable, tampered)
    with tampered.open("r+b") as handle:
        handle.seek(-1, os.SEEK_END)
        last = handle.read(1)
        handle.seek(-1, os.SEEK_END)
        handle.write(bytes([last[0] ^ 1]))
    with pytest.raises(ExecutableRefused):
        _run(tampered, workspace, FIXTURES / "solution-script.json")
    with pytest.raises(ExecutableRefused):  # a record naming no digest names nothing pinned
        _run(executable, workspace, FIXTURES / "solution-script.json",
             identity=AgentIdentity("opencode", OPENCODE.version, None))  # fmt: skip
    assert not _fixed(workspace)


def test_the_runner_stops_a_cli_at_the_turn_budget(workspace: Path) -> None:
    """A CLI whose own step limit does not hold (OpenCode's compaction steps): a stand-in
    that prints step_finish lines forever, each written in two parts. The runner kills
    it once the budget's count of whole lines has arrived, and keeps whole lines only."""
    line = '{"type":"step_finish","part":{}}'
    loop = f"while :; do printf '%s' '{line[:10]}'; sleep 0.05; printf '%s\\n' '{line[10:]}'; done"
    with host_sandbox(workspace) as sandbox:
        exit_ = spawn_confined(
            ["/bin/sh", "-c", loop],
            cwd=workspace,
            env={"PATH": "/usr/bin:/bin"},
            sandbox=sandbox,
            deadline_s=60,
            turn_end=OpenCode.turn_end,
            max_turns=5,
        )
        left, _cgroup = finish(sandbox)
    assert exit_.turn_capped and exit_.status is None
    assert exit_.cgroup_end == "emptied" and left == 0
    lines = exit_.stream.splitlines()
    assert 5 <= len(lines) < 50  # stopped at the budget, not run on to the deadline
    assert all(part == line.encode() for part in lines)
    assert exit_.stream.endswith(b"\n")
