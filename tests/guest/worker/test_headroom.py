"""The worker's memory headroom reader (guest/worker/memory.py) on cgroup trees written
under tmp_path: v1 and v2, every level, the mount table and membership as the kernel
writes them. Kept apart from test_units.py so that the mutation scope guest/worker/memory
runs only these (seconds) and not the tests that convert and load a model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from guest.worker.memory import Headroom, HeadroomReader, HeadroomUnread, discover_levels


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


def _levels(cgroup: str, mountinfo: str) -> list[tuple[Path, int]]:
    return [(level.directory, level.version) for level in discover_levels(cgroup, mountinfo)]


def test_v1_levels_run_from_the_worker_s_cgroup_to_the_mount_root_once_each(
    tmp_path: Path,
) -> None:
    """Every level from the worker's cgroup up to and including the v1 mount's root, each
    once. Mutation control: the depth loop stopping at 1 (`range(..., 0, -1)`) leaves the
    root out; running to -1 lists the root twice."""
    mountinfo = f"35 31 0:32 / {tmp_path} rw,relatime - cgroup cgroup rw,memory\n"
    assert _levels("4:memory:/a/b\n0::/\n", mountinfo) == [
        (tmp_path / "a/b", 1),
        (tmp_path / "a", 1),
        (tmp_path, 1),
    ]


def test_a_mount_of_a_subtree_is_followed_from_its_own_root(tmp_path: Path) -> None:
    """A cgroup namespace or a bind mount shows a subtree: the mount's root field is then
    the subtree's path, and the worker's path is read relative to it. A mount whose root
    does not hold the worker's path (`/outer` is no prefix of `/outerx`) is not its
    hierarchy. Mutation control: `cgroup_path == mount_root` as `!=`, the `or` as `and`,
    `+ "/"` as `- "/"`, and `or "/"` as `and "/"` each fail one of these."""
    mountinfo = f"35 31 0:32 /outer {tmp_path} rw - cgroup cgroup rw,memory\n"
    assert _levels("4:memory:/outer/inner\n", mountinfo) == [
        (tmp_path / "inner", 1),
        (tmp_path, 1),
    ]
    assert _levels("4:memory:/outer\n", mountinfo) == [(tmp_path, 1)]
    assert _levels("4:memory:/outerx/inner\n", mountinfo) == []
    assert _levels("4:memory:/elsewhere\n", mountinfo) == []


def test_v1_is_preferred_when_both_hierarchies_offer_memory(tmp_path: Path) -> None:
    """The docstring's rule: the v1 memory controller decides when it is mounted, even if
    the unified tree also lists memory. Mutation control: `chosen is None and v2_path is
    not None` as `or` switches to v2."""
    v2 = tmp_path / "unified"
    _write(v2, {"cgroup.controllers": "cpu memory\n"})
    mountinfo = (
        f"35 31 0:32 / {tmp_path / 'mem'} rw - cgroup cgroup rw,memory\n"
        f"30 1 0:26 / {v2} rw - cgroup2 cgroup2 rw\n"
    )
    assert _levels("4:memory:/a\n0::/a\n", mountinfo) == [
        (tmp_path / "mem/a", 1),
        (tmp_path / "mem", 1),
    ]


def test_a_v2_mount_that_does_not_hold_the_worker_is_no_level(tmp_path: Path) -> None:
    """A unified mount of another subtree, even one with the memory controller, is not the
    worker's: no level, only the host decides. Mutation control: `rel is not None and
    controllers.exists()` as `or` takes it (and crashes on the missing path)."""
    _write(tmp_path, {"cgroup.controllers": "memory\n"})
    mountinfo = f"30 1 0:26 /other {tmp_path} rw - cgroup2 cgroup2 rw\n"
    assert _levels("0::/mine\n", mountinfo) == []


def test_short_mount_lines_are_skipped_and_the_rest_still_read(tmp_path: Path) -> None:
    """Lines without the separator or with too few fields on either side are skipped, not
    an IndexError and not the end of the table; a line with just the fields the reader
    uses (root and mount point before the separator; type, source and options after) is
    read. Mutation control: the skip's `continue` as `break` loses the memory mount after
    it; `len(fields) < 5` as `< 4` or `len(tail) < 3` as `< 2` crashes on the short
    lines; `< 6` skips the five-field line."""
    mountinfo = "\n".join(
        [
            "no separator at all",
            "36 31 0:33 / - cgroup cgroup rw,memory",  # 4 fields before the separator
            f"37 31 0:34 / {tmp_path / 'x'} rw - cgroup cgroup",  # 2 after it
            f"35 31 0:32 / {tmp_path} - cgroup cgroup rw,memory",  # 5 before, 3 after
        ]
    )
    assert _levels("4:memory:/a\n", mountinfo) == [(tmp_path / "a", 1), (tmp_path, 1)]


def _v2_tree(tmp_path: Path, files: dict[str, str]) -> HeadroomReader:
    fs = tmp_path / "cg2"
    _write(fs, {"cgroup.controllers": "memory\n"})
    _write(fs / "w", files)
    _write(tmp_path, {
        "cgroup": "0::/w\n",
        "mountinfo": f"30 1 0:26 / {fs} rw - cgroup2 cgroup2 rw\n",
        "meminfo": MEMINFO,
    })  # fmt: skip
    return HeadroomReader(tmp_path / "cgroup", tmp_path / "mountinfo", tmp_path / "meminfo")


def test_a_v2_limit_of_exactly_the_no_limit_value_is_no_limit(tmp_path: Path) -> None:
    """At or above 2**62 is the kernel's "no limit" (receipts/kernelfacts.py): a level
    at exactly that decides nothing and its memory.stat is not needed; one byte less is
    a limit and is read. Mutation control: `limit >= UNLIMITED` as `>` reads the absent
    memory.stat and fails closed."""
    reader = _v2_tree(tmp_path, {"memory.max": f"{1 << 62}\n"})
    assert reader.read() == Headroom(50000 * 1024, "host")
    (tmp_path / "cg2/w/memory.max").write_text(f"{(1 << 62) - 1}\n")
    with pytest.raises(HeadroomUnread):
        reader.read()


def _v1_tree(tmp_path: Path, files: dict[str, str]) -> HeadroomReader:
    fs = tmp_path / "mem"
    _write(fs / "w", files)
    _write(tmp_path, {
        "cgroup": "4:memory:/w\n0::/\n",
        "mountinfo": f"35 31 0:32 /w {fs / 'w'} rw - cgroup cgroup rw,memory\n",
        "meminfo": MEMINFO,
    })  # fmt: skip
    return HeadroomReader(tmp_path / "cgroup", tmp_path / "mountinfo", tmp_path / "meminfo")


def test_v1_limits_of_exactly_the_no_limit_value_are_no_limits(tmp_path: Path) -> None:
    """v1 at exactly 2**62 for both the memory and the memory+swap limit: no limit, and
    the level's memory.stat and usage files are not read. Mutation control: either
    `>= UNLIMITED` of the no-limit test as `>` reads the absent memory.stat."""
    no_limit = f"{1 << 62}\n"
    reader = _v1_tree(
        tmp_path,
        {"memory.limit_in_bytes": no_limit, "memory.memsw.limit_in_bytes": no_limit},
    )
    assert reader.read() == Headroom(50000 * 1024, "host")


@pytest.mark.parametrize("limited", ["memory", "memsw"])
def test_v1_reads_only_the_usage_of_the_limit_that_is_set(tmp_path: Path, limited: str) -> None:
    """With one of the two v1 limits at exactly 2**62 (none) and the other set, only the
    set one's usage file is read (the other is absent here). Mutation control: `limit <
    UNLIMITED` or `sw_limit < UNLIMITED` as `<=` reads the absent usage file."""
    no_limit, limit = f"{1 << 62}\n", str(40 << 20)
    files = {"memory.stat": f"total_inactive_file {4 << 20}\n"}
    if limited == "memory":
        files |= {"memory.limit_in_bytes": limit, "memory.memsw.limit_in_bytes": no_limit,
                  "memory.usage_in_bytes": str(30 << 20)}  # fmt: skip
    else:
        files |= {"memory.limit_in_bytes": no_limit, "memory.memsw.limit_in_bytes": limit,
                  "memory.memsw.usage_in_bytes": str(30 << 20)}  # fmt: skip
    reader = _v1_tree(tmp_path, files)
    assert reader.read() == Headroom((40 << 20) - (26 << 20), "self")


@pytest.mark.parametrize(
    ("name", "text"),
    [("memory.max", "12k\n"), ("memory.current", "\n"), ("memory.stat", "inactive_file x\n")],
)
def test_a_figure_that_is_no_integer_is_unread(tmp_path: Path, name: str, text: str) -> None:
    """Fails closed with the file's name, never a ValueError. Mutation control: the
    `except ValueError` of `_read_int` or of `_stat_field` made dead lets it escape."""
    files = {"memory.max": "100\n", "memory.current": "50\n", "memory.stat": "inactive_file 0\n"}
    reader = _v2_tree(tmp_path, files | {name: text})
    with pytest.raises(HeadroomUnread) as info:
        reader.read()
    assert str(info.value) == name


def test_a_level_over_its_limit_has_no_headroom_not_a_negative_one(tmp_path: Path) -> None:
    """Usage above the limit (the kernel lets it happen before reclaim) is zero headroom.
    Mutation control: `max(value, 0)` as `max(value, -1)` or `max(value, 1)` answers -1
    or 1."""
    reader = _v2_tree(
        tmp_path,
        {"memory.max": "100\n", "memory.current": "300\n", "memory.stat": "inactive_file 0\n"},
    )
    assert reader.read() == Headroom(0, "self")


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("memory.max", None),
        ("memory.max", b"\xff\xfe\n"),
        ("memory.current", None),
        ("memory.current", "12\xe9\n".encode("latin-1")),
    ],
)
def test_a_limit_file_missing_or_not_ascii_is_unread(
    tmp_path: Path, name: str, content: bytes | None
) -> None:
    """Fails closed with the file's name, never a crash or a guess. Mutation control:
    either exception of `_read_int`'s `except (OSError, UnicodeDecodeError)` made dead
    lets it escape as itself."""
    reader = _v2_tree(
        tmp_path,
        {"memory.max": "100\n", "memory.current": "50\n", "memory.stat": "inactive_file 0\n"},
    )
    path = tmp_path / "cg2/w" / name
    path.unlink()
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(HeadroomUnread) as info:
        reader.read()
    assert str(info.value) == name


@pytest.mark.parametrize("name", ["cgroup", "meminfo"])
def test_a_proc_file_missing_or_not_utf8_is_unread(tmp_path: Path, name: str) -> None:
    """The membership and meminfo files too: missing, or not UTF-8, is HeadroomUnread.
    Mutation control: either exception of `_text`'s handler made dead lets it escape."""
    for content in (None, b"\xff\xfe\n"):
        reader = _v2_tree(tmp_path, {"memory.max": "max\n"})
        (tmp_path / name).unlink()
        if content is not None:
            (tmp_path / name).write_bytes(content)
        with pytest.raises(HeadroomUnread):
            reader.read()


def test_the_mount_table_is_read_again_only_when_membership_changes(tmp_path: Path) -> None:
    """The watchdog reads every 25 ms; the mount table is parsed once per membership (the
    docstring's measured cost). A mount table that became unreadable is not read while
    membership stays, and is read (and fails closed) once it changes. Mutation control:
    comparing the cached levels instead of the cached text (`cached[1] == cgroup_text`)
    rereads it every time and fails the second reading."""
    reader = _v2_tree(tmp_path, {"memory.max": "max\n"})
    assert reader.read() == Headroom(50000 * 1024, "host")
    (tmp_path / "mountinfo").unlink()
    assert reader.read() == Headroom(50000 * 1024, "host")
    (tmp_path / "cgroup").write_text("0::/\n")
    with pytest.raises(HeadroomUnread):
        reader.read()


def test_the_file_system_type_decides_not_the_mount_source(tmp_path: Path) -> None:
    """mountinfo's field after the separator is the type; the source is free text
    (`mount -t cgroup2 none /sys/fs/cgroup` writes `none`). Mutation control: reading the
    source (`tail[1]`) as the type finds no memory hierarchy."""
    _write(tmp_path / "v2", {"cgroup.controllers": "memory\n"})
    v1 = f"35 31 0:32 / {tmp_path / 'v1'} rw - cgroup none rw,memory\n"
    v2 = f"30 1 0:26 / {tmp_path / 'v2'} rw - cgroup2 none rw\n"
    assert _levels("4:memory:/a\n", v1) == [(tmp_path / "v1/a", 1), (tmp_path / "v1", 1)]
    assert _levels("0::/a\n", v2) == [(tmp_path / "v2/a", 2)]


@pytest.mark.parametrize("version", [1, 2])
def test_the_first_mount_of_the_hierarchy_is_the_one_read(tmp_path: Path, version: int) -> None:
    """A hierarchy mounted twice (a bind mount, a container's view) is read at its first
    mount in the table. Mutation control: the `break` after the first match (v1's loop
    or v2's) as `continue` takes the last one."""
    first, second = tmp_path / "first", tmp_path / "second"
    if version == 1:
        cgroup, kind = "4:memory:/a\n", "cgroup cgroup rw,memory"
    else:
        cgroup, kind = "0::/a\n", "cgroup2 cgroup2 rw"
        for point in (first, second):
            _write(point, {"cgroup.controllers": "memory\n"})
    mountinfo = f"30 1 0:26 / {first} rw - {kind}\n31 1 0:26 / {second} rw - {kind}\n"
    assert _levels(cgroup, mountinfo)[0] == (first / "a", version)


def test_the_innermost_level_wins_a_tie(tmp_path: Path) -> None:
    """Two levels with the same headroom: the worker's own cgroup is named (the docstring's
    rule: innermost wins ties), so the record points at the level the worker can change.
    Mutation control: `value <= best.bytes` as `<` keeps the ancestor."""
    fs = tmp_path / "cg2"
    _write(fs, {"cgroup.controllers": "memory\n"})
    same = {"memory.max": str(30 << 20), "memory.current": str(10 << 20),
            "memory.stat": "inactive_file 0\n"}  # fmt: skip
    _write(fs / "outer", same)
    _write(fs / "outer/inner", same)
    _write(tmp_path, {
        "cgroup": "0::/outer/inner\n",
        "mountinfo": f"30 1 0:26 / {fs} rw - cgroup2 cgroup2 rw\n",
        "meminfo": MEMINFO,
    })  # fmt: skip
    reader = HeadroomReader(tmp_path / "cgroup", tmp_path / "mountinfo", tmp_path / "meminfo")
    assert reader.read() == Headroom(20 << 20, "self")
