"""No import circle between our modules, late or hidden ones included (tests/importgraph.py)."""

from __future__ import annotations

from pathlib import Path

from tests.importgraph import cycles, import_graph


def _package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_our_modules_import_no_circle() -> None:
    assert cycles(import_graph()) == []


def test_a_circle_through_a_function_level_import_is_counted(tmp_path: Path) -> None:
    _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.b import f\n",
            "pkg/b.py": "def f() -> None:\n    from pkg.a import g\n",
        },
    )
    assert cycles(import_graph(tmp_path, ("pkg",))) == [("pkg.a", "pkg.b")]


def test_a_circle_under_type_checking_is_counted(tmp_path: Path) -> None:
    _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import X\n"
            ),
        },
    )
    assert cycles(import_graph(tmp_path, ("pkg",))) == [("pkg.a", "pkg.b")]


def test_a_circle_through_a_package_initialiser_is_counted(tmp_path: Path) -> None:
    """`from pkg.vm.process import x` runs pkg/vm/__init__.py first; if that imports the
    importer back, the two are a circle even though neither names the other directly."""
    _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/release.py": "from pkg.vm.process import running\n",
            "pkg/vm/__init__.py": "from pkg.release import done\n",
            "pkg/vm/process.py": "def running() -> bool:\n    return True\n",
        },
    )
    assert cycles(import_graph(tmp_path, ("pkg",))) == [("pkg.release", "pkg.vm")]


def test_a_module_importing_its_own_package_is_no_circle(tmp_path: Path) -> None:
    _package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import f\n",
            "pkg/a.py": "from pkg.b import g\ndef f() -> None: ...\n",
            "pkg/b.py": "def g() -> None: ...\n",
        },
    )
    assert cycles(import_graph(tmp_path, ("pkg",))) == []


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "from .a import f\n",
        },
    )
    assert cycles(import_graph(tmp_path, ("pkg",))) == [("pkg.a", "pkg.b")]
