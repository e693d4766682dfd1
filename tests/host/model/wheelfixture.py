"""Data wheels made here, served by pip from a local folder: a model split over wheels
without the network (`PIP_NO_INDEX` and `PIP_FIND_LINKS` for the pip that
host/wheelfetch.py runs)."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import numpy as np
import pytest

from host.model.wheelparts import WheelMember, Whole


def tiny_gguf(path: Path) -> bytes:
    """A real GGUF of one f32 tensor (what the model stage reads back after assembly)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("token_embd.weight", np.arange(4096, dtype=np.float32).reshape(64, 64))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def _record_hash(body: bytes) -> str:
    """A wheel RECORD's hash field (urlsafe base64 of the SHA-256, no padding)."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()


def data_wheel(folder: Path, name: str, member: str, data: bytes) -> Path:
    """A wheel `name-1.0` holding `member` (what a data-only wheel on the index holds)."""
    dist = f"{name.replace('-', '_')}-1.0"
    files = {
        member: data,
        f"{dist}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()
        ),
        f"{dist}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{path},{_record_hash(body)},{len(body)}\n" for path, body in files.items())
    files[f"{dist}.dist-info/RECORD"] = (record + f"{dist}.dist-info/RECORD,,\n").encode()
    path = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for entry, body in files.items():
            archive.writestr(entry, body)
    return path


def split_into_wheels(
    folder: Path, data: bytes, parts: int, prefix: str = "modelpart"
) -> tuple[list[WheelMember], Whole]:
    """`data` cut into `parts` chunks, one data wheel each; their pins and the whole's."""
    folder.mkdir(parents=True, exist_ok=True)
    step = -(-len(data) // parts)
    members = []
    for index in range(parts):
        chunk = data[index * step : (index + 1) * step]
        name = f"{prefix}{index + 1}"
        member = f"{name}/data/part{index + 1:02d}.bin"
        wheel = data_wheel(folder, name, member, chunk)
        body = wheel.read_bytes()
        members.append(
            WheelMember(
                requirement=f"{name}==1.0",
                wheel_size=len(body),
                wheel_sha256=hashlib.sha256(body).hexdigest(),
                member=member,
                member_size=len(chunk),
                member_sha256=hashlib.sha256(chunk).hexdigest(),
            )
        )
    return members, Whole(len(data), hashlib.sha256(data).hexdigest())


def serve_from(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """pip fetches from `folder` only, as from an index that holds just these wheels."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
