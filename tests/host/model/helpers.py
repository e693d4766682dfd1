"""Helpers that damage or reshape a copied checkpoint for refusal tests."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from host.model.convert import TensorPlan
from host.model.safetensors_header import parse_header, read_raw
from host.model.sourcehash import HashedSource
from host.model.synth import safetensors_bytes

Tensors = dict[str, tuple[str, npt.NDArray[Any]]]


def load_tensors(path: Path) -> Tensors:
    """All tensors of a safetensors file as (dtype, stored array)."""
    header = parse_header(path)
    return {name: (e.dtype, read_raw(path, e)) for name, e in header.tensors.items()}


def edit_weights(root: Path, edit: Callable[[Tensors], object]) -> None:
    """Rewrite ``model.safetensors`` after *edit* changed the tensor dict in place."""
    tensors = load_tensors(root / "model.safetensors")
    edit(tensors)
    (root / "model.safetensors").write_bytes(safetensors_bytes(tensors))


SIGNALLING_BF16_NANS = np.array([0x7F81, 0xFF81], dtype="<u2")
"""A positive and a negative signalling BF16 NaN: ggml sets their quiet bit (0x0040)
when it encodes them, so they can never be copied as stored."""


def plant_signalling_nans(root: Path) -> None:
    """Put SIGNALLING_BF16_NANS at values 5 and 6 of a Llama checkpoint's BF16 embedding."""

    def plant(tensors: Tensors) -> None:
        dtype, values = tensors["model.embed_tokens.weight"]
        values = values.copy()
        values.reshape(-1)[5:7] = SIGNALLING_BF16_NANS
        tensors["model.embed_tokens.weight"] = (dtype, values)

    edit_weights(root, plant)


def stored_bytes(tensor: TensorPlan) -> bytes:
    """A planned tensor's stored bytes in its source shard."""
    with tensor.source_file.open("rb") as f:
        f.seek(tensor.entry.begin)
        return f.read(tensor.entry.nbytes)


def edit_json(path: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    """Rewrite a JSON object file after *edit* changed it in place."""
    value = json.loads(path.read_text(encoding="utf-8"))
    edit(value)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")


def hf_cache_of(plain: Path, into: Path, revision: str = "0" * 40) -> Path:
    """Lay *plain* out as ``hf download`` does in the HF cache; return the snapshot dir.

    ``into/models--org--tiny/blobs/<sha256>`` holds each file's bytes, and
    ``snapshots/<revision>/NAME`` is a relative symlink ``../../blobs/<sha256>`` (one
    more ``..`` per subdirectory), as huggingface_hub writes them.
    """
    repo = into / "models--org--tiny"
    blobs = repo / "blobs"
    snapshot = repo / "snapshots" / revision
    blobs.mkdir(parents=True, exist_ok=True)
    for path in sorted(p for p in plain.rglob("*") if p.is_file()):
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        link = snapshot / path.relative_to(plain)
        link.parent.mkdir(parents=True, exist_ok=True)
        depth = len(path.relative_to(plain).parts) + 1
        link.symlink_to("/".join([".."] * depth + ["blobs", digest]))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


class Counting(HashedSource):
    """A HashedSource that adds up the bytes the converter asked it for."""

    opened: ClassVar[list[Counting]] = []

    def __init__(self, name: str, path: Path) -> None:
        super().__init__(name, path)
        self.requested = 0
        Counting.opened.append(self)

    def read_into(self, view: memoryview, offset: int) -> Future[None] | None:
        self.requested += len(view)
        return super().read_into(view, offset)
