"""``general.sampling.*`` keys from ``generation_config.json``, as llama.cpp writes them.

Why: llama.cpp's ``convert_hf_to_gguf.py`` copies the checkpoint's recommended sampling
settings into the GGUF (``gguf-py/gguf/metadata.py``, ``Metadata.load``, lines 77-89 in
the llama-cpp-python 0.3.36 sdist; written by ``set_gguf_meta_model``, lines 609-632),
and llama.cpp's tools use them as defaults. The file is part of the snapshot, so it is
pinned like every other file and the keys are a function of pinned bytes: writing them
keeps the GGUF a function of its content key (STANDARDS.md section 6).

Differences from llama.cpp, on purpose: a ``generation_config.json`` that is not a JSON
object, or a value of the wrong type, is refused (llama.cpp silently skips an unreadable
file and would write whatever type it found); llama.cpp's own key names
(``top_k``, ``penalty_repeat`` before ``repetition_penalty`` ...) are read with the
same precedence it uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from host.model.categories import ConvertError
from host.model.vocab import load_json_object

GENERATION_CONFIG = "generation_config.json"


@dataclass(frozen=True)
class SamplingKey:
    """One ``general.sampling.*`` key: GGUF name, value type and value."""

    key: str
    kind: Literal["int32", "float32", "string"]
    value: int | float | str


# (GGUF key, value type, generation_config names in llama.cpp's order of precedence)
_KEYS: tuple[tuple[str, Literal["int32", "float32", "string"], tuple[str, ...]], ...] = (
    ("general.sampling.sequence", "string", ("sequence",)),
    ("general.sampling.top_k", "int32", ("top_k",)),
    ("general.sampling.top_p", "float32", ("top_p",)),
    ("general.sampling.min_p", "float32", ("min_p",)),
    ("general.sampling.xtc_probability", "float32", ("xtc_probability",)),
    ("general.sampling.xtc_threshold", "float32", ("xtc_threshold",)),
    ("general.sampling.temp", "float32", ("temperature",)),
    ("general.sampling.penalty_last_n", "int32", ("penalty_last_n",)),
    ("general.sampling.penalty_repeat", "float32", ("penalty_repeat", "repetition_penalty")),
    ("general.sampling.mirostat", "int32", ("mirostat",)),
    ("general.sampling.mirostat_tau", "float32", ("mirostat_tau",)),
    ("general.sampling.mirostat_eta", "float32", ("mirostat_eta",)),
)
INT32 = (-(1 << 31), (1 << 31) - 1)


def _checked(kind: str, value: Any) -> int | float | str:
    if kind == "string":
        if isinstance(value, str):
            return value
    elif kind == "int32":
        if isinstance(value, int) and not isinstance(value, bool) and INT32[0] <= value <= INT32[1]:
            return value
    elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise ConvertError("unsupported_config", GENERATION_CONFIG)


def sampling_keys(source: Path) -> tuple[SamplingKey, ...]:
    """The keys llama.cpp would write for *source* (none without the file)."""
    path = source / GENERATION_CONFIG
    if not path.exists():
        return ()
    try:
        config = load_json_object(path)
    except (OSError, ValueError, TypeError) as exc:
        raise ConvertError("config_unreadable", GENERATION_CONFIG) from exc
    keys: list[SamplingKey] = []
    for key, kind, names in _KEYS:
        # dict.get(first, dict.get(second)): the first name present decides, even as null
        value = next((config[name] for name in names if name in config), None)
        if value is not None:
            keys.append(SamplingKey(key, kind, _checked(kind, value)))
    return tuple(keys)
