"""Registry: the OpenAI tools list, and dispatch's closed refusals that never echo input."""

from __future__ import annotations

import json
import time
import typing
from pathlib import Path

import pytest

from guest.tools.categories import ToolName
from guest.tools.registry import ToolSet, _finish
from guest.tools.result import MESSAGES, ToolOutput, all_outcomes
from tests.guest.tools.support import call

EXPECTED_PARAMS = {
    "read": ({"filePath", "offset", "limit"}, {"filePath"}),
    "edit": (
        {"filePath", "oldString", "newString", "replaceAll"},
        {"filePath", "oldString", "newString"},
    ),
    "write": ({"filePath", "content"}, {"filePath", "content"}),
    "list": ({"path"}, set()),
    "glob": ({"pattern", "path"}, {"pattern"}),
    "grep": ({"pattern", "path", "include"}, {"pattern"}),
    "run_tests": (set(), set()),
    "finish": (set(), set()),
}


def test_openai_tools_list(toolset: ToolSet) -> None:
    tools = toolset.openai_tools()
    names = [t["function"]["name"] for t in tools]
    assert names == list(typing.get_args(ToolName))
    for tool in tools:
        assert tool["type"] == "function"
        params = tool["function"]["parameters"]
        props, required = EXPECTED_PARAMS[tool["function"]["name"]]
        assert params["type"] == "object"
        assert params["additionalProperties"] is False
        assert set(params["properties"]) == props
        assert set(params.get("required", [])) == required
        for prop in params["properties"].values():
            assert "anyOf" not in prop
            assert "default" not in prop
            assert "title" not in prop
    json.dumps(tools, allow_nan=False)


SECRET_TEXT = "ZQX-UNIQUE-INPUT-7731"


@pytest.mark.parametrize(
    ("name", "arguments", "outcome"),
    [
        ("bash", '{"command": "ZQX-UNIQUE-INPUT-7731"}', "unknown_tool"),
        ("read", '{"filePath": "ZQX-UNIQUE-INPUT-7731"', "invalid_json"),
        ("read", '{"filePath": "a", "filePath": "ZQX-UNIQUE-INPUT-7731"}', "duplicate_key"),
        ("read", '{"filePath": "ZQX-UNIQUE-INPUT-7731", "offset": NaN}', "non_finite_number"),
        ("read", '["ZQX-UNIQUE-INPUT-7731"]', "not_an_object"),
        ("read", '{"filePath": "a", "ZQX-UNIQUE-INPUT-7731": 1}', "invalid_arguments"),
        ("read", '{"file_path": "ZQX-UNIQUE-INPUT-7731"}', "invalid_arguments"),
        ("read", '{"filePath": "a", "offset": "5"}', "invalid_arguments"),
        ("read", '{"filePath": "a", "offset": 1.0}', "invalid_arguments"),
        ("read", '{"filePath": "a", "offset": -1}', "invalid_arguments"),
        ("read", '{"filePath": "a", "limit": 0}', "invalid_arguments"),
        (
            "edit",
            '{"filePath": "a", "oldString": "x", "newString": "y", "replaceAll": "yes"}',
            "invalid_arguments",
        ),
        ("finish", '{"ZQX-UNIQUE-INPUT-7731": true}', "invalid_arguments"),
        ("read", '{"filePath": "/ZQX-UNIQUE-INPUT-7731"}', "absolute_path"),
    ],
)
def test_dispatch_refusals_do_not_echo_input(
    toolset: ToolSet, name: str, arguments: str, outcome: str
) -> None:
    result = toolset.dispatch(name, arguments)
    assert result.outcome == outcome
    assert SECRET_TEXT not in result.output
    assert result.output == MESSAGES[outcome]
    assert len(result.output) < 120
    assert SECRET_TEXT not in result.model_dump_json()
    if outcome == "unknown_tool":
        assert result.tool is None


def test_every_outcome_has_a_short_fixed_message() -> None:
    assert set(all_outcomes()) == set(MESSAGES)
    assert all(0 < len(m) < 120 for m in MESSAGES.values())


def test_output_never_in_a_dump(toolset: ToolSet, ws: Path) -> None:
    (ws / "a.txt").write_text("file-content-77\n")
    result = call(toolset, "read", filePath="a.txt")
    assert "file-content-77" in result.output
    assert "file-content-77" not in result.model_dump_json()
    assert "output" not in result.model_dump()


def test_result_shape(toolset: ToolSet, ws: Path) -> None:
    (ws / "a.txt").write_text("x\n")
    result = call(toolset, "read", filePath="a.txt")
    dumped = result.model_dump()
    assert dumped["tool"] == "read"
    assert dumped["outcome"] == "ok"
    assert dumped["bytes_out"] == len(result.output.encode())
    assert dumped["truncated"] is False
    assert dumped["duration_ms"] >= 0
    assert dumped["permission"]["decision"] == "allow"


def test_refusal_text_is_always_the_fixed_message() -> None:
    """Even a tool that put input into a refusal's text cannot pass it to the model."""
    leaky = ToolOutput(outcome="not_found", text="no such file: " + SECRET_TEXT)
    result = _finish("read", leaky, time.monotonic_ns(), None)
    assert result.output == MESSAGES["not_found"]
