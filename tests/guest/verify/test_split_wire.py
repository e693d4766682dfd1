"""The split judge's protocol: values by copy, exceptions, proxies, callbacks, and a peer
that lies.

The live tests run a real solution process (guest/verify/agentside.py, started as the
verifier starts it) and use this test process as the judge: its import hook, its Link,
its proxies. The hostile-peer tests speak the wire by hand from the other end of a
socket pair: the peer is the adversary, the judge's decoder is what is tested.

Mutation controls (each run, each failed): `_hashable` returning its value unchecked ->
test_decode_refuses[proxy_as_key]; the exact-type decode of `b` accepting ints ->
test_decode_refuses[int_as_bool]; `EXCEPTION_NAMES` built from BaseException ->
test_decode_refuses[system_exit] and [keyboard_interrupt] (the lying peer's SystemExit is
still refused by the judge's own Exception check: defence in depth);
`forbidden` returning False -> test_private_and_pytest_names_are_never_forwarded.
"""

from __future__ import annotations

import decimal
import math
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from enum import IntEnum
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from guest.verify import judgeside, link, wire
from guest.verify.judgeside import Link, SolutionFinder, SplitJudgeError
from guest.verify.proxies import RemoteModule, RemoteObject, SolutionHandles
from guest.verify.split import server_argv
from guest.verify.stubs import read_stubs
from guest.verify.wire import ProtocolError, decode, encode, send

VALUES: list[object] = [
    None,
    True,
    False,
    0,
    -5,
    2**200,
    1.5,
    -0.0,
    math.inf,
    "",
    "h\u00e9llo \U0001f600",
    b"\x00\xff",
    [1, [2, "x"]],
    (1, (2,)),
    {"a": 1, (1, "b"): [None], 3: {"z": b""}},
    {1, "two", (3,)},
    frozenset({1.5, None}),
]


def _refuse(value: object) -> list[Any]:
    raise ProtocolError("refused")


def _no_handles(data: list[Any]) -> object:
    raise ProtocolError("refused")


def _exact_equal(left: Any, right: Any) -> bool:
    if type(left) is not type(right):
        return False
    if isinstance(left, (list, tuple)):
        return len(left) == len(right) and all(
            _exact_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(
            _exact_equal(v, right[k]) for k, v in left.items()
        )
    return bool(left == right)


@pytest.mark.parametrize("value", VALUES, ids=[type(v).__name__ for v in VALUES])
def test_each_closed_value_crosses_as_an_exact_copy(value: object) -> None:
    copy = decode(encode(value, _refuse), _no_handles)
    assert _exact_equal(copy, value)


def test_nan_and_subclasses_cross_as_their_base_type() -> None:
    assert math.isnan(decode(encode(math.nan, _refuse), _no_handles))  # type: ignore[arg-type]

    class Point(NamedTuple):
        x: int
        y: int

    class Level(IntEnum):
        LOW = 1
        HIGH = 2

    point, level = Point(1, 2), Level.HIGH

    class Loud(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    for value, expected in ((point, (1, 2)), (level, 2), (Loud("x"), "x")):
        copy = decode(encode(value, _refuse), _no_handles)
        assert type(copy) is type(expected) and copy == expected


@pytest.mark.parametrize(
    "data",
    [
        ["b", 1],
        ["i", "zz"],
        ["i", 5],
        ["f", "one"],
        ["d", [[["l", []], ["n"]]]],
        ["d", [[["H", 1, "instance", "m", "C"], ["n"]]]],
        ["S", [["l", []]]],
        ["E", "SystemExit"],
        ["E", "KeyboardInterrupt"],
        ["q", 1],
        ["n", 1],
        "n",
        [],
    ],
    ids=[
        "int_as_bool",
        "bad_hex",
        "raw_int",
        "bad_float",
        "list_as_key",
        "proxy_as_key",
        "list_in_set",
        "system_exit",
        "keyboard_interrupt",
        "unknown_tag",
        "extra_item",
        "not_a_list",
        "empty",
    ],
)
def test_decode_refuses(data: object) -> None:
    def handles(item: list[Any]) -> object:
        if item[0] == "H":
            return object()
        raise ProtocolError("refused")

    with pytest.raises(ProtocolError):
        decode(data, handles)


def test_copied_texts_are_bounded() -> None:
    """A decimal's text and a copied text each stop at their limit (wire.py)."""
    digits = "1" * wire.MAX_DECIMAL_TEXT
    assert decode(["D", digits], _refuse) == decimal.Decimal(digits)
    with pytest.raises(ProtocolError):
        decode(["D", digits + "1"], _refuse)
    hexed = "00" * (wire.MAX_TEXT // 2)
    assert decode(["B", hexed], _refuse) == bytearray(wire.MAX_TEXT // 2)
    with pytest.raises(ProtocolError):
        decode(["B", hexed + "00"], _refuse)


def test_depth_is_bounded_both_ways() -> None:
    deep: list[Any] = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(ProtocolError):
        encode(deep, _refuse)
    data: list[Any] = ["n"]
    for _ in range(200):
        data = ["l", [data]]
    with pytest.raises(ProtocolError):
        decode(data, _no_handles)


SOLUTION = """
import functools

LIMIT = 3
NAMES = ("a", "b")
_private = 1
pytestmark = 2
__test__ = True

class Shelf:
    _private = 1
    pytestmark = 2
    _pytestfixturefunction = 3
    __test__ = True

    def __init__(self, items):
        self.items = list(items)
        self.label = "shelf"
    def __eq__(self, other):
        return isinstance(other, Shelf) and self.items == other.items
    __hash__ = None
    def __repr__(self):
        return f"Shelf({self.items!r})"
    def __len__(self):
        return len(self.items)
    def __iter__(self):
        return iter(self.items)
    def __getitem__(self, index):
        return self.items[index]
    def __contains__(self, item):
        return True  # a lie the judge never asks
    def __add__(self, other):
        return Shelf(self.items + other.items)
    def each(self, function):
        return [function(item) for item in self.items]
    def fold(self, function, start):
        return functools.reduce(function, self.items, start)

class Helper:
    def __bool__(self):
        return False  # a lie the judge never asks

class ShelfError(ValueError):
    pass

class Point:
    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return True  # a lie: the stub's own __eq__ decides

    def __repr__(self):
        return f"Point({self.x})"

    def shifted(self, dx):
        return Point(self.x + dx)


def make(*items):
    return Shelf(items)

def helper():
    return Helper()

def fail(message):
    raise ShelfError(message)

def fail_builtin():
    raise KeyError("missing", 2)

def count(values):
    return len(values)

def generate(n):
    yield from range(n)

def leave():
    raise SystemExit(0)
"""
STUB = """
class Shelf:
    def __init__(self, items):
        pass

    def __eq__(self, other):
        pass

    def __len__(self):
        pass

    def __add__(self, other):
        pass

    def each(self, function):
        pass


class ShelfError(ValueError):
    pass


class Point:
    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return isinstance(other, Point) and self.x == other.x

    def __repr__(self):
        pass

    def shifted(self, dx):
        pass
"""
"""The task's stub: it declares `__eq__`, `__len__` and `__add__` for the solution to write
(equality is then the judge's, over state), and not `__contains__`."""


@pytest.fixture
def solution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A real solution process serving a fresh module; this process is the judge."""
    name = f"shelf_{uuid.uuid4().hex[:12]}"
    workspace, stubs = tmp_path / "ws", tmp_path / "stubs"
    workspace.mkdir()
    stubs.mkdir()
    (workspace / f"{name}.py").write_text(SOLUTION)
    (stubs / f"{name}.py").write_text(STUB)
    path = str(tmp_path / "judge.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    process = subprocess.Popen(server_argv(path, workspace, sys.executable), cwd=workspace)
    conn = judgeside.accept(listener, os.getuid(), 30)
    listener.close()
    assert conn is not None
    known = read_stubs(stubs)
    monkeypatch.setattr(link, "LINK", Link(conn, SolutionHandles(known)))
    finder = SolutionFinder(known.modules)
    sys.meta_path.append(finder)
    try:
        module = __import__(name)
        assert isinstance(module, RemoteModule)
        yield module
    finally:
        sys.meta_path.remove(finder)
        sys.modules.pop(name, None)
        conn.close()
        process.wait(timeout=30)


def test_module_values_and_calls_cross_by_copy(solution: Any) -> None:
    assert (solution.LIMIT, solution.NAMES) == (3, ("a", "b"))
    assert type(solution.NAMES) is tuple
    mine = [1, 2, 3]
    assert solution.count(mine) == 3
    assert list(solution.generate(4)) == [0, 1, 2, 3]
    with pytest.raises(AttributeError):
        _ = solution.nothing_here


def test_exceptions_are_the_same_builtin_class_with_their_args(solution: Any) -> None:
    with pytest.raises(KeyError) as caught:
        solution.fail_builtin()
    assert caught.value.args == ("missing", 2)
    with pytest.raises(ValueError, match=r"^too many$") as own:
        solution.fail("too many")
    assert own.value.args[0] == "too many"
    assert isinstance(own.value, solution.ShelfError)
    assert type(own.value) is solution.ShelfError and solution.ShelfError.__bases__ == (ValueError,)


def test_a_declared_instance_answers_values_and_the_judge_decides(solution: Any) -> None:
    shelf = solution.make(1, 2)
    assert isinstance(shelf, solution.Shelf)
    assert (len(shelf), list(shelf), shelf[1], repr(shelf)) == (2, [1, 2], 2, "Shelf([1, 2])")
    # the stub leaves __eq__ to the solution: equality of state, decided here
    assert shelf == solution.Shelf([1, 2]) and shelf != solution.Shelf([2])
    assert shelf.label == "shelf"
    shelf.label = "top"
    assert shelf.label == "top"
    assert shelf != solution.Shelf([1, 2])  # its state changed
    assert shelf.items == [1, 2] and type(shelf.items) is list
    assert shelf != [1, 2] and shelf != [1, 2]
    assert hash(shelf) == hash(solution.make(5))  # one hash per class: equal states agree
    # `in` iterates and compares here (the solution's __contains__ is never asked)
    assert 2 in shelf and 9 not in shelf
    # an operator the stub declares runs in the solution's process, one it does not is absent
    assert list(shelf + solution.make(3)) == [1, 2, 3]
    with pytest.raises(TypeError):
        _ = shelf - solution.make(3)
    with pytest.raises(TypeError):
        _ = shelf < solution.make(3)


def test_truth_is_the_judges(solution: Any) -> None:
    assert bool(solution.make(1)) is True
    assert bool(solution.make()) is False  # a length of 0, computed by the solution
    assert bool(solution.helper()) is True  # no length: true, whatever it says


def test_callbacks_run_in_the_judge_with_copied_values(solution: Any) -> None:
    seen: list[object] = []
    shelf = solution.make(1, 2, 3)

    def record(item: int) -> int:
        seen.append(item)
        return item * 10

    assert shelf.each(record) == [10, 20, 30]
    assert seen == [1, 2, 3]
    assert shelf.fold(lambda acc, item: acc + item, 0) == 6

    def broken(item: object) -> object:
        raise IndexError("from the judge", item)

    with pytest.raises(IndexError) as caught:
        shelf.each(broken)
    assert caught.value.args == ("from the judge", 1)


def test_a_helper_of_the_solution_is_an_opaque_proxy(solution: Any) -> None:
    """An object of a class the stub does not declare crosses (an honest solution may
    return one) and equals only itself."""
    first, second = solution.helper(), solution.helper()
    same = first
    assert first == same
    assert first != second
    assert first != "anything"
    assert {first: 1}[first] == 1


def test_a_judge_object_is_never_passed(solution: Any) -> None:
    with pytest.raises(SplitJudgeError):
        solution.count(object())


def test_a_solution_that_exits_is_an_error_not_an_exception(solution: Any) -> None:
    with pytest.raises(SplitJudgeError):
        solution.leave()
    assert not isinstance(SplitJudgeError("x"), Exception)
    with pytest.raises(SplitJudgeError):
        solution.count([1])  # the process is gone: every later call errors too


def test_private_and_pytest_names_are_never_forwarded(solution: Any) -> None:
    shelf = solution.make(1)
    for name in ("_pytestfixturefunction", "pytestmark", "__test__", "_private"):
        with pytest.raises(AttributeError):
            getattr(shelf, name)
        with pytest.raises(AttributeError):
            getattr(solution, name)


# -- a peer that lies ---------------------------------------------------------------------


def _lying_link(tmp_path: Path, replies: list[list[Any]]) -> tuple[Link, socket.socket]:
    ours, theirs = socket.socketpair()
    for reply in replies:
        send(theirs, reply)
    (tmp_path / "m.py").write_text("class Declared:\n    pass\n")
    handles = SolutionHandles(read_stubs(tmp_path))
    handles.imported.add("m")
    return Link(ours, handles), theirs


@pytest.mark.parametrize(
    "reply",
    [
        ["ok", ["H", 1, "wizard", "m", "Declared"]],
        ["ok", ["H", 1, "exception_class", "m", "E", "SystemExit"]],
        ["raise", ["E", "ValueError"], ["t", [["H", 2, "instance", "m", "Declared"]]]],
        ["ok", ["c", 9]],
        ["raise", ["E", "SystemExit"], ["t", []]],
        ["raise", ["s", "ValueError"], ["t", []]],
        ["callback", 7, ["t", []], ["d", []]],
        ["ok"],
        ["hello"],
    ],
    ids=[
        "unknown_kind",
        "exception_class_of_base_exception",
        "exception_argument_an_object",
        "unknown_callback",
        "base_exception",
        "class_as_string",
        "callback_never_registered",
        "short_reply",
        "unknown_message",
    ],
)
def test_a_lying_peer_is_refused(tmp_path: Path, reply: list[Any]) -> None:
    link, theirs = _lying_link(tmp_path, [reply])
    with pytest.raises(SplitJudgeError):
        link.request(["getattr", 1, "x"])
    assert link.sock is None  # and the link is closed: no later answer is believed
    theirs.close()


def test_an_oversized_or_torn_message_is_refused(tmp_path: Path) -> None:
    link, theirs = _lying_link(tmp_path, [])
    theirs.sendall((64 * 1024 * 1024).to_bytes(4, "big"))
    with pytest.raises(SplitJudgeError):
        link.request(["getattr", 1, "x"])
    link, theirs = _lying_link(tmp_path, [])
    theirs.sendall((10).to_bytes(4, "big") + b"[")
    theirs.close()
    with pytest.raises(SplitJudgeError):
        link.request(["getattr", 1, "x"])


@pytest.mark.parametrize(
    ("module", "name", "declared"),
    [("m", "Declared", True), ("m", "Helper", False), ("elsewhere", "Declared", False)],
)
def test_an_instance_from_a_truthful_peer_is_accepted(
    tmp_path: Path, module: str, name: str, declared: bool
) -> None:
    """The positive control for the lying-peer cases: a declared class's object gets the
    stub's class as a base; any other is an opaque proxy."""
    link, theirs = _lying_link(tmp_path, [["ok", ["H", 1, "instance", module, name]]])
    proxy = link.request(["getattr", 1, "x"])
    assert type(proxy).__name__ == name
    assert isinstance(proxy, RemoteObject) is not declared
    theirs.close()


def test_the_import_hook_serves_only_the_workspaces_modules() -> None:
    """Names the standard library probes (`msvcrt`, `org.python.core`) are never asked of
    the solution's process, whatever the workspace holds.
    Mutation control: the names check removed from SolutionFinder.find_spec -> fails."""
    finder = SolutionFinder(frozenset({"shelf"}))
    assert finder.find_spec("shelf") is not None
    for name in ("msvcrt", "org", "org.python.core", "_winapi", "pygments"):
        assert finder.find_spec(name) is None, name


def test_the_solutions_process_computes_values_only(tmp_path: Path) -> None:
    """Even a judge that asked would not get a decision from the solution's process: its
    server answers no comparison, hash, truth or `in` (defence in depth; the judge's
    rules never ask).
    Mutation control: "__eq__" added to agentside.VALUE_OPERATORS -> fails."""
    from guest.verify.agentside import Server

    ours, theirs = socket.socketpair()
    server = Server(theirs)
    server.objects[1] = [1, 2]
    for name in ("__eq__", "__ne__", "__lt__", "__hash__", "__bool__", "__contains__"):
        with pytest.raises(ProtocolError):
            server.handle(["op", 1, name, ["t", [["i", "0x1"]]]])
    assert server.handle(["op", 1, "__len__", ["t", []]]) == 2
    ours.close()
    theirs.close()


def test_a_value_class_is_built_by_the_judge(solution: Any) -> None:
    """The stub implements Point's constructor and equality: a test's Point is the
    judge's, from the stub; what the stub leaves (repr, shifted) runs on a copy the
    solution builds with the same arguments.
    Mutation control: ValueForward used for no dunder (forwarded_dunder for a value's
    __repr__ again) -> repr fails."""
    point = solution.Point(2)
    assert not isinstance(point, RemoteObject) and type(point).__name__ == "Point"
    assert repr(point) == "Point(2)"
    moved = point.shifted(3)  # the solution's object, compared by the stub's __eq__
    assert moved == solution.Point(5) and moved != solution.Point(4)
    assert moved != 5
