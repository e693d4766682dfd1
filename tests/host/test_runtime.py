"""The guest runtime runs under Debian's python3 -I -B -S through the gate, alone."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from guest.gate import bootstrap
from host.runtime import RuntimeBuildError, build_runtime
from receipts.records import AgentRecord, VerificationRecord
from tests.guest.gate.readonly import read_only
from tests.guest.support_sandbox import sandbox_root
from tests.guest.support_tasks import TASKS, scratch, shipped

__all__ = ["scratch"]
REPO = Path(__file__).parents[2]
GATE = Path(bootstrap.__file__).read_text()


@pytest.fixture(scope="module")
def runtime_cache() -> Iterator[Path]:
    """Outside pytest's 0700 tmp tree: the split judge's two users import our modules
    from the runtime root, as they do from the guest's world-searchable data disk."""
    path = Path(tempfile.mkdtemp(prefix="harness-runtimes-", dir="/var/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


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
    cgroup_root, controllers = sandbox_root()
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
        "--agent-version",
        "0.1.0",
        # This host's cgroup v2 has no controllers (a v1 hybrid): the agent's sandbox
        # goes under the v2 root found for the tests, as in tests/guest/test_entry_points.
        "--cgroup-parent",
        str(cgroup_root / f"harness-agent-test-{secrets.token_hex(4)}"),
        "--cgroup-limits",
        "on" if controllers else "off",
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
        str(shipped(TASKS / "py-two-file-change", scratch)),  # the root's alone, as shipped
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
    with pytest.raises(RuntimeBuildError) as err:
        build_runtime(REPO, cache=runtime_cache)
    assert err.value.category == "cache_corrupt"


_OFFLINE_BUILD = """
import sys
from pathlib import Path
from host.runtime import RuntimeBuildError, build_runtime
try:
    runtime = build_runtime(Path(sys.argv[1]), cache=Path(sys.argv[2]), wheelsets=Path(sys.argv[3]))
    print(runtime.key, runtime.provenance)
except RuntimeBuildError as exc:
    print("refused", exc.category)
"""


def _offline_build(repo: Path, cache: Path, wheelsets: Path) -> list[str]:
    """build_runtime in a new network namespace: no network at all."""
    done = subprocess.run(
        [
            "unshare",
            "-n",
            sys.executable,
            "-c",
            _OFFLINE_BUILD,
            str(repo),
            str(cache),
            str(wheelsets),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


@pytest.mark.integration
def test_with_its_wheels_kept_the_runtime_is_built_and_adopted_offline(tmp_path: Path) -> None:
    wheelsets = tmp_path / "wheelsets"
    online = build_runtime(REPO, cache=tmp_path / "online", wheelsets=wheelsets)  # fetches
    repo = tmp_path / "repo"
    for package in ("guest", "receipts"):
        shutil.copytree(
            REPO / package, repo / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    runtimes = tmp_path / "runtimes"
    assert _offline_build(repo, runtimes, wheelsets) == [online.key, "built_by_this_run"]
    assert _offline_build(repo, runtimes, wheelsets) == [online.key, "adopted_from_cache"]
    changed = repo / "guest" / "__init__.py"
    changed.write_text(changed.read_text() + "\n# a changed guest source\n")
    key, provenance = _offline_build(repo, runtimes, wheelsets)
    assert (key != online.key, provenance) == (True, "built_by_this_run")
    assert _offline_build(repo, runtimes, tmp_path / "empty") == ["refused", "fetch_failed"]
