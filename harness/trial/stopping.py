"""Stop signals as a trial receives them: which one cancelled which stage, and hurry.

The first signal cancels the stage that is running: its task gets CancelledError at its
current await, and blocking work in threads sees the token within a second. Teardown
and bundling then run as for a failed stage, so every owned resource is released with
its receipt and a valid receipt names the stage. A signal after the last stage ended
cancels nothing (the evidence is complete). A second signal means hurry: release,
bundle, exit; the host state is not read again (its facets are recorded `unread`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from host.cancel import Cancelled, CancelToken
from receipts.records.trial import CancelSignal, Stage


class StopSignals:
    def __init__(self) -> None:
        self.token = CancelToken()
        """Cancelled with the trial: threads doing its blocking work stop (host/cancel.py)."""
        self.first: CancelSignal | None = None
        """The first stop signal received, whenever it came."""
        self.cancelling: CancelSignal | None = None
        """The stop signal that cancelled a stage (None when it came after the last one)."""
        self.cancelled_in: Stage | None = None
        """The stage that signal cancelled; its record and every later one's are void."""
        self.hurry = False
        """A second stop signal, or the grace period running out."""
        self._stages: asyncio.Future[None] | None = None

    def receive(self, signal: CancelSignal) -> None:
        """A stop signal arrived (the CLI's handler calls this on the event loop)."""
        if self.first is not None:
            self.hurry = True
            return
        self.first = signal
        task = self._stages
        if task is not None and task.done():
            return  # the stages are over: teardown and bundling are release and write only
        self.cancelling = signal
        self.token.cancel()
        if task is not None:
            task.cancel()

    async def run(self, stages: Coroutine[Any, Any, None], running: Callable[[], Stage]) -> None:
        """The stages as a task a signal can cancel. When a stop signal ended them,
        whatever the cancel made the running stage raise (CancelledError at an await,
        `Cancelled` from a thread, or an error of a connection cut short), the cancel is
        what ended the trial: the stage `running()` names then is recorded as cancelled."""
        self._stages = asyncio.ensure_future(stages)
        if self.cancelling is not None:  # the signal came before the first stage began
            self._stages.cancel()
        try:
            await self._stages
        except (asyncio.CancelledError, Cancelled, Exception):
            if self.cancelling is None:
                raise  # not a stop signal's doing
            self.cancelled_in = running()
