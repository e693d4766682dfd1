"""The trial's memory over time (the receipt's memory.json): sampled on the host.

Why the orchestrator samples: the worker's request records say what admission saw at
each request; between requests, and for what the worker cannot see (the QEMU cgroup,
the host's page cache), only the host can tell where memory went, which is what a
reviewer needs when a trial ends `oom_killed` or a request is refused.

Each sample reads the host's MemAvailable and page cache and the usage and working set
of the memory cgroups QEMU and the host worker are charged to (for QEMU under libvirt,
libvirt's own cgroup, as the VM stage found it). Where they are is asked at every
sample, because they appear during the trial; a cgroup that does not exist yet, or a
figure that does not read, is None in that sample (never a guess). At most
`MAX_SAMPLES` are kept: at the cap every other sample is dropped and the interval
doubles, so a trial of any length is covered end to end at an even spacing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from host.cgroups.memory import read_int, read_key, working_set
from host.vm.budgets import BudgetUnread, memory_dir_of
from receipts.kernelfacts import meminfo
from receipts.records.memory import MAX_SAMPLES, MemoryRecord, MemorySample

DirectorySource = Callable[[], Path | None]
"""Where a memory cgroup is now: asked at every sample, since cgroups appear mid-trial."""


def meminfo_fields(text: str) -> tuple[int | None, int | None]:
    """(MemAvailable, Cached) in bytes from /proc/meminfo text; None for a missing or
    malformed line."""
    found = meminfo(text)
    return found.get("MemAvailable"), found.get("Cached")


def host_memory(path: Path = Path("/proc/meminfo")) -> tuple[int | None, int | None]:
    """(MemAvailable, Cached) of the host now; None for what does not read."""
    try:
        return meminfo_fields(path.read_text(encoding="ascii"))
    except (OSError, UnicodeDecodeError):
        return None, None


def directory_figures(directory: Path | None) -> tuple[int | None, int | None]:
    """(usage, working set) of the memory cgroup at `directory`, v1 or v2; None where
    there is no such cgroup (yet, or any more) or a figure does not read."""
    if directory is None:
        return None, None
    if (directory / "memory.usage_in_bytes").exists():  # v1
        usage = read_int(directory / "memory.usage_in_bytes")
        inactive = read_key(directory / "memory.stat", "total_inactive_file")
    else:
        usage = read_int(directory / "memory.current")
        inactive = read_key(directory / "memory.stat", "inactive_file")
    working = working_set(usage, inactive)
    return (
        usage.value if usage.state == "present" else None,
        working.value if working.state == "present" else None,
    )


def memory_dir_of_pid(pid: int | None) -> Path | None:
    """The memory cgroup `pid` is charged to; None without a pid or once it has exited."""
    if pid is None:
        return None
    try:
        return memory_dir_of(pid)
    except BudgetUnread:
        return None


class MemorySampler:
    """Samples from `start` until `stop`, which returns the record."""

    def __init__(
        self,
        qemu: DirectorySource,
        worker: DirectorySource,
        interval_s: float = 1.0,
        meminfo: Path = Path("/proc/meminfo"),
        max_samples: int = MAX_SAMPLES,
    ) -> None:
        self._qemu, self._worker, self._meminfo = qemu, worker, meminfo
        self._interval_ms = max(1, int(interval_s * 1000))
        self._max = max_samples
        self._samples: list[MemorySample] = []
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self._started = time.monotonic()

    def sample(self) -> None:
        available, cached = host_memory(self._meminfo)
        qemu_usage, qemu_working = directory_figures(self._qemu())
        worker_usage, worker_working = directory_figures(self._worker())
        sample = MemorySample(
            at_ms=int((time.monotonic() - self._started) * 1000),
            host_available_bytes=available,
            host_page_cache_bytes=cached,
            qemu_usage_bytes=qemu_usage,
            qemu_working_set_bytes=qemu_working,
            worker_usage_bytes=worker_usage,
            worker_working_set_bytes=worker_working,
        )
        with self._lock:
            self._samples.append(sample)
            if len(self._samples) >= self._max:
                self._samples = self._samples[::2]
                self._interval_ms *= 2

    def _run(self) -> None:
        while not self._halt.wait(self._interval_ms / 1000):
            self.sample()

    def start(self) -> None:
        self._started = time.monotonic()
        self.sample()
        self._thread.start()

    def stop(self) -> MemoryRecord:
        """Stop, take a last sample (the state just before teardown), return the record."""
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join()
        self.sample()
        with self._lock:
            return MemoryRecord(interval_ms=self._interval_ms, samples=tuple(self._samples))
