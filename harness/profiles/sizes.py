"""Byte sizes as people write them in a profile ("12 GiB") and as the code uses them (ints).

Only binary units, with the unit spelled out: "12G" is ambiguous between GB and GiB, and
budgets that are off by 7% are budgets nobody agreed to.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, Field

_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_SIZE = re.compile(r"^\s*([0-9]+)\s*(B|KiB|MiB|GiB|TiB)\s*$")


def parse_size(value: object) -> object:
    """Turn "12 GiB" into 12884901888; pass integers through; leave the rest to pydantic."""
    if isinstance(value, str):
        match = _SIZE.fullmatch(value)
        if match is None:
            raise ValueError(
                'expected a size like "512 MiB" or "12 GiB", or a whole number of bytes'
            )
        return int(match.group(1)) * _UNITS[match.group(2)]
    return value


def format_size(size: int) -> str:
    for unit in ("TiB", "GiB", "MiB", "KiB"):
        if size >= _UNITS[unit] and size % _UNITS[unit] == 0:
            return f"{size // _UNITS[unit]} {unit}"
    return f"{size:,} B"


ByteSize = Annotated[int, BeforeValidator(parse_size), Field(ge=0, le=1 << 44)]
"""A size in bytes, written as an integer or as "N KiB|MiB|GiB|TiB"."""
