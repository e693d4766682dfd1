"""Hostile tool schemas, shared by the unit and the HTTP tests."""

from __future__ import annotations

from typing import Any


def fan_out(width: int = 8, levels: int = 4) -> dict[str, Any]:
    """*width* properties, each a `$ref` to the next of *levels* levels of *width*.

    Inlined, that is width**(levels+1) leaf strings (32,768 for the issue's 8 and 4).
    The descriptions bring it to the issue's size (about 1.9 KB of JSON).
    """
    defs: dict[str, Any] = {}
    for level in range(1, levels + 1):
        last = level == levels
        item: dict[str, Any] = {"type": "string"} if last else {"$ref": f"#/$defs/l{level + 1}"}
        defs[f"l{level}"] = {
            "type": "object",
            "description": f"level {level}",
            "properties": {f"field{i}": dict(item) for i in range(width)},
        }
    return {
        "type": "object",
        "description": "fan-out: each property refers to the next level",
        "properties": {f"field{i}": {"$ref": "#/$defs/l1"} for i in range(width)},
        "$defs": defs,
    }


def fan_out_instance(width: int = 8, levels: int = 4) -> dict[str, Any]:
    """A value valid for `fan_out`: one full path down to a leaf string."""
    value: Any = "leaf"
    for _ in range(levels + 1):
        value = {f"field{width - 1}": value}
    return dict(value)


def nested(depth: int) -> dict[str, Any]:
    """An object schema nested *depth* levels deep (the tests use 100 and more)."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def integer_props(count: int) -> dict[str, Any]:
    """*count* integers with distinct 15-digit bounds: few JSON nodes, many grammar units."""
    return {
        "type": "object",
        "properties": {
            f"p{i}": {"type": "integer", "minimum": -123456789012345 + i, "maximum": 10**15 - 7}
            for i in range(count)
        },
    }


def string_props(count: int) -> dict[str, Any]:
    """*count* optional string properties: a legitimate schema whose compile takes time."""
    return {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(count)}}


def many_nodes(count: int) -> dict[str, Any]:
    """An object schema with about *count* JSON values (slow to parse, refused by size)."""
    return {"type": "object", "x-bulk": [{"a": {}} for _ in range(count // 3)]}


def tool(parameters: dict[str, Any], name: str = "t") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}
