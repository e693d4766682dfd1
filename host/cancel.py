"""One cancellation token for a trial's blocking work (hashing, conversion, image build).

Why: a stop signal (SIGINT, SIGTERM: how Slurm, GitHub Actions and systemd end a job)
cancels the trial's asyncio task, and that reaches every `await`. It cannot reach work
running in a thread (`asyncio.to_thread`): a thread cannot be interrupted, so a GGUF
being hashed or converted would run on for minutes past the scheduler's grace period.
So the long loops in such work ask `check()` once per chunk (each chunk is at most a
few MiB: well under a second), and a cancelled token makes them raise `Cancelled`.

The token lives in a context variable, as the progress reporter does
(host/model/progress.py): library code needs no extra parameter, `asyncio.to_thread`
copies the context into its thread, and code run outside a trial sees a token that
is never cancelled. `Cancelled` is a BaseException, like KeyboardInterrupt, so the
`except Exception` that turns a failure into a closed category does not mistake a
cancel for a failure of the thing being checked; `finally` blocks (staging
directories) still run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

POLL_S = 0.2
"""How often a wait on a child process looks at the token (well inside the 1 s bound)."""
THREAD_STOP_S = 5.0
"""How long a cancelled `in_thread` waits for its thread to notice (it should take < 1 s)."""


class Cancelled(BaseException):
    """The trial was cancelled while this work ran; its partial results are void."""


class CancelToken:
    """Set once, by the signal handler's side; read by every long loop."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise `Cancelled` if the token is cancelled (call once per chunk of work)."""
        if self._event.is_set():
            raise Cancelled


_NEVER = CancelToken()
_CURRENT: ContextVar[CancelToken | None] = ContextVar("harness_cancel_token", default=None)


def current() -> CancelToken:
    """The token of the work running now; one that is never cancelled outside a trial."""
    return _CURRENT.get() or _NEVER


def check() -> None:
    """`current().check()`: the one line a long loop adds."""
    current().check()


@contextlib.contextmanager
def cancel_scope(token: CancelToken) -> Iterator[CancelToken]:
    """Make `token` current for the block (and every thread `asyncio.to_thread` starts in it)."""
    reset = _CURRENT.set(token)
    try:
        yield token
    finally:
        _CURRENT.reset(reset)


def kill_tree(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child and, when it leads its own process group (started with
    `start_new_session=True`), everything in that group: a build tool's own children
    (apt under mmdebstrap, the compiler under pip) must not compile on as orphans."""
    try:
        if os.getpgid(process.pid) == process.pid:
            os.killpg(process.pid, signal.SIGKILL)
            return
    except ProcessLookupError:
        return
    process.kill()


def communicate(process: subprocess.Popen[bytes], timeout_s: float) -> tuple[bytes, bytes]:
    """`process.communicate(timeout=timeout_s)`, but the child (and its process group,
    see kill_tree) is killed and `Cancelled` raised within POLL_S of the current token
    being cancelled (a build tool can run for minutes). On the timeout the child is
    killed too, and TimeoutExpired propagates."""
    token = current()
    waited = 0.0
    while True:
        try:
            stdout, stderr = process.communicate(timeout=min(POLL_S, max(timeout_s - waited, 0.0)))
        except subprocess.TimeoutExpired:
            waited += POLL_S
            if token.cancelled or waited >= timeout_s:
                kill_tree(process)
                process.communicate()
                if token.cancelled:
                    raise Cancelled from None
                raise
            continue
        return stdout or b"", stderr or b""


async def in_thread(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`asyncio.to_thread`, for blocking work a cancel must stop and wait for.

    Cancelling the awaiting task cancels the current token and waits (up to
    THREAD_STOP_S) for the thread to see it, then lets CancelledError go on. Why wait:
    with plain `to_thread` the await ends at once but the thread runs on, so teardown
    would remove a scratch directory the thread is still writing into, and the event
    loop's shutdown would block on the thread anyway."""
    token = current()
    work = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        token.cancel()
        await asyncio.wait({work}, timeout=THREAD_STOP_S)
        if work.done() and not work.cancelled():
            work.exception()  # retrieved: the thread's `Cancelled` is the expected end
        raise
