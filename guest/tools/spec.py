"""OpenAI `tools` entries generated from the pydantic argument models.

The schema the model is shown and the validator the registry applies come from
the same class, so they cannot drift apart. Optional fields are shown as plain
optional properties (no `anyOf [..., null]`, no `default: null`) because that is
how OpenCode declares them and what small models were trained to emit.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def _clean(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop titles and collapse `anyOf [X, null]` on optional properties to X."""
    out: dict[str, Any] = {k: v for k, v in schema.items() if k != "title"}
    props: dict[str, Any] = {}
    required = set(schema.get("required", []))
    for name, original in schema.get("properties", {}).items():
        prop = {k: v for k, v in original.items() if k != "title"}
        any_of = prop.get("anyOf")
        if name not in required and isinstance(any_of, list):
            non_null = [s for s in any_of if s != {"type": "null"}]
            if len(non_null) == 1:
                merged = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
                merged.update(non_null[0])
                prop = merged
        if prop.get("default", 0) is None:
            del prop["default"]
        props[name] = prop
    out["properties"] = props
    return out


def openai_tool(name: str, description: str, args: type[BaseModel]) -> dict[str, Any]:
    """One entry of the OpenAI `tools` list for a tool with argument model `args`."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": _clean(args.model_json_schema()),
        },
    }
