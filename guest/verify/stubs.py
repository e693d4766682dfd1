"""What the task's original workspace (the stub, the host's copy) tells the judge.

The stub is the task's, not the agent's: the verifier copies it from the task on the
verification guest's read-only disk into the judge's own directory, and the judge runs it
(its classes, executed in the judge's process, never importing the agent's workspace).
From it the judge learns:

- which top-level module names the solution may serve it (its import hook serves no
  other: a name the standard library probes, `msvcrt` or `org.python.core`, is never
  asked of the solution's process);
- which classes the task declares, and, method by method, which the stub implements
  (their bodies run in the judge over values the solution's objects hold) and which it
  leaves to the solution (they run in the solution's process);
- which classes are values the tests build themselves: a class whose stub implements both
  `__init__` and `__eq__` is built by the judge when a test calls it, so the expected
  value a test constructs never passes through the solution's code.

A method "left to the solution" is one whose body is only a docstring, `pass`, `...`, or
`raise NotImplementedError(...)`.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from pathlib import Path

from guest.verify.wire import MAX_STUB_BYTES

JUDGED = frozenset(
    {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__bool__"}
)
"""Operators whose answer is a decision: never run by the solution's process."""


@dataclass(frozen=True)
class ClassSpec:
    """One class the stub declares at the top level of `module` (never an exception)."""

    module: str
    name: str
    stub: type
    """The stub's class, as the judge executed it."""
    implemented: frozenset[str]
    """Methods the stub's own bodies implement: they run in the judge."""
    left: frozenset[str]
    """Methods the stub declares and leaves to the solution."""
    on_class: frozenset[str] = field(default=frozenset())
    """Of `left`: static and class methods (called on the class, not an instance)."""

    @property
    def is_value(self) -> bool:
        """The tests build it: the stub implements its constructor and its equality."""
        return {"__init__", "__eq__"} <= self.implemented


@dataclass(frozen=True)
class Stubs:
    modules: frozenset[str]
    """Top-level module names of the original workspace: all the import hook may serve."""
    classes: dict[tuple[str, str], ClassSpec]

    def spec(self, module: str, name: str) -> ClassSpec | None:
        return self.classes.get((module, name))


NO_STUBS = Stubs(frozenset(), {})


def _left_to_solution(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = list(function.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if not body:
        return True
    if len(body) != 1:
        return False
    only = body[0]
    if isinstance(only, ast.Pass):
        return True
    if isinstance(only, ast.Expr) and isinstance(only.value, ast.Constant):
        return only.value.value is Ellipsis
    if isinstance(only, ast.Raise) and only.exc is not None:
        raised = only.exc.func if isinstance(only.exc, ast.Call) else only.exc
        return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"
    return False


def _on_class(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    names = {d.id for d in function.decorator_list if isinstance(d, ast.Name)}
    return bool(names & {"staticmethod", "classmethod"})


def module_names(root: Path) -> frozenset[str]:
    """Top-level importable names in `root`: `NAME.py` files and `NAME/__init__.py`."""
    names = set()
    for entry in root.iterdir() if root.is_dir() else ():
        if entry.suffix == ".py" and entry.is_file() and entry.stem.isidentifier():
            names.add(entry.stem)
        elif entry.is_dir() and entry.name.isidentifier() and (entry / "__init__.py").is_file():
            names.add(entry.name)
    return frozenset(names)


def _execute(path: Path, module: str) -> dict[str, object] | None:
    """The stub module's namespace, run in the judge; None when it cannot run alone (it
    imports a sibling of the workspace, or fails): then the judge knows none of its
    classes, and their objects get the judge's default rules."""
    try:
        source = path.read_bytes()
        if len(source) > MAX_STUB_BYTES:
            return None
        code = compile(source, str(path), "exec", dont_inherit=True)
        namespace: dict[str, object] = {"__name__": module, "__builtins__": builtins}
        exec(code, namespace)
    except Exception:  # noqa: BLE001 (a stub that cannot run alone: no stub knowledge)
        return None
    return namespace


def _specs(path: Path, module: str) -> list[ClassSpec]:
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return []
    namespace = _execute(path, module)
    if namespace is None:
        return []
    specs = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        stub = namespace.get(node.name)
        if not isinstance(stub, type) or issubclass(stub, BaseException):
            continue  # an exception class is not a class of values
        if type(stub) is not type:
            continue  # a metaclass of its own (an Enum, an ABC): default rules
        methods = [m for m in node.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)]
        left = frozenset(m.name for m in methods if _left_to_solution(m))
        specs.append(
            ClassSpec(
                module=module,
                name=node.name,
                stub=stub,
                implemented=frozenset(m.name for m in methods) - left,
                left=left,
                on_class=frozenset(m.name for m in methods if m.name in left and _on_class(m)),
            )
        )
    return specs


def read_stubs(root: Path) -> Stubs:
    """The stub's modules and declared classes (top-level modules of `root` only)."""
    names = module_names(root)
    classes: dict[tuple[str, str], ClassSpec] = {}
    for name in sorted(names):
        path = root / f"{name}.py"
        if not path.is_file():
            path = root / name / "__init__.py"
        for spec in _specs(path, name):
            classes[(spec.module, spec.name)] = spec
    return Stubs(names, classes)
