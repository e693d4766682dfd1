"""The split judge's wire: framed JSON messages and a closed set of values copied by value.

Why by hand and not rpyc: rpyc's references are symmetric. An argument of a mutable type
(a list, a test's lambda, any object) crosses as a netref the other side can call and
read attributes of, so the solution's process would hold live references into the
judge; its restricted configuration narrows attribute names, but every netref still lets
the remote side drive objects of the judge, and the judge would run a general request
dispatcher for a peer that is the adversary. Here nothing of the judge crosses except
copies of these types, decoded into exact builtin types (a subclass never arrives, so
no `__eq__` of the agent's rides along), and two kinds of opaque numbers: the
solution's own objects (`h`: the judge holds a proxy) and the judge's callables the
tests passed (`c`: the solution can only ask the judge to call them, with copied
arguments).

Every message is a 4-byte big-endian length and one JSON document, at most
MAX_MESSAGE bytes; values nest at most MAX_DEPTH deep. Both sides import this module;
it imports the standard library only (the judge runs it beside pytest, the agent's
process before the solution is imported).
"""

from __future__ import annotations

import builtins
import json
import socket
import struct
from collections.abc import Callable
from typing import Any

MAX_MESSAGE = 32 * 1024 * 1024
MAX_DEPTH = 64
MAX_ID = 2**31 - 1
_LENGTH = struct.Struct(">I")

EXCEPTION_NAMES: frozenset[str] = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, Exception)
)
"""Builtin exception classes that may cross by name (tag `E`). BaseException-only
classes (SystemExit, KeyboardInterrupt, GeneratorExit) never cross: a solution must not
be able to raise them in the judge."""

Encoded = list[Any]
HandleOut = Callable[[object], Encoded]
HandleIn = Callable[[Encoded], object]


class ProtocolError(Exception):
    """A message that breaks the wire's rules, or a peer that is gone."""


def send(sock: socket.socket, message: Encoded) -> None:
    data = json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    raw = data.encode("ascii")
    if len(raw) > MAX_MESSAGE:
        raise ProtocolError("message too large")
    try:
        sock.sendall(_LENGTH.pack(len(raw)) + raw)
    except OSError as exc:
        raise ProtocolError("peer gone") from exc


def _read_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        try:
            chunk = sock.recv(min(size - len(chunks), 1 << 20))
        except OSError as exc:
            raise ProtocolError("peer gone") from exc
        if not chunk:
            raise ProtocolError("peer gone")
        chunks += chunk
    return bytes(chunks)


def receive(sock: socket.socket) -> Encoded:
    (size,) = _LENGTH.unpack(_read_exact(sock, _LENGTH.size))
    if size > MAX_MESSAGE:
        raise ProtocolError("message too large")
    try:
        message = json.loads(_read_exact(sock, size))
    except (ValueError, RecursionError) as exc:
        raise ProtocolError("malformed message") from exc
    if type(message) is not list or not message or type(message[0]) is not str:
        raise ProtocolError("malformed message")
    return message


_EXACT = (type(None), bool, int, float, str, bytes, tuple, list, frozenset, set, dict)


def _coerce(value: Any) -> Any:
    """A subclass of a closed type as an exact copy of its base (a namedtuple as a tuple,
    an IntEnum as an int); anything else unchanged."""
    converters: tuple[tuple[type, Callable[[Any], Any]], ...] = (
        (bool, bool.__bool__),
        (int, int.__index__),
        (float, float.__float__),
        (str, str.__str__),
        (bytes, lambda v: bytes(memoryview(v))),
        (tuple, tuple),
        (list, list),
        (frozenset, frozenset),
        (set, set),
        (dict, dict),
    )
    if type(value) in _EXACT:
        return value  # bool is an int subclass: an exact closed type is never converted
    for base, convert in converters:
        if isinstance(value, base) and type(value) is not base:
            return convert(value)
    return value


_TAGS: dict[type, str] = {list: "l", tuple: "t", set: "S", frozenset: "F"}


def encode(value: object, handle_out: HandleOut, depth: int = 0) -> Encoded:
    """The wire form of `value`; objects outside the closed set go to `handle_out`."""
    if depth > MAX_DEPTH:
        raise ProtocolError("value nested too deeply")
    plain: Any = _coerce(value)
    kind = type(plain)
    if plain is None:
        return ["n"]
    if kind is bool:
        return ["b", plain]
    if kind is int:
        return ["i", hex(plain)]
    if kind is float:
        return ["f", float.hex(plain)]
    if kind is str:
        return ["s", plain]
    if kind is bytes:
        return ["y", plain.hex()]
    if kind in _TAGS:
        return [_TAGS[kind], [encode(item, handle_out, depth + 1) for item in plain]]
    if kind is dict:
        pairs = plain.items()
        return [
            "d",
            [
                [encode(k, handle_out, depth + 1), encode(v, handle_out, depth + 1)]
                for k, v in pairs
            ],
        ]
    name = getattr(plain, "__name__", None) if isinstance(plain, type) else None
    if name in EXCEPTION_NAMES and getattr(builtins, str(name)) is plain:
        return ["E", name]
    return handle_out(plain)


def _hashable(value: object) -> object:
    """Keys and set members must be closed values: hashing a proxy would ask the agent."""
    if type(value) in (tuple, frozenset):
        for item in value:  # type: ignore[attr-defined]
            _hashable(item)
    elif type(value) not in (type(None), bool, int, float, str, bytes):
        raise ProtocolError("unhashable key")
    return value


def _items(payload: object) -> list[Any]:
    if type(payload) is not list:
        raise ProtocolError("malformed value")
    return payload


def decode(data: object, handle_in: HandleIn, depth: int = 0) -> object:
    """Exact builtin values from the wire form; tags other than the closed set's go to
    `handle_in`, which decides whether the judge accepts them."""
    if depth > MAX_DEPTH:
        raise ProtocolError("value nested too deeply")
    if type(data) is not list or not data or type(data[0]) is not str:
        raise ProtocolError("malformed value")
    tag = data[0]
    payload = data[1] if len(data) == 2 else None
    try:
        if tag == "n" and len(data) == 1:
            return None
        if tag == "b" and type(payload) is bool:
            return payload
        if tag == "i" and type(payload) is str and len(payload) <= 1 << 20:
            return int(payload, 16)
        if tag == "f" and type(payload) is str and len(payload) <= 64:
            return float.fromhex(payload)
        if tag == "s" and type(payload) is str:
            return payload
        if tag == "y" and type(payload) is str:
            return bytes.fromhex(payload)
    except ValueError as exc:
        raise ProtocolError("malformed value") from exc
    if tag in ("l", "t", "S", "F"):
        items = [decode(item, handle_in, depth + 1) for item in _items(payload)]
        if tag == "l":
            return items
        if tag == "t":
            return tuple(items)
        members = [_hashable(item) for item in items]
        return set(members) if tag == "S" else frozenset(members)
    if tag == "d":
        result: dict[object, object] = {}
        for pair in _items(payload):
            if type(pair) is not list or len(pair) != 2:
                raise ProtocolError("malformed value")
            key = _hashable(decode(pair[0], handle_in, depth + 1))
            result[key] = decode(pair[1], handle_in, depth + 1)
        return result
    if tag == "E" and type(payload) is str and payload in EXCEPTION_NAMES:
        return getattr(builtins, payload)
    if tag in ("n", "b", "i", "f", "s", "y", "E"):
        raise ProtocolError("malformed value")
    return handle_in(data)


def checked_id(value: object) -> int:
    if type(value) is not int or not 0 <= value <= MAX_ID:
        raise ProtocolError("malformed id")
    return value
