"""Helpers that damage or reshape a copied checkpoint for refusal tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy.typing as npt

from host.model.safetensors_header import parse_header, read_raw
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


def edit_json(path: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    """Rewrite a JSON object file after *edit* changed it in place."""
    value = json.loads(path.read_text(encoding="utf-8"))
    edit(value)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")
