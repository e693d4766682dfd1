"""The per-request records: one closed `WorkerRequestRecord` for every chat request.

Kept in memory for `GET /v1/harness/records` and, when a file is given, appended as
canonical JSON lines as each request ends, so a worker that dies still leaves what it
had recorded. No prompt or output text is ever part of a record. A connection the server
refused before any request on it reached the chat endpoint is one
`WorkerConnectionLine` in the same file (so both placements carry it back with the
request records); the host counts them into the worker record.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from receipts.canonical import canonical
from receipts.records.worker import ConnectionRefusal, WorkerConnectionLine, WorkerRequestRecord

MAX_RECORDS = 999_999


class RecordLog:
    def __init__(self, path: Path | None = None) -> None:
        self._lock = threading.Lock()
        self._next = 0
        self._records: dict[int, WorkerRequestRecord] = {}
        self._fd: int | None = None
        if path is not None:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

    def allocate(self) -> int:
        """The next request index (records may complete out of order)."""
        with self._lock:
            if self._next > MAX_RECORDS:
                raise OverflowError("record index exhausted")
            index = self._next
            self._next += 1
            return index

    def add(self, record: WorkerRequestRecord) -> WorkerRequestRecord:
        line = record.canonical_bytes() + b"\n"
        with self._lock:
            self._records[record.index] = record
            if self._fd is not None:
                os.write(self._fd, line)
        return record

    def refused(self, refusal: ConnectionRefusal) -> None:
        """Append one refused connection's line (server.py calls it on the event loop)."""
        line = WorkerConnectionLine(refusal=refusal).canonical_bytes() + b"\n"
        with self._lock:
            if self._fd is not None:
                os.write(self._fd, line)

    def snapshot(self) -> list[WorkerRequestRecord]:
        with self._lock:
            return [self._records[i] for i in sorted(self._records)]

    def document(self) -> bytes:
        """Canonical JSON of every record so far, in index order."""
        return canonical({"records": [r.to_json() for r in self.snapshot()]})

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
