"""Admission and the runtime guard inside a real memory cgroup.

The worker is moved into a fresh cgroup with a no-swap limit. A low limit must refuse
the request with 503 and a record naming `self` as the deciding scope; a balloon
process in the same cgroup, started mid-generation, must trip the runtime guard.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable

import pytest

from tests.guest.worker.cgroup_helper import memory_cgroup
from tests.guest.worker.conftest import MODEL_ID, Worker

MiB = 1 << 20
EOS = "1021"
SHORT = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


@pytest.mark.integration
def test_low_cgroup_limit_refuses_with_scope_self(worker_factory: Callable[..., Worker]) -> None:
    worker = worker_factory("--request-floor", str(64 * MiB), "--runtime-guard", str(8 * MiB))
    with worker.client() as c:
        assert c.post("/v1/chat/completions", json=SHORT).status_code == 200
    with memory_cgroup(48 * MiB) as group:
        group.add(worker.pid)
        with worker.client() as c:
            r = c.post("/v1/chat/completions", json=SHORT)
            assert c.get("/health").status_code == 200
        assert r.status_code == 503
        assert r.json()["error"]["code"] == "insufficient_memory_headroom"
        refused = worker.records()[-1]
        assert refused["admission"] == "refused"
        assert refused["outcome"] == "refused_headroom"
        assert refused["deciding_scope"] == "self"
        assert refused["headroom_bytes"] <= 48 * MiB
        assert refused["need_bytes"] + refused["floor_bytes"] > refused["headroom_bytes"]
        assert refused["completion_tokens"] == 0
    # back in its own cgroup, the same request is admitted again
    with worker.client() as c:
        assert c.post("/v1/chat/completions", json=SHORT).status_code == 200
    assert worker.records()[-1]["admission"] == "admitted"


BALLOON = """
import sys, time
open(sys.argv[1], "w").write(str(__import__("os").getpid()))
block = b"x" * int(sys.argv[2])
print("full", flush=True)
time.sleep(60)
"""


@pytest.mark.integration
def test_guard_cancels_when_headroom_drops_mid_generation(
    worker_factory: Callable[..., Worker],
) -> None:
    worker = worker_factory(
        "--context", "16384", "--request-floor", "0", "--runtime-guard", str(256 * MiB)
    )
    body = {
        **SHORT,
        "max_tokens": 16000,
        "logit_bias": {EOS: -100},
        "stream": True,
    }
    with memory_cgroup(1024 * MiB) as group:
        group.add(worker.pid)
        lines: list[str] = []
        started = threading.Event()

        def consume() -> None:
            with worker.client() as c, c.stream("POST", "/v1/chat/completions", json=body) as r:
                for line in r.iter_lines():
                    lines.append(line)
                    if len(lines) > 4:
                        started.set()
            started.set()

        reader = threading.Thread(target=consume)
        reader.start()
        assert started.wait(30)
        balloon = subprocess.Popen(
            [sys.executable, "-c", BALLOON, str(group.path / "cgroup.procs"), str(900 * MiB)],
            stdout=subprocess.PIPE,
        )
        try:
            reader.join(60)
            assert not reader.is_alive()
        finally:
            balloon.kill()
            balloon.wait()
        events = [json.loads(x[6:]) for x in lines if x.startswith("data: {")]
        assert events[-1]["error"]["code"] == "memory_pressure"
        record = worker.records()[-1]
        assert record["outcome"] == "cancelled_memory_pressure"
        assert record["admission"] == "admitted"
        assert 0 < record["completion_tokens"] < 16000
        assert record["min_headroom_bytes"] < 256 * MiB
    with worker.client() as c:
        assert c.post("/v1/chat/completions", json=SHORT).status_code == 200
