"""The guest runtime gate: verify the runtime tree against its pin table, then import.

This file is sent by the host and run as `python3 -I -B -S -c SOURCE ...` before any of
our code is imported, so it may use the standard library only (importing pydantic or
receipts here would execute exactly the unverified code it exists to check). It prints
one line `HARNESS-GATE <canonical JSON>` with a category from
receipts.records.gate.GateCategory, then, only when the category is `ok`, runs the
requested module with the verified root first on sys.path and bytecode writing off.

Refused (docs/engineering.md §4): a pin table whose digest is not the one the host sent;
files the table does not name (importable or not); any __pycache__ (an unchecked-hash
.pyc would run in place of the verified source); symlinks; special files; missing
files, wrong sizes, wrong digests; a root that is not first on sys.path, or any entry
after it that is not the interpreter's own standard library; bytecode writing on.

The imported bytes must be the verified bytes, and Python re-opens each file after the
gate hashed it. So the root must be on a read-only mount (`statvfs` ST_RDONLY, checked
first, and again on each hashed file's descriptor, so a writable mount inside the root
is refused too; `ok` means they were): nothing can swap or rewrite a file between the
hash and the import. A file with more than one hard link is refused (its other name may be on a
writable mount of the same filesystem). A directory the walk cannot list is refused,
not skipped, and so is a tree deeper than MAX_DEPTH (1,100 nested directories crashed
the recursive walk with no gate line). Each check costs one syscall or none per file.

Usage: bootstrap ROOT PIN_TABLE_PATH PIN_TABLE_SHA256 MODULE [ARG ...]
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import os
import runpy
import stat
import sys
import sysconfig

CHUNK = 1 << 20
MAX_DEPTH = 64  # directories below the root; the runtimes' deepest is about a dozen
IMPORTABLE_SUFFIXES = (
    *importlib.machinery.SOURCE_SUFFIXES,
    *importlib.machinery.BYTECODE_SUFFIXES,
    *importlib.machinery.EXTENSION_SUFFIXES,
    ".pth",
    ".so",
    ".pyz",
    ".zip",
    ".egg",
)


class GateRefusal(Exception):
    def __init__(self, category: str, files_verified: int = 0) -> None:
        super().__init__(category)
        self.category = category
        self.files_verified = files_verified


def _sha256_nofollow(path: str) -> tuple[int, str]:
    """Hash a regular file without following a link and without blocking on a FIFO that
    was swapped in after the walk's lstat (the type is re-checked on the open fd)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise GateRefusal("special_file")  # FIFOs, devices, sockets: checked on the fd
        if info.st_nlink > 1:
            raise GateRefusal("hard_link")  # on the fd: the inode that was hashed
        if not os.fstatvfs(fd).f_flag & os.ST_RDONLY:
            raise GateRefusal("root_writable")  # a writable mount inside the read-only root
        digest = hashlib.sha256()
        while chunk := os.read(fd, CHUNK):
            digest.update(chunk)
        return info.st_size, digest.hexdigest()
    finally:
        os.close(fd)


def load_table(table_path: str, expected_sha256: str) -> dict[str, tuple[int, str]]:
    with open(table_path, "rb") as handle:
        raw = handle.read()
    if hashlib.sha256(raw).hexdigest() != expected_sha256:
        raise GateRefusal("pin_table_mismatch")
    table = json.loads(raw)
    if table.get("schema") != "harness.gate.pins/1":
        raise GateRefusal("pin_table_mismatch")
    return {item["path"]: (item["size"], item["sha256"]) for item in table["files"]}


def _classify_unlisted(relative: str) -> str:
    return "unlisted_importable" if relative.endswith(IMPORTABLE_SUFFIXES) else "unlisted_file"


def check_read_only(root: str) -> None:
    """The root's mount is read-only, so the files hashed are the files imported."""
    if not os.statvfs(root).f_flag & os.ST_RDONLY:
        raise GateRefusal("root_writable")


def _unlistable(error: OSError) -> None:
    raise GateRefusal("unreadable_directory")


def verify_tree(root: str, pins: dict[str, tuple[int, str]]) -> int:
    """Check every file under root against the pins; return how many were verified."""
    seen: set[str] = set()
    verified = 0
    for directory, dirnames, filenames in os.walk(root, onerror=_unlistable, followlinks=False):
        dirnames.sort()
        if dirnames and directory[len(root) :].count(os.sep) + 1 > MAX_DEPTH:
            raise GateRefusal("too_deep", verified)
        for name in dirnames:
            if name == "__pycache__":
                raise GateRefusal("pycache_present", verified)
            if os.path.islink(os.path.join(directory, name)):
                raise GateRefusal("symlink", verified)
        for name in sorted(filenames):
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise GateRefusal("symlink", verified)
            if relative not in pins:
                raise GateRefusal(_classify_unlisted(relative), verified)
            size, digest = _sha256_nofollow(path)
            expected_size, expected_digest = pins[relative]
            if size != expected_size:
                raise GateRefusal("size_mismatch", verified)
            if digest != expected_digest:
                raise GateRefusal("digest_mismatch", verified)
            seen.add(relative)
            verified += 1
    if set(pins) - seen:
        raise GateRefusal("missing_file", verified)
    return verified


def stdlib_dirs() -> set[str]:
    """The interpreter's own library locations: the only entries allowed after the root."""
    stdlib = sysconfig.get_paths()["stdlib"]
    platstdlib = sysconfig.get_paths()["platstdlib"]
    version = f"{sys.version_info.major}{sys.version_info.minor}"
    candidates = {
        stdlib,
        platstdlib,
        os.path.join(platstdlib, "lib-dynload"),
        os.path.join(sys.base_prefix, "lib", f"python{version}.zip"),
    }
    return {os.path.realpath(path) for path in candidates}


def check_interpreter(root: str, path: list[str]) -> None:
    """Bytecode writing off; the verified root first; nothing but the stdlib after it.

    A '' entry (the working directory, added when Python is not run with -I), a
    PYTHONPATH directory or a site-packages directory would let an import that the
    root does not satisfy fall through to unverified code.
    """
    if not sys.flags.dont_write_bytecode or not sys.dont_write_bytecode:
        raise GateRefusal("bytecode_writing_on")
    if not path or os.path.realpath(path[0]) != os.path.realpath(root):
        raise GateRefusal("not_first_on_path")
    allowed = stdlib_dirs()
    if any(entry == "" or os.path.realpath(entry) not in allowed for entry in path[1:]):
        raise GateRefusal("foreign_path_entry")


def report(category: str, files_verified: int, table_sha256: str) -> None:
    line = json.dumps(
        {"category": category, "files_verified": files_verified, "pin_table_sha256": table_sha256},
        sort_keys=True,
        separators=(",", ":"),
    )
    sys.stdout.write(f"HARNESS-GATE {line}\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        sys.stderr.write("usage: bootstrap ROOT PIN_TABLE PIN_TABLE_SHA256 MODULE [ARG ...]\n")
        return 2
    root, table_path, table_sha256, module, *rest = argv
    root = os.path.realpath(root)
    verified = 0
    try:
        pins = load_table(table_path, table_sha256)
        check_read_only(root)
        verified = verify_tree(root, pins)
        sys.path.insert(0, root)
        check_interpreter(root, sys.path)
    except GateRefusal as refusal:
        report(refusal.category, refusal.files_verified or verified, table_sha256)
        return 3
    except OSError:
        report("unread", verified, table_sha256)
        return 3
    report("ok", verified, table_sha256)
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
