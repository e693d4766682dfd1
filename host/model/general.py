"""``general.*`` keys llama.cpp derives from pinned files, written as it writes them.

``general.sampling.*`` come from ``generation_config.json``; ``general.license``,
``general.license.name``, ``general.license.link``, ``general.tags`` and
``general.languages`` from the YAML front matter of ``README.md`` (the model card).
The keys llama.cpp derives from the directory name are not written (see
docs/model-conversion.md, "Metadata").

Sampling:

Why: llama.cpp's ``convert_hf_to_gguf.py`` copies the checkpoint's recommended sampling
settings into the GGUF (``gguf-py/gguf/metadata.py``, ``Metadata.load``, lines 77-89 in
the llama-cpp-python 0.3.36 sdist; written by ``set_gguf_meta_model``, lines 609-632),
and llama.cpp's tools use them as defaults. The file is part of the snapshot, so it is
pinned like every other file and the keys are a function of pinned bytes: writing them
keeps the GGUF a function of its content key (docs/engineering.md §6).

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

import yaml  # type: ignore[import-untyped]  # PyYAML (a dependency of gguf) has no stubs

from host.model.categories import ConvertError
from host.model.vocab import load_json_object

GENERATION_CONFIG = "generation_config.json"
MODEL_CARD = "README.md"
Kind = Literal["int32", "float32", "string", "strings"]


@dataclass(frozen=True)
class GeneralKey:
    """One ``general.*`` key: GGUF name, value type and value."""

    key: str
    kind: Kind
    value: int | float | str | tuple[str, ...]


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


def sampling_keys(source: Path) -> tuple[GeneralKey, ...]:
    """The keys llama.cpp would write for *source* (none without the file)."""
    path = source / GENERATION_CONFIG
    if not path.exists():
        return ()
    try:
        config = load_json_object(path)
    except (OSError, ValueError, TypeError) as exc:
        raise ConvertError("config_unreadable", GENERATION_CONFIG) from exc
    keys: list[GeneralKey] = []
    for key, kind, names in _KEYS:
        # dict.get(first, dict.get(second)): the first name present decides, even as null
        value = next((config[name] for name in names if name in config), None)
        if value is not None:
            keys.append(GeneralKey(key, kind, _checked(kind, value)))
    return tuple(keys)


def front_matter(text: str) -> dict[str, Any]:
    """The model card's YAML front matter, read exactly as llama.cpp reads it.

    ``gguf-py/gguf/metadata.py`` ``Metadata.load_model_card`` (lines 157-199 in the
    llama-cpp-python 0.3.36 sdist): the first line must be ``---``; the lines up to the
    next ``---`` are YAML, after rewriting ``- no`` as ``- "no"`` and tabs as two
    spaces; ``yaml.safe_load``; anything but a mapping counts as no card. Malformed
    YAML is refused here (llama.cpp's converter stops with the parser's exception).
    """
    lines = text.splitlines()
    if not lines or lines[0] != "---":
        return {}
    body: list[str] = []
    for line in lines[1:]:
        if line == "---":
            break
        body.append(line)
    content = "\n".join(body) + "\n"
    content = content.replace("- no\n", '- "no"\n').replace("\t", "  ")
    try:
        data = yaml.safe_load(content)
    except yaml.YAMLError as exc:
        raise ConvertError("config_unreadable", MODEL_CARD) from exc
    return data if isinstance(data, dict) else {}


def _strings(value: Any) -> tuple[str, ...]:
    """A string or a list of strings; anything else would make gguf's writer fail."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise ConvertError("unsupported_config", MODEL_CARD)
    return tuple(items)


def model_card_keys(source: Path) -> tuple[GeneralKey, ...]:
    """``general.license``, ``.license.name``, ``.license.link``, ``.tags``, ``.languages``.

    As ``apply_metadata_heuristic`` (metadata.py lines 551-560) and
    ``set_gguf_meta_model`` (lines 656-664, 728-731) do: ``license`` (a list is joined
    with ``,``), ``license_name``, ``license_link`` as strings; ``tags`` then
    ``pipeline_tag`` appended into one array; ``languages`` then ``language``. Other
    card fields llama.cpp reads (name, author, base_model, datasets, ...) are not
    written: see docs/model-conversion.md.
    """
    path = source / MODEL_CARD
    if not path.exists():
        return ()
    try:
        card = front_matter(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConvertError("config_unreadable", MODEL_CARD) from exc
    keys: list[GeneralKey] = []
    for key, field in (
        ("general.license", "license"),
        ("general.license.name", "license_name"),
        ("general.license.link", "license_link"),
    ):
        value = card.get(field)
        if value is not None:
            text = ",".join(_strings(value)) if isinstance(value, list) else _strings(value)[0]
            keys.append(GeneralKey(key, "string", text))
    for key, fields in (
        ("general.tags", ("tags", "pipeline_tag")),
        ("general.languages", ("languages", "language")),
    ):
        values = tuple(v for f in fields if card.get(f) is not None for v in _strings(card[f]))
        if values:  # gguf's add_array writes nothing for an empty list
            keys.append(GeneralKey(key, "strings", values))
    return tuple(keys)
