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
import collections
import datetime
import decimal
import fractions
import io
import json
import socket
import struct
from collections.abc import Callable
from typing import Any

# The protocol's limits, all of them here.
MAX_MESSAGE = 32 * 1024 * 1024
"""Bytes of one framed message."""
MAX_DEPTH = 64
"""How deep a value nests."""
MAX_ID = 2**31 - 1
"""The largest object, class or callback number."""
MAX_NESTING = 32
"""Calls in flight at once (a test's callback calling the solution calling back...)."""
MAX_NAME = 512
"""Characters of a module or class name a handle carries."""
MAX_TEXT = 1 << 20
"""Characters of a copied text of the standard library's values (an ISO date, a
buffer's contents, a byte array's hex)."""
MAX_DECIMAL_TEXT = 4096
"""Characters of a decimal's text: a longer one would make the judge's arithmetic on
it as slow as the solution likes."""
MAX_STUB_BYTES = 1 << 20
"""Bytes of a stub module the judge reads and runs."""
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
    stdlib = _encode_stdlib(value, handle_out, depth)
    if stdlib is not None:
        return stdlib
    plain: Any = _coerce(value)
    kind = type(plain)
    if plain is None:
        return ["n"]
    if plain is NotImplemented:  # an operator's "ask the other side": the judge's rules
        return ["N"]
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
    elif type(value) not in _HASHABLE:
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
        if tag == "N" and len(data) == 1:
            return NotImplemented
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
    if tag in ("n", "N", "b", "i", "f", "s", "y", "E"):
        raise ProtocolError("malformed value")
    if tag in _STDLIB_DECODERS and len(data) == 2:
        try:
            return _STDLIB_DECODERS[tag](payload, lambda item: decode(item, handle_in, depth + 1))
        except (ValueError, TypeError, ArithmeticError, OverflowError) as exc:
            raise ProtocolError("malformed value") from exc
    return handle_in(data)


def checked_id(value: object) -> int:
    if type(value) is not int or not 0 <= value <= MAX_ID:
        raise ProtocolError("malformed id")
    return value


# -- the standard library's common values (both directions) ---------------------------
# A correct solution may return these where a test compares with a builtin value or
# iterates: each arrives as the same type, built by the receiving side's own standard
# library from copied parts, never as a reference. The table is the whole list:
#
#   range, complex, bytearray              -> the same type
#   decimal.Decimal, fractions.Fraction    -> the same type, exactly (digits, numerator)
#   collections.deque                      -> deque, with its maxlen
#   collections.OrderedDict, Counter       -> the same type
#   collections.defaultdict                -> defaultdict without a default factory (the
#                                             factory is code of the other side)
#   dict.keys(), .values(), .items()       -> the same view, over a new dict
#   datetime.date, .time, .datetime        -> the same type (naive or a fixed UTC offset)
#   datetime.timedelta                     -> timedelta
#   io.StringIO, io.BytesIO                -> a new buffer: same contents and position
#
# A subclass of one of these (other than of a builtin, which `_coerce` copies as its
# base) is not in the table: it is an object of its side's own code.

_HASHABLE: tuple[type, ...] = (
    type(None), bool, int, float, str, bytes, complex, range, decimal.Decimal,
    fractions.Fraction, datetime.date, datetime.time, datetime.datetime, datetime.timedelta,
)  # fmt: skip
_STRING_IO, _BYTES_IO = io.StringIO, io.BytesIO
_DECIMAL, _FRACTION = decimal.Decimal, fractions.Fraction
_DEQUE, _ORDERED, _COUNTER, _DEFAULT = (
    collections.deque, collections.OrderedDict, collections.Counter, collections.defaultdict
)  # fmt: skip
_DATE, _TIME, _DATETIME, _TIMEDELTA, _TIMEZONE = (
    datetime.date, datetime.time, datetime.datetime, datetime.timedelta, datetime.timezone
)  # fmt: skip
"""The types, taken once at import: a test may patch a name like `io.StringIO` while it
runs (grep's tests do), and what crosses must not depend on it."""
_KEYS_VIEW: type = type({}.keys())
_VALUES_VIEW: type = type({}.values())
_ITEMS_VIEW: type = type({}.items())


def _fixed_offset(value: datetime.datetime | datetime.time) -> bool:
    return value.tzinfo is None or type(value.tzinfo) is _TIMEZONE


def _encode_stdlib(value: object, handle_out: HandleOut, depth: int) -> Encoded | None:
    kind = type(value)

    def items(values: Any) -> list[Encoded]:
        return [encode(item, handle_out, depth + 1) for item in values]

    if kind is range:
        assert isinstance(value, range)
        return ["r", [hex(value.start), hex(value.stop), hex(value.step)]]
    if kind is complex:
        assert isinstance(value, complex)
        return ["j", [float.hex(value.real), float.hex(value.imag)]]
    if kind is bytearray:
        assert isinstance(value, bytearray)
        return ["B", value.hex()]
    if kind is _DECIMAL:
        return ["D", str(value)]
    if kind is _FRACTION:
        assert isinstance(value, _FRACTION)
        return ["Q", [hex(value.numerator), hex(value.denominator)]]
    if kind is _DEQUE:
        assert isinstance(value, _DEQUE)
        limit = None if value.maxlen is None else hex(value.maxlen)
        return ["q", [items(value), limit]]
    if kind in (_ORDERED, _COUNTER, _DEFAULT):
        assert isinstance(value, dict)
        tag = {_ORDERED: "O", _COUNTER: "C"}.get(kind, "dd")
        return [tag, [[encode(k, handle_out, depth + 1), encode(v, handle_out, depth + 1)]
                      for k, v in value.items()]]  # fmt: skip
    if kind in (_KEYS_VIEW, _VALUES_VIEW):
        return ["K" if kind is _KEYS_VIEW else "V", items(value)]
    if kind is _ITEMS_VIEW:
        return ["I", [[encode(k, handle_out, depth + 1), encode(v, handle_out, depth + 1)]
                      for k, v in value]]  # type: ignore[attr-defined]  # fmt: skip
    if kind in (_DATETIME, _DATE, _TIME) and (kind is _DATE or _fixed_offset(value)):  # type: ignore[arg-type]
        tag = {_DATETIME: "dt", _DATE: "da", _TIME: "ti"}[kind]
        return [tag, value.isoformat()]  # type: ignore[attr-defined]
    if kind is _TIMEDELTA:
        assert isinstance(value, _TIMEDELTA)
        return ["td", [hex(value.days), hex(value.seconds), hex(value.microseconds)]]
    if kind in (_STRING_IO, _BYTES_IO):
        assert isinstance(value, (_STRING_IO, _BYTES_IO))
        if value.closed:
            return None
        contents = value.getvalue()
        text = contents if isinstance(contents, str) else contents.hex()
        return ["sio" if kind is _STRING_IO else "bio", [text, hex(value.tell())]]
    return None


def _ints(payload: object, count: int) -> list[int]:
    parts = _items(payload)
    if len(parts) != count or not all(type(p) is str and len(p) <= 1 << 12 for p in parts):
        raise ProtocolError("malformed value")
    return [int(p, 16) for p in parts]


def _text(payload: object) -> str:
    if type(payload) is not str or len(payload) > MAX_TEXT:
        raise ProtocolError("malformed value")
    return payload


def _pairs(payload: object, item: Callable[[object], object]) -> list[tuple[object, object]]:
    pairs = []
    for pair in _items(payload):
        if type(pair) is not list or len(pair) != 2:
            raise ProtocolError("malformed value")
        pairs.append((_hashable(item(pair[0])), item(pair[1])))
    return pairs


def _floats(payload: object) -> list[float]:
    parts = _items(payload)
    if len(parts) != 2 or not all(type(p) is str and len(p) <= 64 for p in parts):
        raise ProtocolError("malformed value")
    return [float.fromhex(p) for p in parts]


def _deque(payload: object, item: Callable[[object], object]) -> collections.deque[object]:
    parts = _items(payload)
    if len(parts) != 2:
        raise ProtocolError("malformed value")
    limit = None if parts[1] is None else _ints([parts[1]], 1)[0]
    return _DEQUE((item(x) for x in _items(parts[0])), maxlen=limit)


def _buffer(payload: object, binary: bool) -> io.StringIO | io.BytesIO:
    parts = _items(payload)
    if len(parts) != 2:
        raise ProtocolError("malformed value")
    text, position = _text(parts[0]), _ints([parts[1]], 1)[0]
    buffer: io.StringIO | io.BytesIO
    buffer = _BYTES_IO(bytes.fromhex(text)) if binary else _STRING_IO(text)
    buffer.seek(position)
    return buffer


def _decimal(payload: object) -> decimal.Decimal:
    text = _text(payload)
    if len(text) > MAX_DECIMAL_TEXT:
        raise ProtocolError("malformed value")
    return _DECIMAL(text)


StdlibDecoder = Callable[[object, Callable[[object], object]], object]
_STDLIB_DECODERS: dict[str, StdlibDecoder] = {
    "r": lambda p, _: range(*_ints(p, 3)),
    "j": lambda p, _: complex(*_floats(p)),
    "B": lambda p, _: bytearray.fromhex(_text(p)),
    "D": lambda p, _: _decimal(p),
    "Q": lambda p, _: _FRACTION(*_ints(p, 2)),
    "q": _deque,
    "O": lambda p, item: _ORDERED(_pairs(p, item)),
    "C": lambda p, item: _COUNTER(dict(_pairs(p, item))),
    "dd": lambda p, item: _DEFAULT(None, _pairs(p, item)),
    "K": lambda p, item: dict.fromkeys(_hashable(item(x)) for x in _items(p)).keys(),
    "V": lambda p, item: dict(enumerate(item(x) for x in _items(p))).values(),
    "I": lambda p, item: dict(_pairs(p, item)).items(),
    "dt": lambda p, _: _DATETIME.fromisoformat(_text(p)),
    "da": lambda p, _: _DATE.fromisoformat(_text(p)),
    "ti": lambda p, _: _TIME.fromisoformat(_text(p)),
    "td": lambda p, _: _TIMEDELTA(*_ints(p, 3)),
    "sio": lambda p, _: _buffer(p, binary=False),
    "bio": lambda p, _: _buffer(p, binary=True),
}
