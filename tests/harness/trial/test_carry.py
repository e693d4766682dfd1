"""The final workspace's archive from the agent's guest, read as hostile input (carry.py).

Each archive is built with `tarfile` the way a guest's `tar` could write it, or the way
agent code that controls that guest could forge it.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from harness.trial import carry
from harness.trial.carry import CarryRefused, pack_workspace, unpack_workspace
from receipts.treedigest import tree_sha256


def _archive(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return path


def _file(name: str, data: bytes, mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.mode = mode
    return info, data


def _special(name: str, kind: bytes, target: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


def _dir(name: str) -> tuple[tarfile.TarInfo, None]:
    return _special(name, tarfile.DIRTYPE)


def test_regular_files_and_directories_are_carried_with_only_the_exec_bit(
    tmp_path: Path,
) -> None:
    archive = _archive(
        tmp_path / "a.tar",
        [
            _dir("./"),
            _dir("./pkg"),
            _file("./pkg/mod.py", b"x = 1\n", 0o4777),
            _file("./run.sh", b"#!/bin/sh\n", 0o700),
            _special("./link", tarfile.SYMTYPE, "/etc/passwd"),
            _special("./hard", tarfile.LNKTYPE, "run.sh"),
            _special("./fifo", tarfile.FIFOTYPE),
        ],
    )
    carried = unpack_workspace(archive, tmp_path / "out")
    assert (carried.files, carried.bytes, carried.dropped) == (2, 16, 3)
    out = tmp_path / "out"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "pkg",
        "pkg/mod.py",
        "run.sh",
    ]
    assert (out / "pkg" / "mod.py").stat().st_mode & 0o7777 == 0o755  # setuid dropped
    assert (out / "run.sh").stat().st_mode & 0o7777 == 0o755
    assert not (out / "link").is_symlink()


@pytest.mark.parametrize(
    ("members", "reason"),
    [
        ([_file("/etc/cron.d/x", b"x")], "unsafe_name"),
        ([_file("../outside.py", b"x")], "unsafe_name"),
        ([_file("./a/../../outside.py", b"x")], "unsafe_name"),
        ([_file("./a.py", b"1"), _file("./a.py", b"2")], "duplicate_name"),
        ([_dir("./a"), _file("./a", b"a file named like the directory")], "duplicate_name"),
        ([_file("./a", b"file"), _file("./a/b.py", b"under a file")], "unsafe_name"),
    ],
    ids=["absolute", "dotdot", "dotdot_inside", "duplicate", "dir_then_file", "file_as_parent"],
)
def test_unsafe_archives_are_refused_and_leave_nothing(
    tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], reason: str
) -> None:
    archive = _archive(tmp_path / "a.tar", members)
    with pytest.raises(CarryRefused) as refused:
        unpack_workspace(archive, tmp_path / "out")
    assert refused.value.reason == reason
    assert not (tmp_path / "out").exists()
    assert not (tmp_path.parent / "outside.py").exists()


def test_bounds_on_count_and_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(carry, "MAX_FILES", 2)
    many = _archive(tmp_path / "many.tar", [_file(f"./f{i}", b"x") for i in range(3)])
    with pytest.raises(CarryRefused) as refused:
        unpack_workspace(many, tmp_path / "out1")
    assert refused.value.reason == "too_many_files"
    monkeypatch.setattr(carry, "MAX_FILES", 100)
    monkeypatch.setattr(carry, "MAX_TOTAL_BYTES", 10)
    big = _archive(tmp_path / "big.tar", [_file("./a", b"123456"), _file("./b", b"123456")])
    with pytest.raises(CarryRefused) as refused:
        unpack_workspace(big, tmp_path / "out2")
    assert refused.value.reason == "too_large"
    assert not (tmp_path / "out1").exists() and not (tmp_path / "out2").exists()


def test_bytes_that_are_no_archive_are_malformed(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"\x00not a tar" * 100)
    with pytest.raises(CarryRefused) as refused:
        unpack_workspace(junk, tmp_path / "out")
    assert refused.value.reason == "archive_malformed"
    assert not (tmp_path / "out").exists()


def test_the_host_packs_what_it_carried_as_root_owned_regular_files(tmp_path: Path) -> None:
    source = tmp_path / "carried"
    (source / "pkg" / "sub").mkdir(parents=True)
    (source / "pkg" / "sub" / "a.py").write_text("a = 1\n")
    (source / "run.sh").write_text("#!/bin/sh\n")
    (source / "run.sh").chmod(0o755)
    (source / "link").symlink_to("run.sh")  # never the carry's output: left out
    archive = tmp_path / "carried.tar"
    assert pack_workspace(source, archive) == 2
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["pkg", "pkg/sub", "pkg/sub/a.py", "run.sh"]
    assert {(m.uid, m.gid, m.uname, m.mtime) for m in members} == {(0, 0, "", 0)}
    back = tmp_path / "back"
    (back).mkdir()
    subprocess.run(["tar", "--no-same-owner", "-C", str(back), "-xf", str(archive)], check=True)
    (source / "link").unlink()
    assert tree_sha256(back) == tree_sha256(source)
