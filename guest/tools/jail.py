"""The workspace jail: every tool path resolves inside one root, or is refused.

Why it is built this way:

- Paths are parsed as text first (`parse_relative`): absolute paths, `..`, NUL,
  C0/C1 control characters and DEL, Unicode line separators, bidirectional controls,
  invalid UTF-8 and over-long paths are refused before the filesystem is touched;
  listings skip (and count) entries whose names would be refused.
  `/proc/self/root/...` is an absolute path and is refused as one; a relative route
  to it must pass through a symlink and is refused as one.
- Resolution never uses a string path. The root is opened once (`O_DIRECTORY`) and
  held; each component is opened relative to its parent's descriptor with
  `O_NOFOLLOW`. A symlink swapped in after any check cannot be followed, because
  there is no check-then-use on a path: the open itself is the check, and a
  directory already opened stays the directory we checked even if it is renamed.
- Symlinks are refused anywhere on the path, whether they point inside or
  outside. Deciding "inside" would need resolving the target, which is exactly
  the check-then-use race this module exists to avoid. Listings show them but
  never follow them.
- Regular files with more than one hard link are refused: the other link may be
  outside the workspace, and a file's links cannot be enumerated.
- Devices, FIFOs and sockets are refused by `lstat` before opening (opening a
  device or FIFO has side effects) and again by `fstat` after opening (in case the
  entry was swapped in between). The open uses `O_NONBLOCK` so it cannot hang.
- Every directory and file opened must be on the root's mount: a mount inside the
  workspace (procfs, tmpfs, a bind mount even of the same filesystem) is refused as
  `cross_device`. The mount is read from `/proc/self/fdinfo/<fd>` (`mnt_id`); if the
  root's mount id cannot be read there, the device number is compared instead, and
  if a later descriptor's id cannot be read, it is refused.
- Writes go to a fresh temporary file in the target's directory and are renamed
  over the target, so a write never goes through an existing inode (a hard link
  or a file swapped in) and a failed write leaves the old file intact.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Literal

from guest.tools.categories import JailRefusal

MAX_PATH_BYTES = 1024
MAX_COMPONENT_BYTES = 255
MAX_DEPTH = 64

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

EntryKind = Literal["file", "dir", "symlink", "special"]


class JailError(Exception):
    """A refusal with its closed category; the message is the category only."""

    def __init__(self, category: JailRefusal) -> None:
        super().__init__(category)
        self.category: JailRefusal = category


@dataclass(frozen=True)
class RelPath:
    """A parsed path: components relative to the workspace root, `()` is the root."""

    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        return "/".join(self.parts) if self.parts else "."

    @property
    def parent(self) -> RelPath:
        return RelPath(self.parts[:-1])

    def child(self, name: str) -> RelPath:
        return RelPath((*self.parts, name))


# Characters that make a name print as something it is not, in a listing or a log line:
# C0 and C1 controls and DEL (U+0085 NEXT LINE is C1); U+2028/U+2029, which many
# renderers and JSON-in-JS readers treat as line breaks; and every Unicode Bidi_Control
# character (embeddings, overrides, isolates and marks), which reorder the text around
# them ("Trojan Source").
_LINE_SEPARATORS = frozenset("\u2028\u2029")
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def _is_control(c: str) -> bool:
    code = ord(c)
    return code < 0x20 or 0x7F <= code <= 0x9F


def check_name(name: str) -> JailRefusal | None:
    """The refusal for one component's text, or None. Shared with listings."""
    if "\x00" in name:
        return "nul_byte"
    if any(_is_control(c) for c in name):
        return "control_character"
    if any(c in _LINE_SEPARATORS for c in name):
        return "line_separator"
    if any(c in _BIDI_CONTROLS for c in name):
        return "bidi_control"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "invalid_encoding"
    if size > MAX_COMPONENT_BYTES:
        return "path_too_long"
    return None


def parse_relative(raw: str) -> RelPath:
    """Parse a model-supplied path; `""` and `"."` are the root. Raises JailError."""
    # NUL, control characters and invalid encoding are judged per component by
    # `check_name` (one check each, so each has one test that sees it go missing).
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise JailError("path_too_long")
    if raw.startswith("/"):
        raise JailError("absolute_path")
    parts = tuple(p for p in raw.split("/") if p not in ("", "."))
    if ".." in parts:
        raise JailError("parent_component")
    if len(parts) > MAX_DEPTH:
        raise JailError("path_too_long")
    for part in parts:
        refusal = check_name(part)
        if refusal is not None:
            raise JailError(refusal)
    return RelPath(parts)


def kind_of(mode: int) -> EntryKind:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "special"


def _os_refusal(exc: OSError) -> JailRefusal:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "os_denied"
    if exc.errno == errno.ENAMETOOLONG:
        return "path_too_long"
    return "os_error"


class Jail:
    """Opens files and directories under one root, never outside it."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        real = os.path.realpath(root)
        for candidate in (os.path.abspath(root), real):  # before and after magic links
            for pseudo in ("/proc", "/sys", "/dev"):
                if candidate == pseudo or candidate.startswith(pseudo + "/"):
                    raise ValueError("workspace root is inside a pseudo filesystem")
        fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._root_fd: int | None = fd
        self._dev = os.fstat(fd).st_dev
        self._mnt = mount_id(fd)
        self.root = real

    def close(self) -> None:
        if self._root_fd is not None:
            os.close(self._root_fd)
            self._root_fd = None

    def __enter__(self) -> Jail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def root_fd(self) -> int:
        if self._root_fd is None:
            raise ValueError("jail is closed")
        return self._root_fd

    def lstat_at(self, dir_fd: int, name: str) -> os.stat_result | None:
        """`lstat` of `name` in `dir_fd`, or None when absent."""
        try:
            return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise JailError(_os_refusal(exc)) from exc

    def _classify_open_failure(self, dir_fd: int, name: str, exc: OSError) -> JailRefusal:
        """Name why an open failed. The refusal already happened; this only labels it."""
        if isinstance(exc, FileNotFoundError):
            return "not_found"
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EISDIR):
            try:
                st = self.lstat_at(dir_fd, name)
            except JailError as inner:
                return inner.category
            if st is None:
                return "path_changed"
            kind = kind_of(st.st_mode)
            if kind == "symlink":
                return "symlink"
            if kind == "special":
                return "special_file"
            if kind == "file":
                return "not_a_directory"
            return "path_changed"
        return _os_refusal(exc)

    def open_dir_at(self, dir_fd: int, name: str, *, create: bool = False) -> int:
        """Open directory `name` under `dir_fd` without following a symlink."""
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                raise JailError("not_found") from None
            try:
                os.mkdir(name, 0o755, dir_fd=dir_fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise JailError(_os_refusal(exc)) from exc
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                raise JailError(self._classify_open_failure(dir_fd, name, exc)) from exc
        except OSError as exc:
            raise JailError(self._classify_open_failure(dir_fd, name, exc)) from exc
        if not self._same_mount(fd, os.fstat(fd)):
            os.close(fd)
            raise JailError("cross_device")
        return fd

    def _same_mount(self, fd: int, st: os.stat_result) -> bool:
        if self._mnt is None:
            return st.st_dev == self._dev
        return mount_id(fd) == self._mnt

    @contextmanager
    def directory(self, path: RelPath, *, create: bool = False) -> Iterator[int]:
        """A descriptor for directory `path`, opened component by component."""
        current = self.root_fd
        opened: list[int] = []
        try:
            for name in path.parts:
                current = self.open_dir_at(current, name, create=create)
                opened.append(current)
                if len(opened) > 1:
                    os.close(opened.pop(0))
            yield current
        finally:
            for fd in opened:
                os.close(fd)

    @contextmanager
    def regular_file(self, path: RelPath) -> Iterator[tuple[int, os.stat_result]]:
        """A read-only descriptor and its `fstat` for regular file `path`."""
        if not path.parts:
            raise JailError("is_a_directory")
        name = path.parts[-1]
        with self.directory(path.parent) as dir_fd:
            pre = self.lstat_at(dir_fd, name)
            if pre is None:
                raise JailError("not_found")
            pre_kind = kind_of(pre.st_mode)
            # A symlink is refused by O_NOFOLLOW at open (and named by the classifier).
            if pre_kind == "dir":
                raise JailError("is_a_directory")
            if pre_kind == "special":
                raise JailError("special_file")
            try:
                fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                raise JailError(self._classify_open_failure(dir_fd, name, exc)) from exc
            try:
                st = os.fstat(fd)
                _check_opened_file(st)
                if not self._same_mount(fd, st):
                    raise JailError("cross_device")
                yield fd, st
            finally:
                os.close(fd)

    def entry_kind(self, path: RelPath) -> EntryKind | None:
        """The kind of the entry at `path` without following it; None when absent."""
        if not path.parts:
            return "dir"
        with self.directory(path.parent) as dir_fd:
            st = self.lstat_at(dir_fd, path.parts[-1])
        return None if st is None else kind_of(st.st_mode)

    def write_file(self, path: RelPath, data: bytes, *, create_parents: bool) -> bool:
        """Replace or create regular file `path` with `data`; True if it was created.

        The existing file's permission bits are kept. Refuses the same entries a
        read would (symlink, special file, hard link, directory).
        """
        if not path.parts:
            raise JailError("is_a_directory")
        name = path.parts[-1]
        with self.directory(path.parent, create=create_parents) as dir_fd:
            existing = self.lstat_at(dir_fd, name)
            mode = 0o644
            if existing is not None:
                kind = kind_of(existing.st_mode)
                if kind == "symlink":
                    raise JailError("symlink")
                if kind == "dir":
                    raise JailError("is_a_directory")
                if kind == "special":
                    raise JailError("special_file")
                if existing.st_nlink > 1:
                    raise JailError("hard_link")
                mode = stat.S_IMODE(existing.st_mode) & 0o777
            tmp = f".{name[:200]}.tmp-{secrets.token_hex(8)}"
            try:
                fd = os.open(tmp, _TMP_FLAGS, 0o600, dir_fd=dir_fd)
            except OSError as exc:
                raise JailError(_os_refusal(exc)) from exc
            try:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fchmod(fd, mode)
                finally:
                    os.close(fd)
                os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except OSError as exc:
                with suppress(OSError):
                    os.unlink(tmp, dir_fd=dir_fd)
                if exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                    raise JailError("path_changed") from exc
                raise JailError(_os_refusal(exc)) from exc
        return existing is None


def _check_opened_file(st: os.stat_result) -> None:
    """Checks on the opened inode itself: authoritative, whatever the name now is."""
    if not stat.S_ISREG(st.st_mode):
        raise JailError("special_file")
    if st.st_nlink > 1:
        raise JailError("hard_link")


def mount_id(fd: int) -> int | None:
    """The mount id of an open descriptor (`mnt_id` in procfs fdinfo), or None."""
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as info:
            for line in info:
                if line.startswith(b"mnt_id:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None
