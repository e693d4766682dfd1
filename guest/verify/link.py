"""The judge's end of the split judge's wire: requests, replies, the tests' callbacks.

It knows the wire (guest/verify/wire.py) and nothing of proxies: what an `H` handle from
the solution becomes in the judge, and which judge values go back by reference, is the
`Handles` object's business (guest/verify/proxies.py). A reply that breaks a rule closes
the link for good: the call that got it and every later one raise `SplitJudgeError`.

Exception arguments from the solution cross as copied values only: a handle there is a
broken rule (an exception carrying an object of the solution's would let that object
answer `err.exception.args[0] == "message"` for itself).
"""

from __future__ import annotations

import builtins
import socket
from collections.abc import Callable
from typing import Any, Protocol

from guest.verify.wire import (
    EXCEPTION_NAMES,
    MAX_NESTING,
    Encoded,
    ProtocolError,
    checked_id,
    decode,
    encode,
    receive,
    send,
)


class SplitJudgeError(BaseException):
    """The solution's process is gone, broke the wire, or sent a value the judge refuses.

    A BaseException, not an Exception: `assertRaises(Exception)` and `pytest.raises(
    Exception)` must never count the judge's refusal (or a solution that killed its own
    process on purpose) as the exception a test expected; unittest and pytest record it
    as an error."""


class Handles(Protocol):
    def proxy(self, data: Encoded) -> object:
        """What an `H` handle of the solution's is in the judge."""

    def reference(self, value: object) -> Encoded | None:
        """The wire form of a judge value the wire does not copy, or None."""


def _refuse(data: Encoded) -> object:
    raise ProtocolError("not a value")


def _refuse_out(value: object) -> Encoded:
    raise ProtocolError("not a value")


class Link:
    def __init__(self, sock: socket.socket | None, handles: Handles) -> None:
        self.sock = sock
        self.handles = handles
        self.callbacks: dict[int, Callable[..., object]] = {}
        self.callback_ids: dict[int, int] = {}
        self.nesting = 0

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
        args = decode(args_data, _refuse)
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
        if self.handles.reference(cls) is not None:
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
                items.append(encode(arg, _refuse_out))
            except (ProtocolError, RecursionError):
                items.append(["s", "<judge object>"])
        return ["t", items]

    # -- values ----------------------------------------------------------------------
    def encode(self, value: object) -> Encoded:
        return encode(value, self._handle_out)

    def _handle_out(self, value: object) -> Encoded:
        reference = self.handles.reference(value)
        if reference is not None:
            return reference
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
        return self.handles.proxy(data)


class _NoHandles:
    def proxy(self, data: Encoded) -> object:
        raise ProtocolError("no solution is served")

    def reference(self, value: object) -> Encoded | None:
        return None


LINK = Link(None, _NoHandles())
"""The judge's one link (tests run one at a time in this process); judgeside.main and
tests replace it, so users look it up as `link.LINK` at each call."""
