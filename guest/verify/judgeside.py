"""The judge of a split judgement: pytest and the hidden tests, never the agent's code.

Why: a solution module that, when imported, patches the test runner (one line:
`unittest.TestCase.run = lambda self, result=None: None`) made every unittest-style
hidden test "pass" while the hidden tests ran in the same process as the solution.
Here the process that runs pytest and the hidden tests never imports a module of the
agent's workspace. A module the judge cannot find on its own path (its standard library,
its site packages, the hidden tests' directory, which holds nothing of the agent's)
is served by a second process, the agent's (guest/verify/agentside.py), through
an import hook at the end of `sys.meta_path`: the judge gets a proxy module.

What crosses: values of a closed set of builtin types by copy (guest/verify/wire.py),
decoded into exact builtin types; exceptions as the same builtin class (or a class of
the judge's making, with a builtin base, for an exception class of the solution's) with
copied arguments; the solution's objects as proxies whose operators are forwarded; the
tests' callables as numbers the solution can only ask the judge to call.

Which proxies the judge accepts (the part a reward-hacking solution would attack): an
instance of the solution's is accepted only when its class is one the task's original
stub declares at the top level of that module (read from the host's copy of the task,
not from the workspace). A function whose stub returns a string therefore cannot
return an object whose `__eq__` always says yes: the value is refused and the test
errors. An iterator proxy only iterates and a callable proxy only calls; neither
forwards `==`. Names that begin with `_` or `pytest` are never forwarded (pytest and
unittest look up such names on objects; the solution must not answer them).

What it does not prove: an instance of a declared class is the agent's code, and its
`__eq__`, `__repr__` and methods answer for it (docs/verification.md).
"""

from __future__ import annotations

import ast
import builtins
import importlib.abc
import importlib.machinery
import os
import socket
import struct
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from guest.verify.wire import (
    EXCEPTION_NAMES,
    Encoded,
    ProtocolError,
    checked_id,
    decode,
    encode,
    receive,
    send,
)

ACCEPT_SECONDS = 60.0
MAX_NESTING = 32
_UCRED = struct.Struct("3i")


class SplitJudgeError(BaseException):
    """The solution's process is gone, broke the wire, or sent a value the judge refuses.

    A BaseException, not an Exception: `assertRaises(Exception)` and `pytest.raises(
    Exception)` must never count the judge's refusal (or a solution that killed its own
    process on purpose) as the exception a test expected; unittest and pytest record it
    as an error."""


def forbidden(name: str) -> bool:
    return name.startswith(("_", "pytest"))


def declared_classes(stubs: Path | None, module: str) -> frozenset[str]:
    """Top-level class names of `module` in the task's original workspace (the stub)."""
    if stubs is None:
        return frozenset()
    parts = module.split(".")
    for candidate in (
        stubs.joinpath(*parts).with_suffix(".py"),
        stubs.joinpath(*parts, "__init__.py"),
    ):
        try:
            tree = ast.parse(candidate.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        return frozenset(node.name for node in tree.body if isinstance(node, ast.ClassDef))
    return frozenset()


class Link:
    """The judge's end of the wire: requests, replies, and the tests' callbacks."""

    def __init__(self, sock: socket.socket | None, stubs: Path | None) -> None:
        self.sock = sock
        self.stubs = stubs
        self.modules: set[str] = set()
        self.proxies: dict[int, object] = {}
        self.class_types: dict[tuple[str, str], type] = {}
        self.exception_refs: dict[type, int] = {}
        self.callbacks: dict[int, Callable[..., object]] = {}
        self.callback_ids: dict[int, int] = {}
        self.nesting = 0

    # -- the wire --------------------------------------------------------------------
    def _lose(self, reason: str) -> SplitJudgeError:
        if self.sock is not None:
            self.sock.close()
        self.sock = None
        return SplitJudgeError(reason)

    def request(self, message: Encoded) -> object:
        if self.sock is None:
            raise SplitJudgeError("the solution's process is gone")
        if self.nesting >= MAX_NESTING:
            raise SplitJudgeError("calls nested too deeply")
        self.nesting += 1
        try:
            return self._exchange(message)
        except ProtocolError as exc:
            raise self._lose(str(exc)) from None
        finally:
            self.nesting -= 1

    def _exchange(self, message: Encoded) -> object:
        assert self.sock is not None
        send(self.sock, message)
        while True:
            reply = receive(self.sock)
            if reply[0] == "ok" and len(reply) == 2:
                return self.decode(reply[1])
            if reply[0] == "raise" and len(reply) == 3:
                raise self._exception(reply[1], reply[2])
            if reply[0] == "callback" and len(reply) == 4:
                self._serve_callback(reply)
                continue
            raise ProtocolError("unexpected message")

    def _exception(self, cls_data: object, args_data: object) -> BaseException:
        cls = self.decode(cls_data)
        args = self.decode(args_data)
        if not (isinstance(cls, type) and issubclass(cls, Exception)) or type(args) is not tuple:
            raise ProtocolError("malformed exception")
        try:
            return cls(*args)
        except Exception:  # noqa: BLE001 (arguments a builtin exception refuses)
            return SplitJudgeError("an exception the judge cannot rebuild")

    def _serve_callback(self, message: Encoded) -> None:
        assert self.sock is not None
        cid = checked_id(message[1])
        function = self.callbacks.get(cid)
        args = self.decode(message[2])
        kwargs = self.decode(message[3])
        if function is None or type(args) is not tuple or type(kwargs) is not dict:
            raise ProtocolError("malformed callback")
        if not all(type(key) is str for key in kwargs):
            raise ProtocolError("malformed callback")
        try:
            result = function(*args, **kwargs)
            reply = ["ok", self.encode(result)]
        except ProtocolError:
            raise
        except Exception as exc:  # noqa: BLE001 (the test's callback raised: the solution sees it)
            reply = ["raise", self.encode(self._builtin_or_own(type(exc))), self._args(exc)]
        send(self.sock, reply)

    def _builtin_or_own(self, cls: type) -> type:
        if cls in self.exception_refs:
            return cls
        found: type = next(
            c
            for c in cls.__mro__
            if c.__name__ in EXCEPTION_NAMES and getattr(builtins, c.__name__) is c
        )
        return found

    def _args(self, exc: Exception) -> Encoded:
        items = []
        for arg in exc.args:
            try:
                items.append(encode(arg, _refuse))
            except (ProtocolError, RecursionError):
                items.append(["s", "<judge object>"])
        return ["t", items]

    # -- values ----------------------------------------------------------------------
    def encode(self, value: object) -> Encoded:
        return encode(value, self._handle_out)

    def _handle_out(self, value: object) -> Encoded:
        if isinstance(value, (RemoteObject, RemoteIterator, RemoteCallable)):
            return ["h", object.__getattribute__(value, "_ref")]
        if isinstance(value, RemoteModule):
            return ["h", value.__dict__["_harness_ref"]]
        if isinstance(value, RemoteType):
            ref = value.__dict__.get("_class_ref")
            if ref is not None:
                return ["h", ref]
        if isinstance(value, type) and value in self.exception_refs:
            return ["h", self.exception_refs[value]]
        if type(value) is range:  # a copy iterates the same; the solution gets a list
            return self.encode(list(value))
        if callable(value) and not isinstance(value, type):
            cid = self.callback_ids.get(id(value))
            if cid is None:
                cid = len(self.callbacks) + 1
                self.callbacks[cid] = value
                self.callback_ids[id(value)] = cid
            return ["c", cid]
        raise SplitJudgeError(f"a {type(value).__name__} of the judge cannot be passed")

    def decode(self, data: object) -> Any:
        return decode(data, self._handle_in)

    def _handle_in(self, data: Encoded) -> object:
        tag = data[0]
        if tag == "c" and len(data) == 2:
            cid = checked_id(data[1])
            if cid not in self.callbacks:
                raise ProtocolError("unknown callback")
            return self.callbacks[cid]
        if tag != "H" or len(data) not in (5, 6):
            raise ProtocolError("malformed value")
        ref = checked_id(data[1])
        kind, module, name = data[2], data[3], data[4]
        if not all(type(part) is str and len(part) <= 512 for part in (kind, module, name)):
            raise ProtocolError("malformed value")
        known = self.proxies.get(ref)
        if known is not None:
            return known
        proxy = self._new_proxy(ref, kind, module, name, data[5] if len(data) == 6 else None)
        self.proxies[ref] = proxy
        return proxy

    def _new_proxy(self, ref: int, kind: str, module: str, name: str, base: object) -> object:
        if kind == "callable":
            return RemoteCallable(ref)
        if kind == "iterator":
            return RemoteIterator(ref)
        if kind == "module":
            proxy = RemoteModule(module)
            proxy.__dict__["_harness_ref"] = ref
            if name == "package":
                proxy.__path__ = []
            return proxy
        if kind == "class":
            cls = self.class_type(module, name)
            cls._class_ref = ref  # type: ignore[attr-defined]
            return cls
        if kind == "exception_class" and type(base) is str and base in EXCEPTION_NAMES:
            parent = getattr(builtins, base)
            exc_cls = type(name.rpartition(".")[2] or "Error", (parent,), {"__module__": module})
            self.exception_refs[exc_cls] = ref
            return exc_cls
        if kind == "instance":
            if module not in self.modules or name not in declared_classes(self.stubs, module):
                raise ProtocolError("an instance of a class the task does not declare")
            instance: object = object.__new__(self.class_type(module, name))
            object.__setattr__(instance, "_ref", ref)
            return instance
        raise ProtocolError("malformed value")

    def class_type(self, module: str, name: str) -> type:
        key = (module, name)
        if key not in self.class_types:
            self.class_types[key] = RemoteType(
                name.rpartition(".")[2] or "Object",
                (RemoteObject,),
                {"__module__": module, "__slots__": (), "_class_ref": None},
            )
        return self.class_types[key]


LINK = Link(None, None)
"""The judge's one link (tests run one at a time in this process)."""


def _refuse(value: object) -> Encoded:
    raise ProtocolError("not a closed value")


def _ref(obj: object) -> int:
    return int(object.__getattribute__(obj, "_ref"))


def _op(obj: object, name: str, *args: object) -> object:
    return LINK.request(["op", _ref(obj), name, LINK.encode(args)])


def _typed(value: object, kind: type, what: str) -> Any:
    if type(value) is not kind:
        raise TypeError(f"{what} of the solution's object is not a {kind.__name__}")
    return value


class RemoteType(type):
    """A class of the solution's: calling it constructs in the solution's process."""

    def __call__(cls, *args: object, **kwargs: object) -> object:
        ref = cls.__dict__.get("_class_ref")
        if ref is None:
            raise SplitJudgeError("this class of the solution's cannot be called")
        return LINK.request(["call", ref, LINK.encode(args), LINK.encode(kwargs)])

    def __getattr__(cls, name: str) -> object:
        ref = cls.__dict__.get("_class_ref")
        if forbidden(name) or ref is None:
            raise AttributeError(name)
        return LINK.request(["getattr", ref, name])


def _forwarded(name: str, result: type | None = None) -> Callable[..., object]:
    def method(self: object, *args: object) -> object:
        value = _op(self, name, *args)
        return _typed(value, result, name) if result is not None else value

    method.__name__ = name
    return method


class RemoteObject:
    """An instance of a class the task declares; its operators run in the solution's
    process (that is the agent's code: see the module docstring)."""

    __slots__ = ("_ref",)
    _class_ref: ClassVar[int | None] = None

    def __getattr__(self, name: str) -> object:
        if forbidden(name):
            raise AttributeError(name)
        return LINK.request(["getattr", _ref(self), name])

    def __setattr__(self, name: str, value: object) -> None:
        if forbidden(name):
            raise AttributeError(name)
        LINK.request(["setattr", _ref(self), name, LINK.encode(value)])

    def __call__(self, *args: object, **kwargs: object) -> object:
        return LINK.request(["call", _ref(self), LINK.encode(args), LINK.encode(kwargs)])

    def __hash__(self) -> int:
        return int(_typed(_op(self, "__hash__"), int, "__hash__"))

    def __len__(self) -> int:
        return int(_typed(_op(self, "__len__"), int, "__len__"))

    def __setitem__(self, key: object, value: object) -> None:
        _op(self, "__setitem__", key, value)

    def __delitem__(self, key: object) -> None:
        _op(self, "__delitem__", key)


for _name in (
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__getitem__",
    "__contains__", "__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__",
    "__mod__", "__pow__", "__radd__", "__rsub__", "__rmul__", "__iter__", "__next__",
    "__neg__", "__pos__", "__abs__", "__reversed__",
):  # fmt: skip
    setattr(RemoteObject, _name, _forwarded(_name))
for _name, _kind in (
    ("__repr__", str), ("__str__", str), ("__bool__", bool), ("__int__", int),
    ("__float__", float), ("__index__", int),
):  # fmt: skip
    setattr(RemoteObject, _name, _forwarded(_name, _kind))


class RemoteIterator:
    """A generator or iterator of the solution's: it iterates, and nothing else."""

    __slots__ = ("_ref",)

    def __init__(self, ref: int) -> None:
        self._ref = ref

    def __iter__(self) -> RemoteIterator:
        return self

    def __next__(self) -> object:
        return _op(self, "__next__")

    def __repr__(self) -> str:
        return "<iterator of the solution>"


class RemoteCallable:
    """A function or bound method of the solution's: it can be called, and nothing else."""

    __slots__ = ("_ref",)

    def __init__(self, ref: int) -> None:
        self._ref = ref

    def __call__(self, *args: object, **kwargs: object) -> object:
        return LINK.request(["call", self._ref, LINK.encode(args), LINK.encode(kwargs)])

    def __repr__(self) -> str:
        return "<function of the solution>"


class RemoteModule(types.ModuleType):
    """A module of the agent's workspace, as the judge sees it."""

    def __getattr__(self, name: str) -> object:
        ref = self.__dict__.get("_harness_ref")
        if forbidden(name) or ref is None:
            raise AttributeError(name)
        return LINK.request(["getattr", ref, name])


class SolutionLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return RemoteModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        LINK.modules.add(module.__name__)
        try:
            served = LINK.request(["import", module.__name__])
        except SplitJudgeError as exc:  # pytest's optional imports expect an ImportError
            raise ImportError(module.__name__) from exc
        if not isinstance(served, RemoteModule):
            raise SplitJudgeError("the solution's process did not serve a module")
        module.__dict__["_harness_ref"] = served.__dict__["_harness_ref"]
        LINK.proxies[served.__dict__["_harness_ref"]] = module
        if hasattr(served, "__path__"):
            module.__path__ = []


class SolutionFinder(importlib.abc.MetaPathFinder):
    """Last on sys.meta_path: only a name no finder of the judge's own could find."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        parent = fullname.rpartition(".")[0]
        if parent and not isinstance(sys.modules.get(parent), RemoteModule):
            return None
        return importlib.machinery.ModuleSpec(fullname, SolutionLoader())


def accept(listener: socket.socket, peer_uid: int, timeout: float) -> socket.socket | None:
    """The solution's process, and only if it runs as `peer_uid`."""
    listener.settimeout(timeout)
    try:
        conn, _ = listener.accept()
    except OSError:
        return None
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    _pid, uid, _gid = _UCRED.unpack(creds)
    if uid != peer_uid:
        conn.close()
        return None
    conn.settimeout(None)
    return conn


def main(argv: list[str]) -> int:
    """ROOT SOCKET PEER_UID STUBS -- PYTEST_ARGS: run pytest with the solution served."""
    root, path, peer_uid, stubs = argv[:4]
    if argv[4] != "--":
        return 4
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o666)
    listener.listen(1)
    LINK.sock = accept(listener, int(peer_uid), ACCEPT_SECONDS)
    listener.close()
    LINK.stubs = Path(stubs)
    sys.meta_path.append(SolutionFinder())
    sys.path[:] = [entry for entry in sys.path if entry != root]
    import pytest

    return int(pytest.main(argv[5:]))
