"""The generic tool format: how the worker shows tools to a model whose template cannot.

Why: a chat template that ignores `tools` (SmolLM2's renders only `role` and `content`)
would leave the model blind to the tools the output grammar lets it call; the agent's
whole request would reach the model as if it had none. llama.cpp's server meets the same
problem with a "generic" format (a system message listing the tools as JSON, tool calls
and results written as JSON text). This is our own version of that idea, in the syntax
our output constraint enforces (`qwen_tagged_tool_json_v1`, toolgrammar.py), so what
the model is told and what it may write are the same thing. docs/worker.md describes it.

The messages are rewritten, then rendered by the model's own template as plain
system / user / assistant turns:
- the tool list goes at the end of the first system message (one is added first when
  the conversation has none), one JSON object per line, then the call syntax;
- an assistant turn's `tool_calls` become its text: each call as
  `<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`, after any content;
- a `tool` turn becomes a user turn `<tool_response>\\n...\\n</tool_response>`.
"""

from __future__ import annotations

import json
from typing import Any, Final

from guest.worker.toolgrammar import CALL_CLOSE, CALL_OPEN

RESULT_OPEN: Final = "<tool_response>"
RESULT_CLOSE: Final = "</tool_response>"

INTRO: Final = (
    "# Tools\n\n"
    "You can call the tools listed below, one JSON object per line: the tool's name, "
    "what it does, and the JSON Schema of its arguments."
)
SYNTAX: Final = (
    "To call a tool, answer with only this (one call, arguments valid for its schema):\n"
    f'{CALL_OPEN}\n{{"name": "<tool name>", "arguments": {{<arguments>}}}}\n{CALL_CLOSE}\n'
    f"A tool's result comes back in a user message between {RESULT_OPEN} and "
    f"{RESULT_CLOSE}. To answer without a tool, write plain text."
)


def tool_listing(tools: list[dict[str, Any]]) -> str:
    """The system-message section: intro, one line per tool, the call syntax."""
    lines = []
    for tool in tools:
        function = tool.get("function", {})
        entry: dict[str, Any] = {"name": function.get("name")}
        if function.get("description"):
            entry["description"] = function["description"]
        entry["parameters"] = function.get("parameters", {"type": "object"})
        lines.append(json.dumps(entry, ensure_ascii=False))
    return INTRO + "\n" + "\n".join(lines) + "\n\n" + SYNTAX


def call_text(name: str, arguments: str) -> str:
    """One call as the grammar spells it. `arguments` is the JSON text the client sent
    back (what this worker returned); it is shown as sent, never re-encoded."""
    head = json.dumps(name, ensure_ascii=False)
    return f'{CALL_OPEN}\n{{"name": {head}, "arguments": {arguments}}}\n{CALL_CLOSE}'


def rewrite(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """*messages* with tools, calls and results as plain turns (module docstring)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "tool":
            body = f"{RESULT_OPEN}\n{message.get('content') or ''}\n{RESULT_CLOSE}"
            out.append({"role": "user", "content": body})
        elif role == "assistant" and message.get("tool_calls"):
            parts = [message["content"]] if message.get("content") else []
            for call in message["tool_calls"]:
                function = call["function"]
                parts.append(call_text(function["name"], function["arguments"]))
            out.append({"role": "assistant", "content": "\n".join(parts)})
        else:
            out.append(dict(message))
    if tools:
        listing = tool_listing(tools)
        if out and out[0]["role"] == "system":
            head = out[0].get("content") or ""
            out[0] = {**out[0], "content": f"{head}\n\n{listing}" if head else listing}
        else:
            out.insert(0, {"role": "system", "content": listing})
    return out
