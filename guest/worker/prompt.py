"""Render the prompt from the GGUF's own chat template, in a sandboxed Jinja environment.

Why not llama-cpp-python's chat handlers: `chatml-function-calling` decides tool use
unconstrained and silently falls back to a generic grammar (FIELD-NOTES); the model's
own template is what it was trained on. The template comes from a file we hashed, but
it is still code from a model repository: `ImmutableSandboxedEnvironment` refuses
attribute tricks and mutation of the values we pass in.

Whether the template shows the model its tools is found out, once per model, by
rendering probes with and without them (a probe tool, a probe call, a probe result):
a template that leaves any of the three out gets all three in the generic format
(generic_tools.py) instead. `render` says which way the tools went; the request
record keeps it (`tools_rendering`).
"""

from __future__ import annotations

import json
from typing import Any, Final

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from guest.worker import generic_tools
from receipts.records.worker import ToolsRendering

_PROBE_TOOL: Final = "probe_tool_7f3a"
_PROBE_CALL: Final = "probe_call_7f3a"
_PROBE_RESULT: Final = "probe_result_7f3a"


class TemplateError(ValueError):
    """The template failed to render these messages (it raised, or it is broken)."""


def _tojson(value: Any, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:  # fmt: skip
    # Hugging Face's `tojson`: no HTML escaping, non-ASCII kept.
    return json.dumps(
        value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _raise(message: str) -> None:
    raise TemplateError(message[:64])


class PromptRenderer:
    """Compiles the template once per model; renders per request."""

    def __init__(self, template: str) -> None:
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=["jinja2.ext.loopcontrols"],
            undefined=jinja2.Undefined,
        )
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise
        try:
            self._template = env.from_string(template)
        except jinja2.TemplateError as exc:
            raise TemplateError("template_syntax") from exc
        self.renders_tools = self._probe()

    def _probe(self) -> bool:
        """True when the template itself renders a tool list, an assistant's tool call and
        a tool result: each probe name appears in the output with it and not without."""
        tool = {
            "type": "function",
            "function": {"name": _PROBE_TOOL, "description": "d", "parameters": {"type": "object"}},
        }
        call = {
            "id": "call_0",
            "type": "function",
            "function": {"name": _PROBE_CALL, "arguments": "{}"},
        }
        user = {"role": "user", "content": "u"}
        history: list[dict[str, Any]] = [
            user,
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_0", "content": _PROBE_RESULT},
        ]
        try:
            bare = self._render([user], None)
            listed = self._render([user], [tool])
            replayed = self._render(history, [tool])
        except TemplateError:
            return False
        return (
            _PROBE_TOOL in listed
            and _PROBE_TOOL not in bare
            and _PROBE_CALL in replayed
            and _PROBE_RESULT in replayed
        )

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> tuple[str, ToolsRendering]:
        """The prompt, and how tools reached it: `none` when the request has no tools and
        no tool turns, `template` when the template rendered them, `generic` when the
        worker did. An assistant turn's `content: null` is rendered as empty text."""
        messages = [{**m, "content": ""} if m.get("content") is None else m for m in messages]
        uses_tools = bool(tools) or any(
            m["role"] == "tool" or m.get("tool_calls") for m in messages
        )
        if not uses_tools:
            return self._render(messages, None), "none"
        if self.renders_tools:
            return self._render(messages, tools), "template"
        return self._render(generic_tools.rewrite(messages, tools), None), "generic"

    def _render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        try:
            return self._template.render(
                messages=messages,
                tools=tools or None,
                add_generation_prompt=True,
                bos_token="",
                eos_token="",
            )
        except TemplateError:
            raise
        except (jinja2.TemplateError, TypeError, ValueError, KeyError, IndexError) as exc:
            raise TemplateError("template_render") from exc
