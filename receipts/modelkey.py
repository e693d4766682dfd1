"""The model cache key, derived from what a model record states.

Why here and not only in host/model: the key names the cache entry a trial's GGUF came
from, and it is a digest of declared inputs (docs/engineering.md §6), so a reviewer can
recompute it from the receipt alone. The audit does (receipts/audit/consistency.py,
``model_cache_key``): a receipt whose key does not follow from its own pins, converter
and output type is refused. The host computes its keys with these same functions, so the
two can never drift apart.
"""

from __future__ import annotations

import hashlib
from typing import Any

from receipts.canonical import canonical


def _key(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(inputs)).hexdigest()


def converted_inputs(
    source_pins_sha256: str, converter_version: str, outtype: str
) -> dict[str, Any]:
    """The declared inputs that determine a converted GGUF's bytes."""
    return {
        "converter_version": converter_version,
        "outtype": outtype,
        "source_pins_sha256": source_pins_sha256,
    }


def converted_key(source_pins_sha256: str, converter_version: str, outtype: str) -> str:
    """The cache key of a GGUF converted from a pinned source."""
    return _key(converted_inputs(source_pins_sha256, converter_version, outtype))


def wheel_member_key(pins_sha256: str) -> str:
    """The cache key of a GGUF extracted from a pinned wheel (no conversion)."""
    return _key({"kind": "pypi_wheel_member", "pins": pins_sha256})
