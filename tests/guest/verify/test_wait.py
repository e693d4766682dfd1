"""A verifier started before the agent finished reads nothing until the host says the
carried workspace is whole (guest/verify/__main__.py `--wait-for`)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from guest.verify.__main__ import WAIT_EXPIRED, main, wait_for
from tests.guest.support_tasks import TASKS


def test_the_wait_ends_when_the_mark_appears(tmp_path: Path) -> None:
    ready = tmp_path / "carried.ready"
    timer = threading.Timer(0.3, ready.touch)
    started = time.monotonic()
    timer.start()
    try:
        assert wait_for(ready, 30.0)
    finally:
        timer.cancel()
    assert 0.3 <= time.monotonic() - started < 5.0


def test_the_wait_is_bounded(tmp_path: Path) -> None:
    started = time.monotonic()
    assert not wait_for(tmp_path / "never", 0.2)
    assert time.monotonic() - started >= 0.2


def test_a_workspace_never_marked_is_never_verified(tmp_path: Path) -> None:
    # the workspace exists, but without the mark the verifier must not read it
    records = tmp_path / "verification.json"
    status = main([
        "--task-dir", str(TASKS / "py-one-line-fix"),
        "--workspace", str(TASKS / "py-one-line-fix" / "workspace"),
        "--scratch", str(tmp_path / "verify"),
        "--records", str(records),
        "--wait-for", str(tmp_path / "carried.ready"),
        "--wait-s", "0.2",
    ])  # fmt: skip
    assert status == WAIT_EXPIRED
    assert not records.exists() and not (tmp_path / "verify").exists()
