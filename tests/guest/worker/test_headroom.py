"""The worker's memory headroom reader (guest/worker/memory.py) on cgroup trees written
under tmp_path: v1 and v2, every level, the mount table and membership as the kernel
writes them. Kept apart from test_units.py so that the mutation scope guest/worker/memory
runs only these (seconds) and not the tests that convert and load a model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from guest.worker.memory import Headroom, HeadroomReader, HeadroomUnread


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


MEMINFO = "MemTotal: 100000 kB\nMemAvailable: 50000 kB\n"


def test_v2_headroom_takes_the_least_level_and_ignores_inactive_file(tmp_path: Path) -> None:
    fs = tmp_path / "cg2"
    _write(fs, {"cgroup.controllers": "cpu memory\n"})
    _write(
        fs / "outer",
        {"memory.max": "max\n", "memory.current": "1\n", "memory.stat": "inactive_file 0\n"},
    )
    _write(
        fs / "outer/inner",
        {"memory.max": str(30 << 20), "memory.current": str(28 << 20),
         "memory.stat": f"anon 1\ninactive_file {8 << 20}\n"},
    )  # fmt: skip
    _write(tmp_path, {
        "cgroup": "0::/outer/inner\n",
        "mountinfo": f"30 1 0:26 / {fs} rw - cgroup2 cgroup2 rw\n",
        "meminfo": MEMINFO,
    })  # fmt: skip
    reader = HeadroomReader(tmp_path / "cgroup", tmp_path / "mountinfo", tmp_path / "meminfo")
    headroom = reader.read()
    assert (headroom.bytes, headroom.scope) == ((30 << 20) - (20 << 20), "self")
    (fs / "outer/memory.max").write_text(str(25 << 20))
    (fs / "outer/memory.current").write_text(str(20 << 20))
    assert (reader.read().bytes, reader.read().scope) == (5 << 20, "ancestor")
    (fs / "outer/memory.max").write_text("max")
    (fs / "outer/inner/memory.max").write_text("max")
    assert (reader.read().bytes, reader.read().scope) == (50000 * 1024, "host")
    (fs / "outer/inner/memory.stat").write_text("anon 1\n")
    (fs / "outer/inner/memory.max").write_text("100")
    with pytest.raises(HeadroomUnread):
        reader.read()


def test_headroom_follows_a_move_to_another_cgroup(tmp_path: Path) -> None:
    """The mount table is cached; membership is not: a moved worker reads its new cgroup."""
    fs = tmp_path / "fs"
    _write(fs, {"cgroup.controllers": "memory\n"})
    for name, limit in (("a", 30 << 20), ("b", 10 << 20)):
        _write(fs / name, {"memory.max": str(limit), "memory.current": str(4 << 20),
                           "memory.stat": "inactive_file 0\n"})  # fmt: skip
    _write(tmp_path, {
        "cgroup": "0::/a\n",
        "mountinfo": f"30 1 0:26 / {fs} rw - cgroup2 cgroup2 rw\n",
        "meminfo": MEMINFO,
    })  # fmt: skip
    reader = HeadroomReader(tmp_path / "cgroup", tmp_path / "mountinfo", tmp_path / "meminfo")
    assert reader.read() == Headroom(26 << 20, "self")
    (tmp_path / "cgroup").write_text("0::/b\n")
    assert reader.read() == Headroom(6 << 20, "self")
    (tmp_path / "cgroup").write_text("0::/\n")
    assert reader.read() == Headroom(50000 * 1024, "host")


def test_v1_headroom_uses_memsw_and_total_inactive_file(tmp_path: Path) -> None:
    fs = tmp_path / "mem"
    unlimited = "9223372036854771712\n"
    root_files = {"memory.limit_in_bytes": unlimited, "memory.usage_in_bytes": "5",
                  "memory.stat": "total_inactive_file 0\n"}  # fmt: skip
    _write(fs, root_files)
    _write(fs / "a", {
        "memory.limit_in_bytes": str(40 << 20), "memory.usage_in_bytes": str(30 << 20),
        "memory.memsw.limit_in_bytes": str(36 << 20), "memory.memsw.usage_in_bytes": str(30 << 20),
        "memory.stat": f"inactive_file 7\ntotal_inactive_file {4 << 20}\n",
    })  # fmt: skip
    _write(tmp_path, {
        "cgroup": "4:memory:/a\n0::/\n",
        "mountinfo": f"35 31 0:32 / {fs} rw,relatime - cgroup cgroup rw,memory\n",
        "meminfo": MEMINFO,
    })  # fmt: skip
    reader = HeadroomReader(tmp_path / "cgroup", tmp_path / "mountinfo", tmp_path / "meminfo")
    headroom = reader.read()
    assert (headroom.bytes, headroom.scope) == ((36 << 20) - (26 << 20), "self")


def test_v1_level_without_a_limit_is_not_read_further(tmp_path: Path) -> None:
    """An unlimited v1 level decides nothing: its memory.stat (costly at the root) is skipped."""
    fs = tmp_path / "mem"
    unlimited = "9223372036854771712\n"
    _write(fs, {"memory.limit_in_bytes": unlimited, "memory.memsw.limit_in_bytes": unlimited})
    _write(fs / "a", {
        "memory.limit_in_bytes": str(40 << 20), "memory.usage_in_bytes": str(30 << 20),
        "memory.stat": f"total_inactive_file {4 << 20}\n",
    })  # fmt: skip
    _write(tmp_path, {
        "cgroup": "4:memory:/a\n0::/\n",
        "mountinfo": f"35 31 0:32 / {fs} rw,relatime - cgroup cgroup rw,memory\n",
        "meminfo": MEMINFO,
    })  # fmt: skip
    reader = HeadroomReader(tmp_path / "cgroup", tmp_path / "mountinfo", tmp_path / "meminfo")
    assert reader.read() == Headroom((40 << 20) - (26 << 20), "self")
    (fs / "a/memory.stat").unlink()
    with pytest.raises(HeadroomUnread):  # a limited level still needs its memory.stat
        reader.read()


def test_real_machine_headroom_is_readable() -> None:
    headroom = HeadroomReader().read()
    assert headroom.bytes > 0
    assert headroom.scope in ("self", "ancestor", "host")
