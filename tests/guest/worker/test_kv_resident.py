"""The premise of the worker's admission estimate: the KV cache is resident after load.

`Engine.need_bytes` does not count a request's KV cache, because llama.cpp allocates
and clears the whole context's cache when the model is loaded. If a llama.cpp upgrade
made the cache lazy, admission would under-count every request; this test is the
alarm. It loads the tiny model at a context whose cache (64 MiB) dwarfs the noise, in
a fresh process, through the worker's own loader, and reads the process's anonymous
memory before and after.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from tests.guest.worker.conftest import MODEL_ID, REPO, Gguf, Worker

CONTEXT = 131_072

PROBE = """
import json, sys
from pathlib import Path
from guest.worker.loader import LoadOptions, load_model

def anon():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("no RssAnon")

before = anon()
model = load_model(Path(sys.argv[1]), sys.argv[2], LoadOptions(int(sys.argv[3]), 1))
after = anon()
print(json.dumps({"grew": after - before, "kv": model.kv_bytes_per_token * model.n_ctx}))
"""


def test_the_whole_context_kv_cache_is_resident_right_after_load(tiny_gguf: Gguf) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tiny_gguf.path), tiny_gguf.sha256, str(CONTEXT)],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=120,
    )
    figures = json.loads(out.stdout.splitlines()[-1])
    assert figures["kv"] == 64 << 20  # 2 layers x 2 KV heads x (32 + 32) x 2 bytes x 128K
    assert figures["grew"] >= figures["kv"]


def test_a_request_needs_the_same_bytes_whatever_its_length(
    worker_factory: Callable[..., Worker],
) -> None:
    """Admission asks for what a request adds beyond the loaded model: the logits copy
    and scratch, not a second KV cache for its tokens (already resident, see above)."""
    worker = worker_factory("--context", "16384", "--request-floor", "0")
    short = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    long = {**short, "messages": [{"role": "user", "content": "a b c d " * 1000}]}
    with worker.client() as c:
        assert c.post("/v1/chat/completions", json=short).status_code == 200
        assert c.post("/v1/chat/completions", json=long).status_code == 200
    records = worker.records()
    assert records[1]["prompt_tokens"] > records[0]["prompt_tokens"] + 1000
    assert [r["need_bytes"] for r in records] == [8 * 1024 + (16 << 20)] * 2
