"""Tools reach the model whatever its template: the worker's generic format.

SmolLM2's template renders `role` and `content` only: before, a prompt had the same
tokens with 0 tools and with 10, so the model never saw a tool. The renderer finds that
out by rendering probes with and without tools, and writes tools, calls and results
itself (docs/worker.md); the request record says which way they went.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from guest.worker import generic_tools
from guest.worker.prompt import PromptRenderer
from host.model.synth import CHAT_TEMPLATE
from tests.guest.worker.conftest import (
    MODEL_ID,
    SMOLLM2_TEMPLATE,
    TOOLS,
    Gguf,
    Worker,
    start_worker,
)

USER = {"role": "user", "content": "Read src/app.py"}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "read", "arguments": '{"filePath": "src/app.py"}'},
}
HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a coding agent."},
    USER,
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')"},
]


def test_a_tool_blind_template_is_found_out_and_a_tool_rendering_one_is_trusted() -> None:
    assert PromptRenderer(SMOLLM2_TEMPLATE).renders_tools is False
    assert PromptRenderer(CHAT_TEMPLATE).renders_tools is True


def test_probes_need_all_three_a_template_that_lists_tools_but_drops_calls_is_generic() -> None:
    lists_only = CHAT_TEMPLATE.replace("{%- if message.tool_calls %}", "{%- if false %}")
    assert lists_only != CHAT_TEMPLATE
    assert PromptRenderer(lists_only).renders_tools is False


def test_the_generic_format_lists_every_tool_and_the_enforced_call_syntax() -> None:
    prompt, how = PromptRenderer(SMOLLM2_TEMPLATE).render([USER], TOOLS)
    assert how == "generic"
    bare, how_bare = PromptRenderer(SMOLLM2_TEMPLATE).render([USER], None)
    assert how_bare == "none"
    assert bare.count("<|im_start|>") == 3  # SmolLM2's own default system turn stays
    system = prompt.split("<|im_end|>")[0]
    for tool in TOOLS:
        line = next(
            x for x in system.splitlines() if x.startswith('{"name": "' + tool["function"]["name"])
        )
        entry = json.loads(line)
        assert entry["parameters"] == tool["function"]["parameters"]
    assert (
        '<tool_call>\n{"name": "<tool name>", "arguments": {<arguments>}}\n</tool_call>' in system
    )
    assert "SmolLM" not in prompt  # the tool list's system turn replaces the default one


def test_history_calls_and_results_are_rendered_in_the_call_syntax() -> None:
    prompt, how = PromptRenderer(SMOLLM2_TEMPLATE).render(HISTORY, TOOLS)
    assert how == "generic"
    assert prompt.startswith("<|im_start|>system\nYou are a coding agent.\n\n# Tools\n")
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "read", "arguments": '
        '{"filePath": "src/app.py"}}\n</tool_call><|im_end|>'
    ) in prompt
    assert "<|im_start|>user\n<tool_response>\nprint('hi')\n</tool_response><|im_end|>" in prompt
    assert "<|im_start|>tool" not in prompt
    # history with tool turns but no tools in this request: still generic, no listing
    no_tools, how = PromptRenderer(SMOLLM2_TEMPLATE).render(HISTORY, None)
    assert how == "generic"
    assert "# Tools" not in no_tools
    assert "<tool_response>" in no_tools


def test_a_template_that_renders_tools_gets_them_unchanged() -> None:
    prompt, how = PromptRenderer(CHAT_TEMPLATE).render(HISTORY, TOOLS)
    assert how == "template"
    assert "<tools>" in prompt
    assert generic_tools.INTRO not in prompt


def test_content_null_with_tool_calls_renders_with_either_template() -> None:
    """The SDK echoes `content: null` back; a template that adds content to a string
    unconditionally (here the tiny template made to) must get empty text, not None."""
    guard = (
        "{%- if message.content %}\n            {{- '\\n' + message.content }}\n"
        "        {%- endif %}"
    )
    concatenating = CHAT_TEMPLATE.replace(guard, "{{- '\\n' + message.content }}")
    assert concatenating != CHAT_TEMPLATE
    assert PromptRenderer(concatenating).renders_tools is True
    for template in (SMOLLM2_TEMPLATE, CHAT_TEMPLATE, concatenating):
        prompt, _how = PromptRenderer(template).render(HISTORY, TOOLS)
        assert "None" not in prompt


def _chat(worker: Worker, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    body = {"model": MODEL_ID, "messages": messages, "max_tokens": 4, "seed": 1, **extra}
    with worker.client() as c:
        response = c.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_the_worker_renders_tools_for_a_tool_blind_template_and_records_it(
    plain_gguf: Gguf, tiny_gguf: Gguf, tmp_path: Path
) -> None:
    plain = start_worker(plain_gguf, tmp_path / "plain")
    tiny = start_worker(tiny_gguf, tmp_path / "tiny")
    try:
        counts: dict[str, list[int]] = {}
        for name, worker in (("plain", plain), ("tiny", tiny)):
            bare = _chat(worker, [USER])
            listed = _chat(worker, [USER], tools=TOOLS)
            history = _chat(worker, HISTORY, tools=TOOLS)  # content: null echoed back
            counts[name] = [r["usage"]["prompt_tokens"] for r in (bare, listed, history)]
        plain_records = [r["tools_rendering"] for r in plain.records()]
        tiny_records = [r["tools_rendering"] for r in tiny.records()]
    finally:
        plain.stop()
        tiny.stop()
    assert plain_records == ["none", "generic", "generic"]
    assert tiny_records == ["none", "template", "template"]
    # the tools are in the prompt: hundreds of tokens more, not the same count
    assert counts["plain"][1] > counts["plain"][0] + 200, counts
    assert counts["plain"][2] > counts["plain"][1], counts


def test_a_request_rejected_before_rendering_records_not_rendered(
    worker_factory: Callable[..., Worker],
) -> None:
    worker = worker_factory()
    with worker.client() as c:
        response = c.post("/v1/chat/completions", json={"model": "other", "messages": [USER]})
    assert response.status_code == 404
    assert worker.records()[0]["tools_rendering"] == "not_rendered"


@pytest.mark.parametrize("where", ["system", "none"])
def test_the_listing_joins_the_first_system_turn_or_becomes_one(where: str) -> None:
    messages = [{"role": "system", "content": "S"}, USER] if where == "system" else [USER]
    out = generic_tools.rewrite(messages, TOOLS)
    assert [m["role"] for m in out] == ["system", "user"]
    assert out[0]["content"].startswith("S\n\n# Tools" if where == "system" else "# Tools")
