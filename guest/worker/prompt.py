"""Render the prompt from the GGUF's own chat template, in a sandboxed Jinja environment.

Why not llama-cpp-python's chat handlers: `chatml-function-calling` decides tool use
unconstrained and silently falls back to a generic grammar (FIELD-NOTES); the model's
own template is what it was trained on. The template comes from a file we hashed, but
it is still code from a model repository: `ImmutableSandboxedEnvironment` refuses
attribute tricks and mutation of the values we pass in.
"""

from __future__ import annotations

import json
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


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

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
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
