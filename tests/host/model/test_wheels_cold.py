"""The cold path of the llama wheel, run for real with a stand-in build (§15).

The real entry point (`python -m host.wheels build-llama`) and the real set-up step
(`.ci/llama-wheel`) run as processes against an empty cache directory; only the
8-minute compile is replaced, through host.wheels' test seam, by a stand-in that writes
a small installable wheel and, like pip, prints on stdout and stderr. CI warms nothing
here, so a regression of the cold path (a child's output on the JSON stdout, a lost
wheel, a second build) fails CI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from host.wheels import CACHE_ENV, TEST_BUILD_ENV, build_key

REPO = Path(__file__).resolve().parents[3]
STANDIN = Path(__file__).with_name("standin_llama_build.py")
STANDIN_COMMAND = [sys.executable, str(STANDIN)]


def _env(cache: Path, log: Path, sleep: float = 0.0) -> dict[str, str]:
    env = dict(os.environ)
    env[CACHE_ENV] = str(cache)
    env[TEST_BUILD_ENV] = " ".join(STANDIN_COMMAND)
    env["STANDIN_LOG"] = str(log)
    env["STANDIN_SLEEP"] = str(sleep)
    return env


def _start(env: dict[str, str], new_session: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "host.wheels", "build-llama", "--flavour", "host"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )


def _one_json_object(stdout: str) -> dict[str, object]:
    assert stdout.count("\n") == 1 and stdout.endswith("\n"), stdout
    result = json.loads(stdout)
    assert isinstance(result, dict)
    return result


def _builds(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_build_llama_stdout_is_exactly_one_json_object(tmp_path: Path) -> None:
    """Mutation control: drop `stdout=sys.stderr` from `host.wheels._run_child` and the
    stand-in's stdout line lands before the JSON: this test fails."""
    cache, log = tmp_path / "cache", tmp_path / "builds.log"
    proc = _start(_env(cache, log))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    result = _one_json_object(out)
    assert result["provenance"] == "built_by_this_run"
    assert result["key"] == build_key("host", STANDIN_COMMAND)
    assert "noise on stdout" in err and "noise on stderr" in err  # the child's output kept
    wheel = Path(str(result["wheel"]))
    assert wheel.parent == cache / str(result["key"]) and wheel.is_file()
    assert len(_builds(log)) == 1


def test_a_stand_in_wheel_never_takes_the_real_key() -> None:
    assert build_key("host", STANDIN_COMMAND) != build_key("host")


def test_two_builders_started_together_build_once(tmp_path: Path) -> None:
    """Two set-ups at once: one builds, the other waits (and says so), then adopts.
    Mutation control: make `receipts.staging.fill_lock` a no-op and both build (one then
    fails on the taken target): this test fails."""
    cache, log = tmp_path / "cache", tmp_path / "builds.log"
    procs = [_start(_env(cache, log, sleep=2.0)) for _ in range(2)]
    results = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err for _, err in results]
    parsed = [_one_json_object(out) for out, _ in results]
    assert sorted(str(r["provenance"]) for r in parsed) == [
        "adopted_from_cache",
        "built_by_this_run",
    ]
    assert parsed[0]["wheel"] == parsed[1]["wheel"]
    assert len(_builds(log)) == 1  # exactly one build
    waiter = next(err for out, err in results if '"adopted_from_cache"' in out)
    assert "waiting for another process filling the host llama-cpp-python wheel" in waiter
    key = str(parsed[0]["key"])
    assert sorted(p.name for p in cache.iterdir()) == [f".{key}.lock", key]


def _wait_for(predicate: object, timeout: float = 60.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_killed_builders_staging_is_removed_by_the_next(tmp_path: Path) -> None:
    """A builder SIGKILLed mid-build leaves its staging; while it lived, a second builder
    waited and left it alone; once it is dead the second sweeps it, builds, and ends
    with the entry and its lock only."""
    cache, log = tmp_path / "cache", tmp_path / "builds.log"
    first = _start(_env(cache, log, sleep=60.0), new_session=True)
    try:
        _wait_for(lambda: len(_builds(log)) == 1)
        staging = sorted(cache.glob(".*.staging-*"))
        assert len(staging) == 1
        second = _start(_env(cache, log))
        time.sleep(1.0)
        assert second.poll() is None  # waiting for the live first builder
        assert staging[0].is_dir()  # whose staging is left alone
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the builder and its stand-in child
        first.communicate(timeout=30)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert _one_json_object(out)["provenance"] == "built_by_this_run"
    assert "waiting for another process filling" in err
    assert not staging[0].exists()  # the dead builder's staging is gone
    assert len(_builds(log)) == 2
    key = build_key("host", STANDIN_COMMAND)
    assert sorted(p.name for p in cache.iterdir()) == [f".{key}.lock", key]


def _installed_version(venv: Path) -> str:
    proc = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('llama_cpp_python'))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() if proc.returncode == 0 else "absent"


def _setup_step(env: dict[str, str], venv: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["bash", str(REPO / ".ci" / "llama-wheel")],
        env={**env, "HARNESS_VENV": str(venv)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_setup_wheel_step_from_an_empty_cache_in_two_clones_at_once(tmp_path: Path) -> None:
    """`.ci/llama-wheel`, the step `.ci/setup` runs, in two fresh venvs (two clones) at
    once on a machine with an empty wheel cache: one builds (stand-in), the other waits
    and adopts; both parse the one JSON line and install the wheel. Run again, the step
    sees the wheel installed and does nothing.
    Mutation controls: drop `stdout=sys.stderr` from `host.wheels._run_child` and the
    step dies parsing the JSON ("printed something other than one JSON object"); make
    `fill_lock` a no-op and one of the two fails."""
    cache, log = tmp_path / "cache", tmp_path / "builds.log"
    env = _env(cache, log, sleep=2.0)
    venvs = [tmp_path / "venv-one", tmp_path / "venv-two"]
    for venv in venvs:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        assert _installed_version(venv) == "absent"
    steps = [_setup_step(env, venv) for venv in venvs]
    outcomes = [step.communicate(timeout=300) for step in steps]
    assert [step.returncode for step in steps] == [0, 0], [err for _, err in outcomes]
    assert [_installed_version(venv) for venv in venvs] == ["0.3.36", "0.3.36"]
    assert len(_builds(log)) == 1  # one build for two set-ups
    assert any("waiting for another process filling" in err for _, err in outcomes)
    again = _setup_step(env, venvs[0])
    _, err = again.communicate(timeout=300)
    assert again.returncode == 0 and "llama-cpp-python" not in err  # nothing to do
    assert len(_builds(log)) == 1
