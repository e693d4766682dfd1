"""Fast checks of the worker's parts without a server: grammar, schema subset, memory
readings (cgroup v1 and v2 trees faked in tmp), digest, load failures, call parsing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from guest.worker.digest import CHUNK_BYTES, verify_digest
from guest.worker.grammar import Grammar, Ref
from guest.worker.llamalog import classify_load_failure
from guest.worker.loader import LoadError, LoadOptions, load_model
from guest.worker.schema_grammar import Limits, SchemaCompiler, UnsupportedSchema, integer_range
from guest.worker.toolcall import InvalidModelOutput, parse_tool_call, schema_validator
from guest.worker.toolgrammar import ToolSpec, build_tool_grammar, text_units, text_without
from tests.guest.worker.conftest import EDIT_TOOL, Gguf
from tests.guest.worker.irmatch import matches, node_matches

# -- grammar ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lo", "hi"), [(0, 0), (7, 7), (-15, 123), (1, 100000), (-40, -3), (95, 1005)]
)
def test_integer_range_is_exact(lo: int, hi: int) -> None:
    node = integer_range(lo, hi)
    probes = set(range(lo - 30, lo + 30)) | set(range(hi - 30, hi + 30)) | {0, 9, 10, 99, 100}
    for n in probes:
        assert node_matches(node, str(n)) == (lo <= n <= hi), n
    for bad in ("-0", "007", "01", "+5", "", "1.0"):
        assert not node_matches(node, bad), bad


def test_text_never_contains_a_tool_call_tag() -> None:
    node = text_without("<tool_call>", 200)
    for ok in (
        "",
        "hello",
        "<",
        "<tool",
        "<tool_call",
        "a<<tool_cal>",
        "<t<to<tool_call x",
        "x</tool_call>",
    ):
        assert node_matches(node, ok), ok
    for bad in ("<tool_call>", "hi <tool_call> there", "<<tool_call>", "<tool_<tool_call>"):
        assert not node_matches(node, bad), bad


def test_every_repetition_is_bounded() -> None:
    spec = ToolSpec(EDIT_TOOL["function"]["name"], EDIT_TOOL["function"]["parameters"])
    grammar = build_tool_grammar([spec], "auto", Limits(), special_tags=False)
    assert "*" not in grammar.to_gbnf().replace('"*"', "")
    assert "+" not in grammar.to_gbnf().replace('"+"', "")
    assert "{0,}" not in grammar.to_gbnf()


def _call(name: str, args: dict[str, Any]) -> str:
    body = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def test_tool_grammar_admits_valid_calls_and_refuses_invalid_ones() -> None:
    params = EDIT_TOOL["function"]["parameters"]
    grammar = build_tool_grammar(
        [ToolSpec("edit", params)], "required", Limits(), special_tags=False
    )
    valid: list[dict[str, Any]] = [
        {"filePath": "a", "lines": [0]},
        {"filePath": "a.py", "mode": None, "lines": [-40, 7, 3], "replaceAll": True},
        {"filePath": "é", "lines": [1], "ratio": -0.5, "meta": {"tag": None}},
        {"filePath": 'x"y', "lines": [2], "meta": {"tag": "12345678"}},
    ]
    for args in valid:
        jsonschema.validate(args, params)
        assert matches(grammar, _call("edit", args)), args
    invalid: list[dict[str, Any]] = [
        {"lines": [0]},  # missing required
        {"filePath": "", "lines": [0]},  # minLength
        {"filePath": "a", "lines": []},  # minItems
        {"filePath": "a", "lines": [1, 2, 3, 4]},  # maxItems
        {"filePath": "a", "lines": [8]},  # maximum
        {"filePath": "a", "lines": [0], "mode": "other"},  # enum
        {"filePath": "a", "lines": [0], "meta": {"tag": "123456789"}},  # maxLength
        {"lines": [0], "filePath": "a"},  # declared order
        {"filePath": "a", "lines": [0], "extra": 1},  # undeclared property
    ]
    for args in invalid:
        assert not matches(grammar, _call("edit", args)), args
    assert not matches(grammar, "plain text")
    auto = build_tool_grammar([ToolSpec("edit", params)], "auto", Limits(), special_tags=False)
    assert matches(auto, "plain text")
    none = build_tool_grammar([ToolSpec("edit", params)], "none", Limits(), special_tags=False)
    assert not matches(none, _call("edit", valid[0]))


def test_string_cap_applies_when_schema_allows_more() -> None:
    params = {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}
    grammar = build_tool_grammar(
        [ToolSpec("t", params)], "required", Limits(max_string_chars=5), special_tags=False
    )
    assert matches(grammar, _call("t", {"s": "abcde"}))
    assert not matches(grammar, _call("t", {"s": "abcdef"}))


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "string", "pattern": "a"}, "pattern"),
        ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "uniqueItems"),
        ({"oneOf": [{"type": "string"}]}, "oneOf"),
        ({"type": "number", "minimum": 0}, "number.minimum"),
        ({"type": "integer", "multipleOf": 2}, "multipleOf"),
        ({"$ref": "#/$defs/A"}, "$ref"),
        (True, "boolean_schema"),
        ({"type": "array"}, "items"),
    ],
)
def test_schemas_outside_the_subset_are_refused(schema: Any, keyword: str) -> None:
    with pytest.raises(UnsupportedSchema) as info:
        SchemaCompiler(Limits()).compile(schema, {})
    assert info.value.keyword == keyword


def test_local_refs_resolve_and_recursion_is_refused() -> None:
    root = {"$defs": {"A": {"type": "boolean"}, "R": {"$ref": "#/$defs/R"}}}
    compiler = SchemaCompiler(Limits())
    node = compiler.compile({"$ref": "#/$defs/A"}, root)
    assert matches(Grammar((*compiler.rules, ("start", node))), "true")
    with pytest.raises(UnsupportedSchema):
        compiler.compile({"$ref": "#/$defs/R"}, root)


def test_renderings_name_the_start_rule() -> None:
    grammar = Grammar((("x", Ref("y")), ("y", Ref("x"))), start="x")
    assert grammar.to_gbnf().startswith("root ::= x\n")
    assert grammar.to_lark().startswith("start: x\n")


# -- tool call parsing ----------------------------------------------------------------


def test_parse_tool_call_validates_against_the_schema() -> None:
    validators = {"edit": schema_validator(EDIT_TOOL["function"]["parameters"])}
    call = parse_tool_call(_call("edit", {"filePath": "a", "lines": [1]}), validators)
    assert call.name == "edit"
    assert json.loads(call.arguments_json) == {"filePath": "a", "lines": [1]}
    for text, reason in [
        (_call("edit", {"filePath": "a", "lines": [99]}), "schema"),
        (_call("read", {}), "unknown_tool"),
        (
            '<tool_call>\n{"name": "edit", "name": "edit", "arguments": {}}\n</tool_call>',
            "json_invalid",
        ),
        (
            '<tool_call>\n{"name": "edit", "arguments": {"filePath": NaN}}\n</tool_call>',
            "json_invalid",
        ),
        ('<tool_call>\n{"name": "edit", "arguments": []}\n</tool_call>', "shape"),
        ('<tool_call>\n{"name": "edit"}\n</tool_call>', "shape"),
        ('{"name": "edit", "arguments": {}}', "not_tagged"),
    ]:
        with pytest.raises(InvalidModelOutput) as info:
            parse_tool_call(text, validators)
        assert info.value.reason == reason, text


def test_parse_tool_call_refuses_an_overflowing_float_as_json() -> None:
    """1e999 is not finite JSON: refused by the shared strict parser as `json_invalid`
    wherever it stands, not later as `schema` or `shape`."""
    validators = {"edit": schema_validator(EDIT_TOOL["function"]["parameters"])}
    for body in [
        '{"name": "edit", "arguments": {"filePath": 1e999}}',
        '{"name": "edit", "arguments": {"filePath": "a", "lines": [-1e999]}}',
        '{"name": "edit", "arguments": {"filePath": "a", "lines": [1]}, "x": 1e999}',
    ]:
        with pytest.raises(InvalidModelOutput) as info:
            parse_tool_call(f"<tool_call>\n{body}\n</tool_call>", validators)
        assert info.value.reason == "json_invalid", body


# -- digest and load ---------------------------------------------------------------------


def test_digest_match_mismatch_cancel_and_symlink(tmp_path: Path, tiny_gguf: Gguf) -> None:
    assert verify_digest(tiny_gguf.path, tiny_gguf.sha256) == "match"
    assert verify_digest(tiny_gguf.path, "0" * 64) == "mismatch"
    big = tmp_path / "big"
    big.write_bytes(b"\0" * (3 * CHUNK_BYTES))
    polls: list[int] = []

    def stop_after_two() -> bool:
        polls.append(1)
        return len(polls) > 2

    assert verify_digest(big, "0" * 64, stop_after_two) == "cancelled"
    assert len(polls) == 3
    link = tmp_path / "link"
    os.symlink(tiny_gguf.path, link)
    assert verify_digest(link, tiny_gguf.sha256) == "unreadable"
    assert verify_digest(tmp_path / "absent", tiny_gguf.sha256) == "unreadable"


def test_load_failures_are_closed_categories(tmp_path: Path, tiny_gguf: Gguf) -> None:
    with pytest.raises(LoadError) as info:
        load_model(tiny_gguf.path, "0" * 64, LoadOptions(256, 1))
    assert info.value.category == "model_digest_mismatch"
    broken = tmp_path / "broken.gguf"
    data = tiny_gguf.path.read_bytes()
    broken.write_bytes(data[: len(data) // 2])
    import hashlib

    with pytest.raises(LoadError) as info:
        load_model(broken, hashlib.sha256(broken.read_bytes()).hexdigest(), LoadOptions(256, 1))
    assert info.value.category in ("model_load_failed", "model_file_unreadable")


def test_load_failure_classifier() -> None:
    assert (
        classify_load_failure(["ggml: failed to allocate buffer of size 123"])
        == "model_load_out_of_memory"
    )
    assert classify_load_failure(["gguf_init: failed to open 'x'"]) == "model_file_unreadable"
    assert classify_load_failure(["something else"]) == "model_load_failed"


@pytest.mark.parametrize(
    ("text", "units"),
    [("", 0), ("abc", 3), ("<x", 1), ("a<t", 1), ("<to", 0), ("<tool<x", 1), ("<<a", 1),
     ("<tool_call<z", 1), ("x<tool_callz", 2), ("é<ü", 2)],
)  # fmt: skip
def test_text_units_count_as_the_text_grammar_counts(text: str, units: int) -> None:
    """A `<`-run of the call tag's prefixes is one unit with the character that ends it;
    a prefix left at the end is none (toolgrammar.text_without)."""
    assert text_units(text) == units
