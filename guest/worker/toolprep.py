"""A request's tools made ready for generation: checked, validated, compiled, bounded.

Why a step of its own, run on a worker thread and never on the event loop: a tool
schema is attacker-sized work. A 1.4 KB schema (8 properties, each a `$ref` to the
next of 4 levels of 8) blocks an event loop for 43-56 s when its grammar is compiled
there, twice, with every `$ref` expanded; and
`jsonschema`'s `check_schema` costs about 10 us per byte of schema (measured 1 s for
100 KB, 132 s for 8 MB), so the body limit alone bounds nothing useful. Here every
cost has a bound checked before it is paid:

1. nesting (`max_nesting` levels of JSON per tool, walked without recursion, so a
   100-deep schema is refused before `check_schema` recurses into it);
2. size (`max_nodes` JSON values over every tool's `parameters`, which bounds
   `check_schema`);
3. expanded size (`CompileBudget.max_units` for the grammar, `$ref`s memoized, and
   `max_grammar_bytes` of rendered grammar);
4. time (`seconds` from the start of this step, checked between steps and inside the
   compiler); the llguidance build after it drops the GIL and has its own limits.

Each refusal is `ToolsRefused` with a closed code. The result is cached by the digest
of everything it depends on, so an agent that sends the same tools every turn pays
once.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

from jsonschema.protocols import Validator

from guest.worker.constraint import ConstraintFactory, ConstraintUnavailable
from guest.worker.grammar import Grammar
from guest.worker.schema_grammar import (
    CompileBudget,
    Limits,
    SchemaTooComplex,
    UnsupportedSchema,
)
from guest.worker.toolcall import SchemaInvalid, schema_validator
from guest.worker.toolgrammar import Mode, ToolSpec, build_tool_grammars
from receipts.canonical import canonical

RefusalCode = Literal[
    "unsupported_tool_schema", "tool_schema_too_complex", "constraint_unavailable"
]


class ToolsRefused(Exception):
    """The tools cannot be used: a closed code and the parameter that caused it."""

    def __init__(self, code: RefusalCode, param: str | None) -> None:
        super().__init__(code)
        self.code: RefusalCode = code
        self.param = param


@dataclass(frozen=True)
class ToolLimits:
    """The bounds of the step (module docstring); docs/worker-limits.md lists them."""

    max_nesting: int = 64
    max_nodes: int = 2048
    max_units: int = CompileBudget.max_units
    max_grammar_bytes: int = 1 << 20
    """The rendered grammar the backend compiles (long `enum` strings are the only way
    past the unit count to a large one; it also bounds the matcher cache's keys)."""
    seconds: float = 1.0


@dataclass(frozen=True)
class PreparedTools:
    grammars: tuple[Grammar, Grammar] | None
    """(llguidance form, GBNF form) over the selected tools; None for no tools."""
    validators: dict[str, Validator]


def schema_shape(value: Any, max_nesting: int, budget: int) -> int:
    """The number of JSON values in *value*; `SchemaTooComplex` past either bound.

    Iterative on purpose: this runs before anything recursive sees the schema.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    count = 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if depth > max_nesting:
            raise SchemaTooComplex("nesting")
        if count > budget:
            raise SchemaTooComplex("size")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return count


@dataclass(frozen=True)
class ToolRequest:
    """What the step needs from a request: every tool, and which ones may be called."""

    tools: tuple[ToolSpec, ...]
    selected: frozenset[str]
    mode: Mode


class ToolPreparer:
    """Prepares tools under `ToolLimits`, caching results; safe to call from threads."""

    CACHE_SIZE: Final = 4
    """Prepared tool lists kept (their grammars, up to 1 MiB rendered each)."""

    def __init__(
        self,
        factory: ConstraintFactory,
        limits: Limits,
        tool_limits: ToolLimits,
        special_tags: bool,
    ) -> None:
        self.factory = factory
        self.limits = limits
        self.tool_limits = tool_limits
        self.special_tags = special_tags
        self._cache: OrderedDict[str, PreparedTools] = OrderedDict()
        self._lock = threading.Lock()

    def _key(self, request: ToolRequest) -> str:
        document = {
            "tools": [[t.name, t.parameters] for t in request.tools],
            "selected": sorted(request.selected),
            "mode": request.mode,
            "special_tags": self.special_tags,
            "limits": asdict(self.limits),
            "backend": self.factory.backend,
        }
        return hashlib.sha256(canonical(document)).hexdigest()

    def prepare(self, request: ToolRequest) -> PreparedTools:
        """Validators for the selected tools and their grammars, or `ToolsRefused`."""
        if not request.tools:
            return PreparedTools(None, {})
        deadline = time.monotonic() + self.tool_limits.seconds
        remaining = self.tool_limits.max_nodes
        for i, tool in enumerate(request.tools):
            try:
                remaining -= schema_shape(tool.parameters, self.tool_limits.max_nesting, remaining)
            except SchemaTooComplex as exc:
                raise ToolsRefused("tool_schema_too_complex", _param(i)) from exc
        key = self._key(request)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        prepared = self._prepare(request, deadline)
        with self._lock:
            self._cache[key] = prepared
            while len(self._cache) > self.CACHE_SIZE:
                self._cache.popitem(last=False)
        return prepared

    def _prepare(self, request: ToolRequest, deadline: float) -> PreparedTools:
        validators: dict[str, Validator] = {}
        specs: list[ToolSpec] = []
        for i, tool in enumerate(request.tools):
            try:
                validator = schema_validator(tool.parameters)
            except SchemaInvalid as exc:
                raise ToolsRefused("unsupported_tool_schema", _param(i)) from exc
            if time.monotonic() > deadline:
                raise ToolsRefused("tool_schema_too_complex", _param(i))
            if tool.name in request.selected:
                validators[tool.name] = validator
                specs.append(tool)
        budget = CompileBudget(self.tool_limits.max_units, deadline)
        try:
            grammars = build_tool_grammars(
                specs, request.mode, self.limits, special_tags=self.special_tags, budget=budget
            )
        except UnsupportedSchema as exc:
            param = f"tools.parameters.{exc.keyword}"
            raise ToolsRefused("unsupported_tool_schema", param) from exc
        except SchemaTooComplex as exc:
            raise ToolsRefused("tool_schema_too_complex", "tools") from exc
        if time.monotonic() > deadline:
            raise ToolsRefused("tool_schema_too_complex", "tools")
        if self.factory.backend == "llguidance":
            rendered = grammars[0].to_lark()
        else:
            rendered = grammars[1].to_gbnf()
        if len(rendered.encode("utf-8")) > self.tool_limits.max_grammar_bytes:
            raise ToolsRefused("tool_schema_too_complex", "tools")
        try:
            self.factory.prepare(*grammars)
        except ConstraintUnavailable as exc:
            raise ToolsRefused("constraint_unavailable", None) from exc
        return PreparedTools(grammars, validators)


def _param(index: int) -> str:
    return f"tools.{index}.function.parameters"
