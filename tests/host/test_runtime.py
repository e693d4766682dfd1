"""The guest runtime runs under Debian's python3 -I -B -S through the gate, alone."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from guest.gate import bootstrap
from host.runtime import RuntimeBuildError, build_runtime
from receipts.records import AgentRecord, VerificationRecord
from tests.guest.gate.readonly import read_only
from tests.guest.support_tasks import TASKS, scratch

__all__ = ["scratch"]
REPO = Path(__file__).parents[2]
GATE = Path(bootstrap.__file__).read_text()


@pytest.fixture(scope="module")
def runtime_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runtimes")


def _gated(
    runtime_root: Path, pins: Path, digest: str, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        read_only(  # the root arrives read-only, as on the guest's data disk
            runtime_root,
            [
                "/usr/bin/python3",
                "-I",
                "-B",
                "-S",
                "-c",
                GATE,
                str(runtime_root),
                str(pins),
                digest,
                *args,
            ],
        ),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.integration
def test_scripted_agent_and_verification_run_from_the_runtime_alone(
    runtime_cache: Path, scratch: Path
) -> None:
    runtime = build_runtime(REPO, cache=runtime_cache)
    assert runtime.provenance == "built_by_this_run"
    again = build_runtime(REPO, cache=runtime_cache)
    assert (again.provenance, again.key) == ("adopted_from_cache", runtime.key)
    assert not list(runtime.root.rglob("__pycache__"))

    agent_task = scratch / "copy" / "py-two-file-change"
    agent_task.mkdir(parents=True)
    shutil.copy(TASKS / "py-two-file-change" / "task.toml", agent_task)
    workspace = scratch / "workspace"
    shutil.copytree(TASKS / "py-two-file-change" / "workspace", workspace)
    limits = {
        "max_turns": 20,
        "max_tool_calls": 20,
        "max_invalid_outputs": 2,
        "max_total_tokens": 1000,
        "wall_deadline_s": 120,
    }
    agent = _gated(
        runtime.root,
        runtime.pins,
        runtime.pins_sha256,
        "guest.agent",
        "--task-dir",
        str(agent_task),
        "--workspace",
        str(workspace),
        "--records",
        str(scratch / "agent.json"),
        "--limits",
        json.dumps(limits),
        "--script",
        str(TASKS / "py-two-file-change" / "scripts" / "solution.json"),
    )
    assert agent.returncode == 0, agent.stderr[-2000:]
    assert agent.stdout.startswith('HARNESS-GATE {"category":"ok"')
    record = AgentRecord.model_validate(json.loads((scratch / "agent.json").read_bytes())["agent"])
    assert record.category == "finished"

    verified = _gated(
        runtime.root,
        runtime.pins,
        runtime.pins_sha256,
        "guest.verify",
        "--task-dir",
        str(TASKS / "py-two-file-change"),
        "--workspace",
        str(workspace),
        "--scratch",
        str(scratch / "v"),
        "--records",
        str(scratch / "verification.json"),
    )
    assert verified.returncode == 0, verified.stderr[-2000:]
    result = VerificationRecord.model_validate_json((scratch / "verification.json").read_bytes())
    assert (result.result, result.tests_passed) == ("passed", 5)


@pytest.mark.integration
def test_tampered_cache_entry_is_refused(runtime_cache: Path) -> None:
    runtime = build_runtime(REPO, cache=runtime_cache)
    target = runtime.root / "receipts" / "canonical.py"
    target.write_text(target.read_text() + "\n# tampered\n")
    with pytest.raises(RuntimeBuildError):
        build_runtime(REPO, cache=runtime_cache)
