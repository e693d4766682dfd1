"""The schema compile bounds, on the compiler itself: memoized `$ref`s, the depth a
memoized target adds, the unit budget, the deadline, one compile for both grammars,
and the iterative shape check that runs before anything recursive."""

from __future__ import annotations

import json
import time
from typing import Any

import jsonschema
import pytest

from guest.worker.grammar import Grammar
from guest.worker.schema_grammar import (
    MAX_DEPTH,
    CompileBudget,
    Limits,
    SchemaCompiler,
    SchemaTooComplex,
)
from guest.worker.toolgrammar import ToolSpec, build_tool_grammars
from guest.worker.toolprep import schema_shape
from tests.guest.worker.hostile_schemas import (
    fan_out,
    fan_out_instance,
    integer_props,
    nested,
    string_props,
)
from tests.guest.worker.irmatch import matches


def _call(args: dict[str, Any]) -> str:
    body = json.dumps({"name": "t", "arguments": args}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def test_fan_out_refs_compile_once_each_and_keep_the_language() -> None:
    schema = fan_out()
    _, plain = build_tool_grammars(
        [ToolSpec("t", schema)], "required", Limits(), special_tags=False
    )
    # 5 objects of 8 members (member, head, tail rules each) and 4 `$ref` targets:
    # inlined, it was 112,348 rules.
    assert len(plain.rules) < 200
    instance = fan_out_instance()
    jsonschema.validate(instance, schema)
    assert matches(plain, _call(instance))
    assert matches(plain, _call({"field0": {"field3": {}}}))
    assert not matches(plain, _call({"field0": {"field3": {"field1": 5}}}))
    assert not matches(plain, _call({"field0": {"nope": {}}}))


def test_a_memoized_target_still_counts_its_depth_where_it_is_used() -> None:
    # `deep` is MAX_DEPTH - 3 levels tall. Used at the top it fits; the second use sits
    # 5 levels down, where it would exceed MAX_DEPTH: refused though it is memoized.
    deep = nested(MAX_DEPTH - 3)
    root: dict[str, Any] = {"$defs": {"deep": deep}}
    ok = {"type": "object", "properties": {"a": {"$ref": "#/$defs/deep"}}}
    SchemaCompiler(Limits()).compile(ok, root)
    far: dict[str, Any] = {"$ref": "#/$defs/deep"}
    for _ in range(2):
        far = {"type": "object", "properties": {"b": far}}
    both = {"type": "object", "properties": {"a": {"$ref": "#/$defs/deep"}, "z": far}}
    with pytest.raises(SchemaTooComplex) as info:
        SchemaCompiler(Limits()).compile(both, root)
    assert info.value.reason == "depth"


def test_repeated_inline_subschemas_exhaust_the_unit_budget() -> None:
    inner: dict[str, Any] = {"type": "string"}
    for _ in range(4):
        inner = {"anyOf": [inner] * 8}
    compiler = SchemaCompiler(Limits(), CompileBudget(max_units=2048))
    with pytest.raises(SchemaTooComplex) as info:
        compiler.compile({"type": "object", "properties": {"a": inner}}, {})
    assert info.value.reason == "size"
    assert compiler.units == 2049


def test_integer_bounds_cost_a_unit_per_digit() -> None:
    compiler = SchemaCompiler(Limits(), CompileBudget(max_units=2048))
    compiler.compile(integer_props(50), {})
    assert compiler.units > 50 * 30
    with pytest.raises(SchemaTooComplex):
        SchemaCompiler(Limits(), CompileBudget(max_units=2048)).compile(integer_props(70), {})


def test_the_deadline_stops_a_compile() -> None:
    past = CompileBudget(max_units=10**6, deadline=time.monotonic() - 1)
    with pytest.raises(SchemaTooComplex) as info:
        SchemaCompiler(Limits(), past).compile(string_props(100), {})
    assert info.value.reason == "time"
    future = CompileBudget(max_units=10**6, deadline=time.monotonic() + 60)
    SchemaCompiler(Limits(), future).compile(string_props(100), {})


def test_both_grammar_forms_come_from_one_compile() -> None:
    special, plain = build_tool_grammars(
        [ToolSpec("t", string_props(3))], "auto", Limits(), special_tags=True
    )
    assert special is not plain
    shared = [name for name, _ in plain.rules if name not in ("call", "text", "start")]
    assert shared
    special_rules, plain_rules = dict(special.rules), dict(plain.rules)
    for name in shared:
        assert special_rules[name] is plain_rules[name], name
    assert special_rules["call"] != plain_rules["call"]


def test_renderings_are_made_once() -> None:
    _, plain = build_tool_grammars(
        [ToolSpec("t", string_props(3))], "auto", Limits(), special_tags=False
    )
    assert plain.to_lark() is plain.to_lark()
    assert plain.to_gbnf() is plain.to_gbnf()
    assert Grammar(plain.rules) == plain  # the cache is not part of equality


def test_shape_check_is_iterative_and_bounded() -> None:
    assert schema_shape({"a": [1, {"b": None}]}, 8, 100) == 5
    with pytest.raises(SchemaTooComplex) as info:
        schema_shape(nested(5000), 64, 10**6)  # far past the recursion limit
    assert info.value.reason == "nesting"
    with pytest.raises(SchemaTooComplex) as info:
        schema_shape(string_props(1100), 64, 2048)
    assert info.value.reason == "size"
    schema_shape(nested(31), 64, 10**6)
