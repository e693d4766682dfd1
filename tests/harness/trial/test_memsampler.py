"""The memory sampler on real cgroups and the real /proc/meminfo.

A process that holds a known amount of anonymous memory is started inside a real
memory cgroup; the sampler must see it there, must say None (not 0) for a cgroup that
does not exist or no longer reads, and must keep a long trial covered end to end
within the record's sample cap.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.trial.memsampler import (
    MemorySampler,
    directory_figures,
    meminfo_fields,
    memory_dir_of_pid,
)
from host.cgroups import Cgroup
from host.cgroups.detect import detect
from host.cgroups.spawn import spawn_in_cgroup
from receipts.records.memory import MAX_SAMPLES, MemoryRecord, MemorySample

MIB = 1 << 20
HOLD = "import sys; b = bytearray(64 << 20); print('held', flush=True); sys.stdin.read()"


@pytest.fixture
def cgroup() -> Iterator[Cgroup]:
    group = detect().create(f"sampler-t{uuid.uuid4().hex[:12]}")
    yield group
    group.kill_members()
    group.remove()


def test_meminfo_fields_read_the_host_and_refuse_garbage() -> None:
    available, cached = meminfo_fields(Path("/proc/meminfo").read_text())
    assert available is not None and available > 0
    assert cached is not None and cached >= 0
    assert meminfo_fields("MemAvailable: lots kB\nCached:\n") == (None, None)


def _hold(cgroup: Cgroup) -> subprocess.Popen[bytes]:
    holder = spawn_in_cgroup(
        cgroup,
        [sys.executable, "-c", HOLD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    return holder


def _release(holder: subprocess.Popen[bytes]) -> None:
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(10)


def test_a_process_in_the_worker_cgroup_is_seen_and_a_missing_qemu_is_none(
    cgroup: Cgroup,
) -> None:
    holder = _hold(cgroup)
    try:
        sampler = MemorySampler(
            lambda: None, lambda: memory_dir_of_pid(holder.pid), interval_s=0.01
        )
        sampler.start()
        record = sampler.stop()
    finally:
        _release(holder)
    assert len(record.samples) >= 2
    last = record.samples[-1]
    assert last.worker_usage_bytes is not None and last.worker_usage_bytes >= 64 * MIB
    assert last.worker_working_set_bytes is not None
    assert last.worker_working_set_bytes >= 64 * MIB
    assert last.qemu_usage_bytes is None and last.qemu_working_set_bytes is None
    assert last.host_available_bytes is not None and last.host_available_bytes > 0


def test_a_cgroup_that_is_gone_is_none_not_zero(cgroup: Cgroup) -> None:
    holder = _hold(cgroup)
    directory = memory_dir_of_pid(holder.pid)
    assert directory is not None and directory.name == cgroup.name
    usage, working = directory_figures(directory)
    assert usage is not None and usage >= 64 * MIB and working is not None
    _release(holder)
    assert memory_dir_of_pid(holder.pid) is None  # exited: no cgroup to name
    cgroup.remove()
    assert directory_figures(directory) == (None, None)


def test_a_long_trial_stays_covered_within_the_cap() -> None:
    sampler = MemorySampler(lambda: None, lambda: None, interval_s=0.5, max_samples=8)
    sampler.sample()
    time.sleep(0.2)  # the trial's first sample is the only one before 200 ms
    for _ in range(19):
        sampler.sample()
    record = sampler.stop()
    assert len(record.samples) < 8
    # 21 samples (stop takes one): halved at the 8th, 12th, 16th and 20th
    assert record.interval_ms == 500 * 16
    assert len(record.samples) == 5
    times = [s.at_ms for s in record.samples]
    assert times == sorted(times)
    assert times[0] < 200 <= times[1]  # the trial's start is kept


def test_a_full_record_fits_the_per_record_ceiling() -> None:
    big = 1 << 50
    sample = MemorySample(
        at_ms=30 * 24 * 3600 * 1000,
        host_available_bytes=big,
        host_page_cache_bytes=big,
        qemu_usage_bytes=big,
        qemu_working_set_bytes=big,
        worker_usage_bytes=big,
        worker_working_set_bytes=big,
    )
    record = MemoryRecord(interval_ms=3_600_000, samples=(sample,) * MAX_SAMPLES)
    assert len(record.canonical_bytes()) < 64 * 1024
