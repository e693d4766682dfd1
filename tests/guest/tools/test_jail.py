"""Every way out of the workspace is refused, each by its own test.

Race tests make the swap deterministic by wrapping `os.open`: the wrapper performs
the swap at the exact moment the jail opens a given component, which is the
window a check-then-use implementation would lose.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from guest.tools.jail import Jail, JailError, RelPath, parse_relative
from tests.guest.tools.conftest import SECRET

REPO = Path(__file__).resolve().parents[3]


def read_text(jail: Jail, raw: str) -> str:
    with jail.regular_file(parse_relative(raw)) as (fd, _st):
        return os.pread(fd, 1 << 16, 0).decode()


def refusal_of(fn: Callable[[], object]) -> str:
    with pytest.raises(JailError) as info:
        fn()
    return info.value.category


# --- text-level refusals -------------------------------------------------------


def test_absolute_path_refused(jail: Jail, outside: Path) -> None:
    assert refusal_of(lambda: read_text(jail, str(outside / "secret.txt"))) == "absolute_path"


def test_parent_component_refused(jail: Jail, outside: Path) -> None:
    assert outside.exists()
    assert refusal_of(lambda: read_text(jail, "../outside/secret.txt")) == "parent_component"


def test_parent_component_in_the_middle_refused(jail: Jail, ws: Path) -> None:
    (ws / "a").mkdir()
    assert refusal_of(lambda: parse_relative("a/../../outside/secret.txt")) == "parent_component"


def test_proc_self_root_absolute_refused(jail: Jail, outside: Path) -> None:
    trick = "/proc/self/root" + str(outside / "secret.txt")
    assert refusal_of(lambda: read_text(jail, trick)) == "absolute_path"


def test_proc_self_root_through_symlink_refused(jail: Jail, ws: Path, outside: Path) -> None:
    os.symlink("/proc/self/root", ws / "p")
    trick = "p" + str(outside / "secret.txt")
    assert refusal_of(lambda: read_text(jail, trick)) == "symlink"


def test_workspace_root_inside_proc_refused() -> None:
    with pytest.raises(ValueError, match="pseudo"):
        Jail("/proc/self/cwd")


def test_nul_byte_refused() -> None:
    assert refusal_of(lambda: parse_relative("a\x00b")) == "nul_byte"


@pytest.mark.parametrize(
    ("char", "category"),
    [
        ("\n", "control_character"),  # C0
        ("\x1b", "control_character"),  # ESC: terminal escapes
        ("\x1f", "control_character"),  # last C0
        ("\x7f", "control_character"),  # DEL
        ("\x80", "control_character"),  # first C1
        ("\x85", "control_character"),  # U+0085 NEXT LINE
        ("\x9b", "control_character"),  # C1 CSI: a one-character terminal escape
        ("\x9f", "control_character"),  # last C1
        ("\u2028", "line_separator"),
        ("\u2029", "line_separator"),
        ("\u202a", "bidi_control"),
        ("\u202e", "bidi_control"),  # RIGHT-TO-LEFT OVERRIDE
        ("\u2066", "bidi_control"),
        ("\u2069", "bidi_control"),
        ("\u200f", "bidi_control"),
        ("\u061c", "bidi_control"),
    ],
)
def test_names_that_print_as_something_else_refused(char: str, category: str) -> None:
    assert refusal_of(lambda: parse_relative(f"dir/a{char}b.py")) == category


@pytest.mark.parametrize("char", ["\xa0", "\u00e9", "\u200b", "\u4e2d", "\U0001f600"])
def test_ordinary_non_ascii_names_accepted(char: str) -> None:
    assert parse_relative(f"a{char}b").parts == (f"a{char}b",)


@pytest.mark.parametrize("char", [" ", "~"])
def test_printable_ascii_at_the_control_ranges_edges_accepted(char: str) -> None:
    """U+0020 follows the last C0 control and U+007E precedes DEL: both are names."""
    assert parse_relative(f"a{char}b").parts == (f"a{char}b",)


def test_lone_surrogate_refused() -> None:
    assert refusal_of(lambda: parse_relative("a\udc80")) == "invalid_encoding"


def test_overlong_path_refused() -> None:
    raw = ("x" * 200 + "/") * 6  # 1,206 bytes in 6 components: only the total is too long
    assert refusal_of(lambda: parse_relative(raw)) == "path_too_long"


def test_overlong_component_refused() -> None:
    assert refusal_of(lambda: parse_relative("x" * 256)) == "path_too_long"


def test_too_deep_path_refused() -> None:
    assert refusal_of(lambda: parse_relative("a/" * 65)) == "path_too_long"


def test_dot_and_empty_components_normalize() -> None:
    assert parse_relative("./a//b/.").parts == ("a", "b")
    assert parse_relative("").parts == ()
    assert parse_relative(".").text == "."


# --- filesystem-level refusals -------------------------------------------------


def test_symlink_to_outside_directory_refused(jail: Jail, ws: Path, outside: Path) -> None:
    os.symlink(outside, ws / "link")
    assert refusal_of(lambda: read_text(jail, "link/secret.txt")) == "symlink"


def test_symlink_to_outside_file_refused(jail: Jail, ws: Path, outside: Path) -> None:
    os.symlink(outside / "secret.txt", ws / "flink")
    assert refusal_of(lambda: read_text(jail, "flink")) == "symlink"


def test_symlink_pointing_inside_is_refused_too(jail: Jail, ws: Path) -> None:
    (ws / "real.txt").write_text("inside\n")
    os.symlink("real.txt", ws / "alias.txt")
    assert refusal_of(lambda: read_text(jail, "alias.txt")) == "symlink"


def test_hard_link_to_outside_refused(jail: Jail, ws: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", ws / "hl.txt")
    assert refusal_of(lambda: read_text(jail, "hl.txt")) == "hard_link"


def test_fifo_refused(jail: Jail, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    assert refusal_of(lambda: read_text(jail, "pipe")) == "special_file"


def test_fifo_is_never_opened(jail: Jail, ws: Path) -> None:
    """The lstat pre-check refuses before open: a blocked writer stays blocked."""
    fifo = ws / "pipe"
    os.mkfifo(fifo)
    opened = threading.Event()

    def writer() -> None:
        fd = os.open(fifo, os.O_WRONLY)  # blocks until someone opens for reading
        opened.set()
        os.close(fd)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        assert refusal_of(lambda: read_text(jail, "pipe")) == "special_file"
        assert not opened.wait(0.3), "the jail opened the FIFO"
    finally:
        release = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        thread.join(5)
        os.close(release)


def test_unix_socket_refused(jail: Jail, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ws)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("sock")
        assert refusal_of(lambda: read_text(jail, "sock")) == "special_file"


def test_device_file_refused(jail: Jail, ws: Path) -> None:
    # /dev/null through a hard link would be cross-device; a symlink is refused
    # as a symlink. A FIFO and a socket stand in for devices (S_ISCHR needs mknod).
    os.mkfifo(ws / "dev")
    assert refusal_of(lambda: jail.write_file(RelPath(("dev",)), b"x", create_parents=False)) == (
        "special_file"
    )


MOUNT_PROBE = (
    "import sys\n"
    "from guest.tools.jail import Jail, JailError, parse_relative\n"
    "with Jail(sys.argv[1]) as j:\n"
    "    if sys.argv[3] == 'st_dev':\n"
    "        j._mnt = None  # as if procfs were unreadable: device numbers decide\n"
    "    try:\n"
    "        if sys.argv[2] == 'dir':\n"
    "            with j.directory(parse_relative('mnt')):\n"
    "                print('opened')\n"
    "        else:\n"
    "            with j.regular_file(parse_relative('bound.txt')):\n"
    "                print('opened')\n"
    "    except JailError as e:\n"
    "        print(e.category)\n"
)


@pytest.mark.parametrize(
    ("kind", "method"), [("dir", "mnt_id"), ("file", "mnt_id"), ("dir", "st_dev")]
)
def test_mount_inside_workspace_refused(ws: Path, outside: Path, kind: str, method: str) -> None:
    """A mount inside the workspace (tmpfs dir, bind-mounted file) is `cross_device`.

    Runs in a private mount namespace (`unshare -rm`) so nothing leaks to the host.
    """
    (ws / "mnt").mkdir()
    (ws / "bound.txt").write_text("placeholder\n")
    mounts = (
        'mount -t tmpfs none "$1/mnt" && echo x > "$1/mnt/f" && '
        'mount --bind "$2" "$1/bound.txt" && '
        f'exec "{sys.executable}" -c "$3" "$1" "$4" "$5"'
    )
    proc = subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            mounts,
            "sh",
            str(ws),
            str(outside / "secret.txt"),
            MOUNT_PROBE,
            kind,
            method,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.stdout.strip() == "cross_device", proc.stderr


def test_not_found_and_directory(jail: Jail, ws: Path) -> None:
    (ws / "d").mkdir()
    assert refusal_of(lambda: read_text(jail, "missing.txt")) == "not_found"
    assert refusal_of(lambda: read_text(jail, "d")) == "is_a_directory"
    (ws / "f").write_text("x")
    assert refusal_of(lambda: read_text(jail, "f/x")) == "not_a_directory"


def test_regular_file_inside_is_read(jail: Jail, ws: Path) -> None:
    (ws / "a").mkdir()
    (ws / "a" / "b.txt").write_text("inside\n")
    assert read_text(jail, "a/b.txt") == "inside\n"


# --- races: swaps at the moment of use ----------------------------------------


def swap_on_open(
    monkeypatch: pytest.MonkeyPatch, name: str, swap: Callable[[], None]
) -> list[bool]:
    """Run `swap` just before the jail's first descriptor-relative open of `name`."""
    real_open = os.open
    done: list[bool] = []

    def wrapped(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if path == name and dir_fd is not None and not done:
            done.append(True)
            swap()
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", wrapped)
    return done


def test_directory_swapped_for_symlink_before_open_is_not_followed(
    jail: Jail, ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "secret.txt").write_text("inside\n")

    def swap() -> None:
        os.rename(ws / "sub", ws / "sub-moved")
        os.symlink(outside, ws / "sub")

    done = swap_on_open(monkeypatch, "sub", swap)
    assert refusal_of(lambda: read_text(jail, "sub/secret.txt")) == "symlink"
    assert done


def test_parent_swapped_after_open_keeps_the_checked_directory(
    jail: Jail, ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "secret.txt").write_text("inside\n")

    def swap() -> None:
        os.rename(ws / "sub", ws / "sub-moved")
        os.symlink(outside, ws / "sub")

    done = swap_on_open(monkeypatch, "secret.txt", swap)
    assert read_text(jail, "sub/secret.txt") == "inside\n"
    assert done


def test_file_swapped_for_symlink_after_lstat_is_not_followed(
    jail: Jail, ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "f.txt").write_text("inside\n")

    def swap() -> None:
        os.unlink(ws / "f.txt")
        os.symlink(outside / "secret.txt", ws / "f.txt")

    done = swap_on_open(monkeypatch, "f.txt", swap)
    assert refusal_of(lambda: read_text(jail, "f.txt")) == "symlink"
    assert done


def test_file_swapped_for_fifo_after_lstat_is_refused_by_fstat(
    jail: Jail, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "f.txt").write_text("inside\n")

    def swap() -> None:
        os.unlink(ws / "f.txt")
        os.mkfifo(ws / "f.txt")

    done = swap_on_open(monkeypatch, "f.txt", swap)
    assert refusal_of(lambda: read_text(jail, "f.txt")) == "special_file"
    assert done


def test_file_swapped_for_hard_link_after_lstat_is_refused_by_fstat(
    jail: Jail, ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "f.txt").write_text("inside\n")

    def swap() -> None:
        os.unlink(ws / "f.txt")
        os.link(outside / "secret.txt", ws / "f.txt")

    done = swap_on_open(monkeypatch, "f.txt", swap)
    assert refusal_of(lambda: read_text(jail, "f.txt")) == "hard_link"
    assert done


# --- writes --------------------------------------------------------------------


def test_write_through_symlinked_directory_refused(jail: Jail, ws: Path, outside: Path) -> None:
    os.symlink(outside, ws / "link")
    path = parse_relative("link/new.txt")
    assert refusal_of(lambda: jail.write_file(path, b"x", create_parents=True)) == "symlink"
    assert not (outside / "new.txt").exists()


def test_write_over_symlink_refused(jail: Jail, ws: Path, outside: Path) -> None:
    os.symlink(outside / "secret.txt", ws / "flink")
    path = parse_relative("flink")
    assert refusal_of(lambda: jail.write_file(path, b"x", create_parents=False)) == "symlink"
    assert (outside / "secret.txt").read_text() == SECRET


def test_write_over_hard_link_refused(jail: Jail, ws: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", ws / "hl.txt")
    path = parse_relative("hl.txt")
    assert refusal_of(lambda: jail.write_file(path, b"x", create_parents=False)) == "hard_link"
    assert (outside / "secret.txt").read_text() == SECRET


def test_write_creates_parents_inside(jail: Jail, ws: Path) -> None:
    created = jail.write_file(parse_relative("a/b/c.txt"), b"hi", create_parents=True)
    assert created
    assert (ws / "a" / "b" / "c.txt").read_bytes() == b"hi"
    assert not [p.name for p in (ws / "a" / "b").iterdir() if p.name != "c.txt"]


def test_write_never_goes_through_the_existing_inode(
    jail: Jail, ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hard link swapped in after the checks is replaced, not written through."""
    (ws / "f.txt").write_text("old\n")
    real_open = os.open

    def swapping_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:
        if dir_fd is not None and (ws / "f.txt").stat().st_nlink == 1:
            os.unlink(ws / "f.txt")
            os.link(outside / "secret.txt", ws / "f.txt")
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", swapping_open)
    jail.write_file(parse_relative("f.txt"), b"new\n", create_parents=False)
    assert (outside / "secret.txt").read_text() == SECRET
    assert (ws / "f.txt").read_text() == "new\n"


def test_write_keeps_permission_bits(jail: Jail, ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    jail.write_file(parse_relative("run.sh"), b"#!/bin/sh\nexit 0\n", create_parents=False)
    assert script.stat().st_mode & 0o777 == 0o750


def test_write_keeps_every_permission_bit_and_drops_setuid(jail: Jail, ws: Path) -> None:
    """All nine permission bits are kept (other-execute included); set-uid, set-gid and
    sticky are not: a file the agent rewrote never keeps a privilege bit."""
    script = ws / "tool"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o6757)
    jail.write_file(parse_relative("tool"), b"#!/bin/sh\nexit 0\n", create_parents=False)
    assert script.stat().st_mode & 0o7777 == 0o757


def test_depth_bound_is_exact() -> None:
    """MAX_DEPTH (64) components are a path; one more is refused."""
    assert len(parse_relative("a/" * 64).parts) == 64
    assert refusal_of(lambda: parse_relative("a/" * 65)) == "path_too_long"


UNPRIVILEGED_PROBE = (
    "import sys\n"
    "from guest.tools.jail import Jail, JailError, parse_relative\n"
    "with Jail(sys.argv[1]) as j:\n"
    "    for action in ('read', 'write', 'mkdir'):\n"
    "        try:\n"
    "            if action == 'read':\n"
    "                with j.regular_file(parse_relative('listable/f.txt')):\n"
    "                    print('opened')\n"
    "            elif action == 'write':\n"
    "                j.write_file(parse_relative('readonly/f.txt'), b'x', create_parents=False)\n"
    "                print('written')\n"
    "            else:\n"
    "                new = parse_relative('readonly/new/f.txt')\n"
    "                j.write_file(new, b'x', create_parents=True)\n"
    "                print('written')\n"
    "        except JailError as e:\n"
    "            print(e.category)\n"
)


def test_permission_errors_are_refusals_not_crashes() -> None:
    """A tool that does not run as root meets directories it may list but not search
    (`lstat` fails with EACCES) and directories it cannot create a file in (the write's
    temporary file fails, and so does a parent directory it would create): each is the
    closed refusal `os_denied`, never an OSError
    escaping the tool. As root the probe runs as `nobody`, since root passes both."""
    base = Path(tempfile.mkdtemp(prefix="jail-"))
    try:
        base.chmod(0o755)
        listable = base / "listable"
        listable.mkdir()
        (listable / "f.txt").write_text("x\n")
        listable.chmod(0o444)  # r--: openable as a directory, not searchable
        readonly = base / "readonly"
        readonly.mkdir()
        (readonly / "f.txt").write_text("old\n")
        (readonly / "f.txt").chmod(0o666)
        readonly.chmod(0o555)  # the file may be written, no file may be created beside it
        proc = subprocess.run(
            [sys.executable, "-c", UNPRIVILEGED_PROBE, str(base)],
            user=65534 if os.geteuid() == 0 else None,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert proc.stdout.split() == ["os_denied"] * 3, proc.stderr
        assert (readonly / "f.txt").read_text() == "old\n"
    finally:
        for directory in (listable, readonly):
            directory.chmod(0o755)
        shutil.rmtree(base)


def test_the_root_must_be_a_directory(ws: Path) -> None:
    """The root is opened with O_DIRECTORY: a file given as the workspace is refused at
    once, not held as a root every later open would fail under."""
    (ws / "f.txt").write_text("x\n")
    with pytest.raises(NotADirectoryError):
        Jail(ws / "f.txt")


def test_created_files_and_directories_get_ordinary_modes(
    jail: Jail, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test command may run as another user than the tools: a new file is 0644 and a
    new directory 0755 (under a umask of 0), and the temporary file a write goes through
    is 0600 until its final mode is set, so its partial bytes are never readable by others."""
    seen: list[int] = []
    real_fchmod = os.fchmod

    def recording_fchmod(fd: int, mode: int) -> None:
        seen.append(os.fstat(fd).st_mode & 0o777)
        real_fchmod(fd, mode)

    monkeypatch.setattr(os, "fchmod", recording_fchmod)
    old = os.umask(0)
    try:
        jail.write_file(parse_relative("new/dir/f.txt"), b"x", create_parents=True)
    finally:
        os.umask(old)
    assert seen == [0o600]
    assert (ws / "new").stat().st_mode & 0o777 == 0o755
    assert (ws / "new" / "dir").stat().st_mode & 0o777 == 0o755
    assert (ws / "new" / "dir" / "f.txt").stat().st_mode & 0o777 == 0o644


def test_entry_kind_names_the_last_component(jail: Jail, ws: Path) -> None:
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "c.txt").write_text("x\n")
    os.symlink("c.txt", ws / "a" / "b" / "link")
    assert jail.entry_kind(parse_relative("a/b/c.txt")) == "file"
    assert jail.entry_kind(parse_relative("a/b/link")) == "symlink"
    assert jail.entry_kind(parse_relative("a/b")) == "dir"
    assert jail.entry_kind(parse_relative("a/b/none")) is None
    assert jail.entry_kind(parse_relative(".")) == "dir"


def test_a_read_never_creates_a_directory(jail: Jail, ws: Path) -> None:
    """Only a write asks for its parents to be made; a read of a missing path leaves the
    workspace as it was."""
    assert refusal_of(lambda: read_text(jail, "missing/deeper/f.txt")) == "not_found"
    with pytest.raises(JailError), jail.directory(parse_relative("missing2/d")):
        pass
    assert sorted(p.name for p in ws.iterdir()) == []


def test_a_directory_swapped_in_at_the_target_during_a_write_is_path_changed(
    jail: Jail, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rename over the target fails when a directory took its place after the checks:
    the write is refused as `path_changed`, the directory is untouched and no temporary
    file is left behind."""
    (ws / "f.txt").write_text("old\n")
    real_fchmod = os.fchmod

    def swapping_fchmod(fd: int, mode: int) -> None:
        os.unlink(ws / "f.txt")
        (ws / "f.txt").mkdir()
        (ws / "f.txt" / "keep").write_text("k\n")
        real_fchmod(fd, mode)

    monkeypatch.setattr(os, "fchmod", swapping_fchmod)
    path = parse_relative("f.txt")
    assert refusal_of(lambda: jail.write_file(path, b"new\n", create_parents=False)) == (
        "path_changed"
    )
    assert sorted(p.name for p in ws.iterdir()) == ["f.txt"]
    assert (ws / "f.txt" / "keep").read_text() == "k\n"


def test_a_made_parent_swapped_for_a_symlink_is_not_followed(
    jail: Jail, ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write makes its missing parent, then opens it: a symlink swapped in between is
    refused (`symlink`), and nothing is written outside."""
    real_mkdir = os.mkdir

    def swapping_mkdir(name: Any, mode: int = 0o777, *, dir_fd: Any = None) -> None:
        real_mkdir(name, mode, dir_fd=dir_fd)
        os.rmdir(name, dir_fd=dir_fd)
        os.symlink(str(outside), name, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", swapping_mkdir)
    path = parse_relative("made/f.txt")
    assert refusal_of(lambda: jail.write_file(path, b"x", create_parents=True)) == "symlink"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_a_closed_jail_holds_no_descriptor(ws: Path) -> None:
    with Jail(ws) as jail:
        fd = jail.root_fd
    with pytest.raises(ValueError, match="closed"):
        _ = jail.root_fd
    with pytest.raises(OSError):
        os.fstat(fd)
    jail.close()  # closing twice is harmless


@pytest.mark.parametrize(
    ("raw", "fits"),
    [
        ("/".join(["x" * 255] * 3 + ["x" * 254]) + "/y", True),  # 1,024 bytes
        ("/".join(["x" * 255] * 3 + ["x" * 254]) + "/yy", False),  # 1,025 bytes
        ("x" * 255, True),
        ("\u00e9" * 127 + "x", True),  # 255 bytes in UTF-8
        ("\u00e9" * 128, False),  # 256 bytes in UTF-8, 128 characters
    ],
)
def test_length_bounds_are_exact_and_in_bytes(raw: str, fits: bool) -> None:
    """A path is at most 1,024 bytes and a component 255 (Linux's NAME_MAX), counted in
    UTF-8 bytes, not characters."""
    assert len(raw.encode()) in (255, 256, 1024, 1025)
    if fits:
        assert parse_relative(raw).text == raw
    else:
        assert refusal_of(lambda: parse_relative(raw)) == "path_too_long"


def test_opening_a_directory_never_creates_it_unless_asked(jail: Jail, ws: Path) -> None:
    """The listing walk opens directories it has just listed; one removed in between is
    `not_found`, not made again."""
    assert refusal_of(lambda: jail.open_dir_at(jail.root_fd, "gone")) == "not_found"
    assert not (ws / "gone").exists()


def test_without_procfs_the_device_number_still_refuses_a_mount(ws: Path) -> None:
    """If /proc cannot be read the mount id is unknown, and the jail falls back to device
    numbers: a tmpfs inside the workspace is still `cross_device`. Runs in a private mount
    namespace with an empty tmpfs over /proc."""
    (ws / "mnt").mkdir()
    probe = (
        "import sys\n"
        "from guest.tools.jail import Jail, JailError, parse_relative\n"
        "with Jail(sys.argv[1]) as j:\n"
        "    try:\n"
        "        with j.directory(parse_relative('mnt')):\n"
        "            print('opened')\n"
        "    except JailError as e:\n"
        "        print(e.category)\n"
    )
    script = 'mount -t tmpfs none "$1/mnt" && mount -t tmpfs none /proc && exec "$2" -c "$3" "$1"'
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", str(ws), sys.executable, probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.stdout.strip() == "cross_device", proc.stderr


def test_a_parent_made_by_someone_else_meanwhile_is_used(
    jail: Jail, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writes making the same parent race: the loser's mkdir finds it made
    (FileExistsError) and opens it; the write succeeds."""
    real_mkdir = os.mkdir

    def raced_mkdir(name: Any, mode: int = 0o777, *, dir_fd: Any = None) -> None:
        real_mkdir(name, mode, dir_fd=dir_fd)  # the other writer wins
        real_mkdir(name, mode, dir_fd=dir_fd)  # raises FileExistsError

    monkeypatch.setattr(os, "mkdir", raced_mkdir)
    assert jail.write_file(parse_relative("p/f.txt"), b"x", create_parents=True)
    assert (ws / "p" / "f.txt").read_bytes() == b"x"


def test_reading_nested_files_leaves_no_descriptor_open(jail: Jail, ws: Path) -> None:
    (ws / "a" / "b" / "c").mkdir(parents=True)
    (ws / "a" / "b" / "c" / "f.txt").write_text("x\n")
    before = sorted(os.listdir("/proc/self/fd"))
    for _ in range(3):
        assert read_text(jail, "a/b/c/f.txt") == "x\n"
        assert refusal_of(lambda: read_text(jail, "a/b/c/missing")) == "not_found"
    assert sorted(os.listdir("/proc/self/fd")) == before


def test_a_read_only_filesystem_is_an_os_error(ws: Path) -> None:
    """An error that is neither a permission nor a name length (EROFS here) is the
    catch-all refusal `os_error`. The workspace is a tmpfs made read-only, in a private
    mount namespace."""
    probe = (
        "import sys\n"
        "from guest.tools.jail import Jail, JailError, parse_relative\n"
        "with Jail(sys.argv[1]) as j:\n"
        "    try:\n"
        "        j.write_file(parse_relative('f.txt'), b'x', create_parents=False)\n"
        "        print('written')\n"
        "    except JailError as e:\n"
        "        print(e.category)\n"
    )
    script = (
        'mount -t tmpfs none "$1" && echo old > "$1/f.txt" && mount -o remount,ro "$1" && '
        'exec "$2" -c "$3" "$1"'
    )
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", str(ws), sys.executable, probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.stdout.strip() == "os_error", proc.stderr


def test_a_planted_temporary_name_is_never_followed(
    jail: Jail, ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temporary file's name is random; even if it were guessed and a symlink planted
    there, the exclusive create refuses it and nothing outside is written."""
    monkeypatch.setattr("guest.tools.jail.secrets.token_hex", lambda _n: "0" * 16)
    os.symlink(outside / "secret.txt", ws / f".f.txt.tmp-{'0' * 16}")
    path = parse_relative("f.txt")
    assert refusal_of(lambda: jail.write_file(path, b"pwned\n", create_parents=False)) == (
        "os_error"
    )
    assert (outside / "secret.txt").read_text() == SECRET


def test_a_failed_write_leaves_no_temporary_file(ws: Path) -> None:
    """A write that runs out of space (ENOSPC on a 4 KiB tmpfs, in a private mount
    namespace) is `os_error`, the old file is intact and the temporary file is removed."""
    probe = (
        "import os, sys\n"
        "from guest.tools.jail import Jail, JailError, parse_relative\n"
        "with Jail(sys.argv[1]) as j:\n"
        "    try:\n"
        "        j.write_file(parse_relative('f.txt'), b'x' * (1 << 20), create_parents=False)\n"
        "        print('written')\n"
        "    except JailError as e:\n"
        "        print(e.category)\n"
        "print(' '.join(sorted(os.listdir(sys.argv[1]))))\n"
        "print(open(os.path.join(sys.argv[1], 'f.txt')).read().strip())\n"
    )
    script = (
        'mount -t tmpfs -o size=16k none "$1" && echo old > "$1/f.txt" && exec "$2" -c "$3" "$1"'
    )
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", str(ws), sys.executable, probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.stdout.splitlines() == ["os_error", "f.txt", "old"], proc.stderr
