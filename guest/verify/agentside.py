"""The solution's process in a split judgement: import the agent's modules, serve calls.

This process runs the agent's code, so nothing it sends is trusted: the judge
(guest/verify/judgeside.py) decodes every reply into exact builtin values or its own
proxies, and decides which proxies it accepts. What this side does is keep the
agent's objects in a table and answer the judge's requests on them:

- `import NAME`, `getattr REF NAME`, `setattr REF NAME VALUE`, `delattr REF NAME`,
  `call REF ARGS KWARGS`, `op REF DUNDER ARGS` (an operator that computes a value: len,
  iter, next, repr, [], +, ...; never ==, <, hash, truth or `in`), `state REF` (an object's
  attributes, for the judge's equality of state), `vcall VALUE NAME ARGS KWARGS` (a method
  on an object this process builds from a value the judge built: `V MODULE CLASS ARGS
  KWARGS`, the class's own constructor called with the test's arguments);
- replies `ok VALUE` or `raise CLASS ARGS` (the exception's class as a builtin name or a
  class of the agent's, its arguments copied, a non-copyable argument as its repr);
- a judge callable that a test passed arrives as a stub; calling it sends `callback`
  and serves the judge's nested requests until the callback's reply comes.

A BaseException that is not an Exception (SystemExit, a KeyboardInterrupt raised by the
solution) ends this process: the judge then sees the peer gone.
"""

from __future__ import annotations

import builtins
import importlib
import os
import socket
import sys
import time
import types

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

CONNECT_SECONDS = 30.0

VALUE_OPERATORS = frozenset(
    {
        "__len__", "__iter__", "__next__", "__reversed__", "__repr__", "__str__",
        "__format__", "__bytes__", "__int__", "__float__", "__complex__", "__index__",
        "__getitem__", "__setitem__", "__delitem__", "__neg__", "__pos__", "__abs__",
        "__invert__", "__round__", "__trunc__", "__floor__", "__ceil__", "__enter__",
        "__exit__", "__length_hint__",
        *(f"__{prefix}{op}__" for prefix in ("", "r", "i") for op in (
            "add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow",
            "lshift", "rshift", "and", "xor", "or")),
    }
)  # fmt: skip
"""Operators that compute a value. Decisions (==, <, hash, truth, `in`) are never asked of
this process: the judge makes them (guest/verify/proxies.py)."""


class _Callback:
    """A judge callable: calling it asks the judge to run it."""

    __slots__ = ("_server", "cid")

    def __init__(self, server: Server, cid: int) -> None:
        self._server = server
        self.cid = cid

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self._server.callback(self.cid, args, kwargs)


class Server:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.objects: dict[int, object] = {}
        self.ids: dict[int, int] = {}
        self.callbacks: dict[int, _Callback] = {}

    # -- values ----------------------------------------------------------------------
    def _register(self, obj: object) -> int:
        ref = self.ids.get(id(obj))
        if ref is None:
            ref = len(self.objects) + 1
            self.objects[ref] = obj
            self.ids[id(obj)] = ref
        return ref

    def _handle_out(self, obj: object) -> Encoded:
        if isinstance(obj, _Callback):
            return ["c", obj.cid]
        ref = self._register(obj)
        if isinstance(obj, types.ModuleType):
            kind = "package" if hasattr(obj, "__path__") else "module"
            return ["H", ref, "module", obj.__name__, kind]
        if isinstance(obj, type):
            if issubclass(obj, Exception):
                base = next(
                    c.__name__
                    for c in obj.__mro__
                    if c.__name__ in EXCEPTION_NAMES and getattr(builtins, c.__name__) is c
                )
                return ["H", ref, "exception_class", obj.__module__, obj.__qualname__, base]
            return ["H", ref, "class", obj.__module__, obj.__qualname__]
        cls = type(obj)
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
            return ["H", ref, "callable", "", ""]
        if hasattr(cls, "__next__"):  # a generator, or an iterator class of the agent's
            return ["H", ref, "iterator", "", ""]
        if callable(obj) and cls.__module__ in ("builtins", "functools"):
            return ["H", ref, "callable", "", ""]
        return ["H", ref, "instance", cls.__module__, cls.__qualname__]

    def encode(self, value: object) -> Encoded:
        return encode(value, self._handle_out)

    def _handle_in(self, data: Encoded) -> object:
        tag = data[0]
        if tag == "h" and len(data) == 2:
            ref = checked_id(data[1])
            if ref not in self.objects:
                raise ProtocolError("unknown reference")
            return self.objects[ref]
        if tag == "c" and len(data) == 2:
            cid = checked_id(data[1])
            if cid not in self.callbacks:
                self.callbacks[cid] = _Callback(self, cid)
            return self.callbacks[cid]
        if tag == "V" and len(data) == 5:
            cls = getattr(importlib.import_module(self._name_path(data[1])), self._name(data[2]))
            args, kwargs = self.decode(data[3]), self.decode(data[4])
            if type(args) is not tuple or type(kwargs) is not dict:
                raise ProtocolError("malformed value")
            return cls(*args, **kwargs)
        raise ProtocolError("malformed value")

    def decode(self, data: object) -> object:
        return decode(data, self._handle_in)

    def _raised(self, exc: Exception) -> Encoded:
        args = []
        for arg in exc.args:
            try:
                args.append(encode(arg, _refuse))
            except (ProtocolError, RecursionError):
                args.append(["s", _safe_repr(arg)])
        return ["raise", self.encode(type(exc)), ["t", args]]

    # -- requests --------------------------------------------------------------------
    def _target(self, value: object) -> object:
        ref = checked_id(value)
        if ref not in self.objects:
            raise ProtocolError("unknown reference")
        return self.objects[ref]

    def _name(self, value: object) -> str:
        if type(value) is not str or not value.isidentifier():
            raise ProtocolError("malformed name")
        return value

    def handle(self, message: Encoded) -> object:
        op = message[0]
        if op == "import" and len(message) == 2:
            return importlib.import_module(self._name_path(message[1]))
        if op == "getattr" and len(message) == 3:
            return getattr(self._target(message[1]), self._name(message[2]))
        if op == "setattr" and len(message) == 4:
            setattr(self._target(message[1]), self._name(message[2]), self.decode(message[3]))
            return None
        if op == "call" and len(message) == 4:
            args = self.decode(message[2])
            kwargs = self.decode(message[3])
            if type(args) is not tuple or type(kwargs) is not dict:
                raise ProtocolError("malformed call")
            return self._target(message[1])(*args, **kwargs)  # type: ignore[operator]
        if op == "delattr" and len(message) == 3:
            delattr(self._target(message[1]), self._name(message[2]))
            return None
        if op == "op" and len(message) == 4:
            args = self.decode(message[3])
            if message[2] not in VALUE_OPERATORS or type(args) is not tuple:
                raise ProtocolError("unknown operator")
            target = self._target(message[1])
            method = getattr(type(target), message[2], None)  # looked up as Python does
            if method is None:
                raise TypeError(f"{type(target).__name__} has no {message[2]}")
            return method(target, *args)
        if op == "state" and len(message) == 2:
            return _state(self._target(message[1]))
        if op == "vcall" and len(message) == 5:
            target = self.decode(message[1])
            args, kwargs = self.decode(message[3]), self.decode(message[4])
            if type(args) is not tuple or type(kwargs) is not dict:
                raise ProtocolError("malformed call")
            return getattr(target, self._name(message[2]))(*args, **kwargs)
        raise ProtocolError("unknown request")

    def _name_path(self, value: object) -> str:
        if type(value) is not str or not all(part.isidentifier() for part in value.split(".")):
            raise ProtocolError("malformed name")
        return value

    def answer(self, message: Encoded) -> None:
        """Run one judge request and send its reply."""
        try:
            result = self.handle(message)
            reply = ["ok", self.encode(result)]
        except ProtocolError:
            raise
        except Exception as exc:  # noqa: BLE001 (the agent's code raised: copied to the judge)
            reply = self._raised(exc)
        send(self.sock, reply)

    def callback(self, cid: int, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        send(self.sock, ["callback", cid, self.encode(args), self.encode(kwargs)])
        while True:
            message = receive(self.sock)
            if message[0] == "ok" and len(message) == 2:
                return self.decode(message[1])
            if message[0] == "raise" and len(message) == 3:
                cls = self.decode(message[1])
                exc_args = self.decode(message[2])
                if not (isinstance(cls, type) and issubclass(cls, Exception)):
                    raise ProtocolError("malformed exception")
                if type(exc_args) is not tuple:
                    raise ProtocolError("malformed exception")
                raise cls(*exc_args)
            self.answer(message)

    def serve(self) -> None:
        while True:
            self.answer(receive(self.sock))


def _state(obj: object) -> dict[str, object]:
    """The object's attributes: its instance dictionary and its slots."""
    state: dict[str, object] = {}
    for cls in type(obj).__mro__:
        for slot in cls.__dict__.get("__slots__", ()):
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__"):
                try:
                    state[slot] = object.__getattribute__(obj, slot)
                except AttributeError:
                    continue
    instance = getattr(obj, "__dict__", None)
    if isinstance(instance, dict):
        state.update(instance)
    return state


def _refuse(obj: object) -> Encoded:
    raise ProtocolError("not a closed value")


def _safe_repr(obj: object) -> str:
    try:
        text = repr(obj)
    except Exception:  # noqa: BLE001 (the agent's __repr__; only a string crosses)
        return "<unrepresentable>"
    return text if type(text) is str else "<unrepresentable>"


def connect(path: str, deadline_s: float = CONNECT_SECONDS) -> socket.socket:
    """The judge listens; it may not be up yet when this process starts."""
    end = time.monotonic() + deadline_s
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
            if time.monotonic() > end:
                raise
        else:
            return sock
            time.sleep(0.02)


def main(argv: list[str]) -> int:
    """ROOT SOCKET WORKSPACE: serve the judge from the workspace's modules."""
    root, path, workspace = argv
    sock = connect(path)
    sys.path[:] = [workspace, *(entry for entry in sys.path if entry != root)]
    os.chdir(workspace)
    try:
        Server(sock).serve()
    except ProtocolError:
        return 0  # the judge is done (or broke the wire): nothing more to serve
    return 0
