"""Interface-file I/O and parsing map every failure to its closed category
(host/cgroups/fileio.py), and the member killer's pid handling (host/cgroups/members.py),
on plain files and real processes: no cgroup is touched."""

import errno
import os
import signal
import subprocess
from pathlib import Path

import pytest

from host.cgroups.errors import CgroupError
from host.cgroups.fileio import _write_category, parse_int, parse_keyed, read_text, write_text
from host.cgroups.members import _signal_listed, kill_members


def _category(call: object, *args: object, **kwargs: object) -> CgroupError:
    with pytest.raises(CgroupError) as err:
        call(*args, **kwargs)  # type: ignore[operator]
    return err.value


def test_a_write_names_why_it_failed(tmp_path: Path) -> None:
    """A missing file is `interface_file_missing`; a directory, or a write the device
    refuses (/dev/full: ENOSPC at write, nothing is stored), is `write_rejected`.
    Mutation control: `err.errno == errno.ENOENT` as `!=` swaps the first two; the
    handler around `os.write` made dead lets OSError escape on /dev/full."""
    missing = _category(write_text, tmp_path / "memory.max", "1", controller="memory")
    assert (missing.category, missing.interface_file) == ("interface_file_missing", "memory.max")
    assert _category(write_text, tmp_path, "1").category == "write_rejected"
    full = _category(write_text, Path("/dev/full"), "1", controller="pids")
    assert (full.category, full.controller) == ("write_rejected", "pids")


def test_a_number_that_does_not_parse_names_its_file_or_none() -> None:
    """Mutation control: `interface_file=name or None` as `name and None` drops the name."""
    named = _category(parse_int, "12k", controller="memory", name="memory.max")
    assert (named.category, named.interface_file) == ("parse_failed", "memory.max")
    assert _category(parse_int, "", controller="memory").interface_file is None
    assert parse_int(" -5\n") == -5


def _reaped_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_pid_already_gone_does_not_stop_the_others_being_killed(tmp_path: Path) -> None:
    """A listed pid that exited before it could be pinned is skipped, and the member
    listed after it is still killed; every pidfd opened is closed again. Mutation
    control: the `continue` after pidfd_open's ProcessLookupError as `break` leaves the
    live member running; the closing loop made empty leaks a descriptor."""
    gone = _reaped_pid()
    member = subprocess.Popen(["sleep", "60"])
    procs = tmp_path / "cgroup.procs"
    procs.write_text(f"{gone}\n{member.pid}\n")
    fds_before = sorted(os.listdir("/proc/self/fd"))
    try:
        _signal_listed([("memory", procs)], [gone, member.pid])
        assert member.wait(timeout=10) == -signal.SIGKILL
    finally:
        if member.poll() is None:
            member.kill()
            member.wait()
    assert sorted(os.listdir("/proc/self/fd")) == fds_before


def test_a_read_is_bounded_at_1_mib_and_must_be_ascii(tmp_path: Path) -> None:
    """An interface file of exactly 1 MiB reads; one byte more, or a non-ASCII byte, is
    `parse_failed`. Mutation control: `_MAX_READ` moved (`2 << 20`, `1 << 19`, ...) or
    `total > _MAX_READ` as `>=` fails one case; the `except UnicodeDecodeError` made dead
    lets the decode error escape."""
    path = tmp_path / "memory.stat"
    path.write_bytes(b"1" * (1 << 20))
    assert len(read_text(path)) == 1 << 20
    for content in (b"1" * ((1 << 20) + 1), b"12\xe9\n"):
        path.write_bytes(content)
        err = _category(read_text, path, controller="memory")
        assert (err.category, err.interface_file) == ("parse_failed", "memory.stat")


@pytest.mark.parametrize(
    ("number", "category"),
    [
        (errno.ENOENT, "interface_file_missing"),
        (errno.EACCES, "permission_denied"),
        (errno.EPERM, "permission_denied"),
        (errno.ESRCH, "process_not_found"),
        (errno.EINVAL, "write_rejected"),
        (errno.EBUSY, "write_rejected"),
    ],
)
def test_each_write_errno_has_its_category(number: int, category: str) -> None:
    """ESRCH is what the kernel answers for a pid that is gone when it is written to
    cgroup.procs; a plain file cannot produce it, so the mapping is checked on the errno.
    Mutation control: any of the comparisons negated or swapped fails one row."""
    assert _write_category(OSError(number, os.strerror(number))) == category


def test_an_open_that_fails_otherwise_is_read_failed(tmp_path: Path) -> None:
    """Not a missing file but a path through a regular file (ENOTDIR): read_failed.
    Mutation control: read_text's `except OSError` at open made dead lets it escape."""
    (tmp_path / "file").write_text("")
    err = _category(read_text, tmp_path / "file" / "memory.max", controller="memory")
    assert (err.category, err.interface_file) == ("read_failed", "memory.max")


def test_blank_lines_of_a_keyed_file_are_skipped_not_the_end() -> None:
    """Mutation control: the blank line's `continue` as `break` drops the keys after it."""
    assert parse_keyed("a 1\n\nb 2\n") == {"a": 1, "b": 2}


def test_a_pinned_pid_no_longer_listed_is_spared_and_the_next_one_killed(
    tmp_path: Path,
) -> None:
    """A pid that left the cgroup between the two reads is not signalled, and the listed
    one after it still is. Mutation control: the `continue` for a pid no longer listed
    as `break` spares the member."""
    bystander = subprocess.Popen(["sleep", "60"])
    member = subprocess.Popen(["sleep", "60"])
    procs = tmp_path / "cgroup.procs"
    procs.write_text(f"{member.pid}\n")
    try:
        _signal_listed([("memory", procs)], [bystander.pid, member.pid])
        assert member.wait(timeout=10) == -signal.SIGKILL
        assert bystander.poll() is None
    finally:
        for child in (bystander, member):
            if child.poll() is None:
                child.kill()
                child.wait()


def test_without_a_kill_file_the_per_pid_loop_runs_until_the_deadline(tmp_path: Path) -> None:
    """No cgroup.kill (v1, or an older v2): members are killed pid by pid; a procs file
    that keeps listing them (a plain file here) ends in members_remain at the deadline.
    Mutation control: `kill_file is not None and not kill_written` as `or` writes to a
    missing kill file."""
    member = subprocess.Popen(["sleep", "60"])
    procs = tmp_path / "cgroup.procs"
    procs.write_text(f"{member.pid}\n")
    try:
        err = _category(kill_members, [("memory", procs)], deadline_s=0.3, kill_file=None)
        assert err.category == "members_remain"
        assert member.wait(timeout=10) == -signal.SIGKILL
    finally:
        if member.poll() is None:
            member.kill()
            member.wait()
