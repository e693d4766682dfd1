"""The guest entry points, run as the trial runs them: through the runtime gate."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

from guest.gate import bootstrap
from guest.task import task_digest
from guest.tools.sandbox import AGENT_UID
from receipts.pintable import build_pin_table, pin_table_bytes
from receipts.records import AgentRecord, ToolCallRecord, VerificationRecord
from tests.guest.gate.readonly import read_only
from tests.guest.support_sandbox import sandbox_root
from tests.guest.support_tasks import TASKS, scratch, shipped

__all__ = ["scratch"]
REPO = Path(__file__).parents[2]


def _runtime(root: Path) -> tuple[Path, str]:
    """guest/ and receipts/ sources as the trial ships them (site packages come from
    the venv here: the test runs the gate with the venv's interpreter)."""
    for package in ("guest", "receipts"):
        shutil.copytree(
            REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    table = root.parent / "pins.json"
    table.write_bytes(pin_table_bytes(build_pin_table(root)))
    return table, build_pin_table(root).digest()


def _gated(root: Path, table: Path, digest: str, module: str, *args: str) -> str:
    """Run `module` through the gate with -I -B but with site (for the venv's packages)."""
    source = Path(bootstrap.__file__).read_text()
    result = subprocess.run(
        read_only(  # the root arrives read-only, as on the guest's data disk
            root,
            [
                sys.executable,
                "-I",
                "-B",
                "-c",
                source.replace('raise GateRefusal("foreign_path_entry")', "pass"),  # venv site
                str(root),
                str(table),
                digest,
                module,
                *args,
            ],
        ),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_agent_then_verify_through_the_gate(scratch: Path) -> None:
    root = scratch / "runtime"
    table, digest = _runtime(root)
    agent_task = scratch / "agent-copy" / "py-one-line-fix"  # no hidden_tests/ in the agent's copy
    agent_task.mkdir(parents=True)
    shutil.copy(TASKS / "py-one-line-fix" / "task.toml", agent_task / "task.toml")
    workspace = scratch / "workspace"
    shutil.copytree(TASKS / "py-one-line-fix" / "workspace", workspace)
    records = scratch / "records" / "agent.json"
    records.parent.mkdir(mode=0o755)
    cgroup_root, controllers = sandbox_root()
    limits = json.dumps(
        {
            "max_turns": 10,
            "max_tool_calls": 10,
            "max_invalid_outputs": 2,
            "max_total_tokens": 1000,
            "wall_deadline_s": 120,
        }
    )
    out = _gated(
        root,
        table,
        digest,
        "guest.agent",
        "--task-dir",
        str(agent_task),
        "--workspace",
        str(workspace),
        "--records",
        str(records),
        "--limits",
        limits,
        "--script",
        str(TASKS / "py-one-line-fix" / "scripts" / "solution.json"),
        "--agent-version",
        "0.1.0",
        "--cgroup-parent",
        str(cgroup_root / f"harness-agent-test-{secrets.token_hex(4)}"),
        "--cgroup-limits",
        "on" if controllers else "off",
    )
    assert out.startswith('HARNESS-GATE {"category":"ok"')
    output = json.loads(records.read_bytes())
    agent = AgentRecord.model_validate(output["agent"])
    assert (agent.category, agent.tool_calls) == ("finished", 4)
    assert (agent.processes_left, agent.agent_cgroup) == (0, "emptied")
    run = ToolCallRecord.model_validate(output["tool_calls"][2])
    assert (run.tool, run.run_exit, run.cgroup_end) == ("run_tests", "passed", "emptied")
    assert workspace.stat().st_uid == AGENT_UID  # the workspace is the agent uid's
    assert records.stat().st_uid == 0  # its records are root's
    verified = scratch / "verification.json"
    _gated(
        root,
        table,
        digest,
        "guest.verify",
        "--task-dir",
        str(shipped(TASKS / "py-one-line-fix", scratch)),  # as the verification guest has it
        "--workspace",
        str(workspace),
        "--scratch",
        str(scratch / "verify"),
        "--records",
        str(verified),
    )
    record = VerificationRecord.model_validate_json(verified.read_bytes())
    assert record.result == "passed"
    assert record.task_sha256 == task_digest(TASKS / "py-one-line-fix")
