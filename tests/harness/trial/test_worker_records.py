"""The worker's ready line and request records as the host reads them (harness/trial/
worker.py, hostworker.py, guestworker.py). No VM, no model: the inputs are the bytes
the worker writes and damaged copies of them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

import pytest

from harness.trial.guestrecords import GuestOutputInvalid
from harness.trial.guestworker import GuestWorkerProcess, collect, guest_worker_record
from harness.trial.hostworker import read_requests
from harness.trial.worker import parse_ready_line
from receipts.canonical import canonical
from tests.receipts.builders import accepted_model_trial


def test_the_workers_own_ready_line_is_read() -> None:
    """The positive control: what guest/worker/__main__.py prints, for a port and a socket."""
    line = parse_ready_line(canonical({"ready": True, "port": 8080, "model": "gguf-1"}) + b"\n")
    assert line is not None and line.port == 8080
    line = parse_ready_line(canonical({"ready": True, "port": None, "model": "gguf-1"}))
    assert line is not None and line.port is None


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b'{"ready":true,"port":80',
        b'{"ready":false,"ready":true,"port":8080}',  # json.loads: the last `ready` wins
        b'{"ready":true,"port":NaN}',
        b'{"ready":1,"port":8080}',  # truthy is not `true`
        b'{"ready":"yes","port":8080}',
        b'{"ready":true,"port":"8080"}',
        b'{"ready":true,"port":true}',
        b"[true]",  # json.loads then .get: AttributeError on the host path
        b'"ready"',
    ],
)
def test_anything_but_the_ready_line_is_not_ready(line: bytes) -> None:
    assert parse_ready_line(line) is None


def _lines() -> bytes:
    return b"".join(r.canonical_bytes() + b"\n" for r in accepted_model_trial().worker_requests)


def test_host_request_records_are_read_or_refused_whole(tmp_path: Path) -> None:
    records = tmp_path / "worker-records.jsonl"
    assert read_requests(records) == ()  # no file: the worker never answered a request
    records.write_bytes(_lines())
    assert read_requests(records) == accepted_model_trial().worker_requests
    records.write_bytes(_lines() + b'{"index":2,"index":2}\n')
    with pytest.raises(GuestOutputInvalid) as info:
        read_requests(records)
    assert info.value.kind == "duplicate_key"


def _guest_worker(raw: bytes | None) -> GuestWorkerProcess:
    process = cast(Any, object())  # collect() and the record never touch the channel
    return GuestWorkerProcess(process, "a" * 64, time.monotonic(), pid=7, records_raw=raw)


def test_guest_request_records_as_written_are_counted() -> None:
    worker = _guest_worker(_lines())
    requests = collect(worker)
    assert requests == accepted_model_trial().worker_requests
    record = guest_worker_record(worker, requests)
    assert (record.category, record.requests) == ("ok", len(requests))


def test_guest_request_records_that_do_not_read_are_records_invalid() -> None:
    """One truncated line (a worker killed mid-write, or a guest that wrote there): the
    stage says records_invalid and counts nothing, rather than crashing the trial
    (failed_internal) or counting the lines that did parse."""
    worker = _guest_worker(_lines()[:-7])
    requests = collect(worker)
    assert requests == () and worker.records_invalid
    record = guest_worker_record(worker, requests)
    assert (record.category, record.requests, record.prompt_tokens_total) == (
        "records_invalid",
        0,
        0,
    )
    worker.exited_early = True  # records that do not read are named before the exit
    assert guest_worker_record(worker, requests).category == "records_invalid"
    worker.oom_kills = 1  # the budget that ended it names the failure first
    assert guest_worker_record(worker, requests).category == "oom_killed"
