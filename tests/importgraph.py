"""The import graph between our own modules, and the circles in it.

Every import statement counts, wherever it is written: at the top of a module, inside a
function (a late import only hides a circle from the interpreter, not from a reader) or
under `if TYPE_CHECKING:` (a circle a reader must still follow). An edge goes to the
module named, or to `X.Y` for `from X import Y` when `X.Y` is a module of ours, and to
each package above it that Python initialises first (importing `host.vm.process` runs
`host/vm/__init__.py`), except the importer's own packages, already being initialised.

Run it to see the figure: `python -m tests.importgraph` prints each circle (a strongly
connected set of two or more modules, or a module that imports itself) and their count.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "host", "guest", "receipts")
"""Our importable packages (pyproject's `packages.find`)."""

Graph = Mapping[str, frozenset[str]]


def module_name(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def our_modules(root: Path = REPO, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Every module of ours by dotted name."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            found[module_name(path, root)] = path
    return found


def _resolve(module: str, name: str, level: int, package: str) -> str:
    if level == 0:
        return module
    base = package.split(".")
    base = base[: len(base) - level + 1]
    return ".".join([*base, module] if module else base)


def imports_of(name: str, path: Path, known: Iterable[str]) -> frozenset[str]:
    """The modules of ours that module `name` (at `path`) imports, anywhere in its text."""
    modules = set(known)
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node.module or "", "", node.level, package)
            for alias in node.names:
                child = f"{target}.{alias.name}"
                if child in modules:
                    named.add(child)
                elif target in modules:
                    named.add(target)
    own_ancestors = set(_packages_above(name)) | {name}
    edges = set(named)
    for target in named:
        edges.update(p for p in _packages_above(target) if p in modules and p not in own_ancestors)
    return frozenset(edges)


def _packages_above(name: str) -> list[str]:
    """`a.b.c` -> [`a`, `a.b`]: the packages Python initialises before it imports `name`."""
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts))]


def import_graph(
    root: Path = REPO, packages: Iterable[str] = PACKAGES
) -> dict[str, frozenset[str]]:
    modules = our_modules(root, packages)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: Graph) -> list[tuple[str, ...]]:
    """The strongly connected sets of two or more modules, and each module that imports
    itself, sorted (Tarjan's algorithm, iterative: the graph has hundreds of modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[tuple[str, ...]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop(0)
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    found.append(tuple(sorted(component)))
    return sorted(found)


def main() -> int:
    found = cycles(import_graph())
    for circle in found:
        print(" <-> ".join(circle))
    print(f"import circles: {len(found)}")
    return 0 if not found else 1


if __name__ == "__main__":
    sys.exit(main())
