"""The chat endpoint's last line of defence: an exception nobody anticipated.

Two are known (a RecursionError in `check_schema`, a UnicodeEncodeError in the
tokenizer); unhandled, each would end as uvicorn's `text/plain` 500 with no request
record, leaving a gap in the record index. Both have their own closed answers; this
test covers the next
one, by making a real dependency of the endpoint (the tool preparer, on a real tiny
model) raise, in process, and checks the answer is a JSON 500 with a record.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from guest.worker.app import ApiConfig, ChatEndpoint, build_app
from guest.worker.constraint import ConstraintFactory
from guest.worker.engine import Engine, EngineConfig
from guest.worker.loader import LoadOptions, load_model
from guest.worker.records import RecordLog
from guest.worker.schema_grammar import Limits
from guest.worker.toolprep import PreparedTools, ToolRequest
from tests.guest.worker.conftest import READ_TOOL, Gguf
from tests.guest.worker.test_api_errors import GOOD

pytestmark = pytest.mark.integration


async def test_an_unexpected_exception_is_a_recorded_json_500(
    tiny_gguf: Gguf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = load_model(tiny_gguf.path, tiny_gguf.sha256, LoadOptions(1024, 1))
    factory = ConstraintFactory(model.vocab, model.n_vocab, "llguidance")
    engine = Engine(model, EngineConfig(0, 0, 8), factory)
    records = RecordLog(tmp_path / "records.jsonl")
    chat = ChatEndpoint(engine, ApiConfig("tiny", 60.0, 4, Limits()), records)

    original = chat.tools.prepare

    def boom(request: ToolRequest) -> PreparedTools:
        if request.tools:
            raise ZeroDivisionError
        return original(request)

    monkeypatch.setattr(chat.tools, "prepare", boom)
    transport = httpx2.ASGITransport(app=build_app(chat))
    async with httpx2.AsyncClient(transport=transport, base_url="http://w") as client:
        r = await client.post("/v1/chat/completions", json={**GOOD, "tools": [READ_TOOL]})
        ok = await client.post("/v1/chat/completions", json=GOOD)
    chat.prep.shutdown(wait=True)
    chat.executor.shutdown(wait=True)
    assert r.status_code == 500
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"]["code"] == "internal_error"
    assert ok.status_code == 200
    snapshot = [rec.to_json() for rec in records.snapshot()]
    assert [rec["index"] for rec in snapshot] == [0, 1]
    assert (snapshot[0]["outcome"], snapshot[0]["error_code"]) == ("error", "internal_error")
    records.close()


async def test_an_exception_in_another_route_is_a_json_500(
    tiny_gguf: Gguf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = load_model(tiny_gguf.path, tiny_gguf.sha256, LoadOptions(1024, 1))
    factory = ConstraintFactory(model.vocab, model.n_vocab, "llguidance")
    engine = Engine(model, EngineConfig(0, 0, 8), factory)
    records = RecordLog(None)
    chat = ChatEndpoint(engine, ApiConfig("tiny", 60.0, 4, Limits()), records)

    def broken() -> bytes:
        raise ZeroDivisionError

    monkeypatch.setattr(records, "document", broken)
    transport = httpx2.ASGITransport(app=build_app(chat), raise_app_exceptions=False)
    async with httpx2.AsyncClient(transport=transport, base_url="http://w") as client:
        r = await client.get("/v1/harness/records")
        health = await client.get("/health")
    chat.prep.shutdown(wait=True)
    chat.executor.shutdown(wait=True)
    assert r.status_code == 500
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"]["code"] == "internal_error"
    assert health.status_code == 200
