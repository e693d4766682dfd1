"""Fixtures: the tiny GGUF (synthesized once per session) and real worker processes.

Workers run as `python -m guest.worker serve` subprocesses on a Unix socket (and
127.0.0.1 when asked), with one llama.cpp thread, exactly as the orchestrator runs them.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest

from guest.worker.app import ApiConfig, ChatEndpoint
from guest.worker.constraint import ConstraintFactory
from guest.worker.engine import Engine, EngineConfig
from guest.worker.loader import LoadOptions, load_model
from guest.worker.records import RecordLog
from guest.worker.schema_grammar import Limits
from harness.trial.guestrecords import connection_refusals
from host.model.convert import convert
from host.model.synth import synthesize_tiny
from receipts.records.worker import ConnectionRefusals, WorkerConnectionLine

MODEL_ID = "tiny"
REPO = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Gguf:
    path: Path
    sha256: str


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Gguf:
    root = tmp_path_factory.mktemp("worker-model")
    synthesize_tiny(root / "checkpoint")
    result = convert(root / "checkpoint", root / "gguf", "f32")
    assert hashlib.sha256(result.path.read_bytes()).hexdigest() == result.sha256
    return Gguf(result.path, result.sha256)


ENGINE_FLOOR_BYTES = 3
ENGINE_GUARD_BYTES = 5
"""The in-process engine's request floor and runtime guard: distinct and tiny (they
never refuse or cancel anything), so a record that swapped or dropped them shows."""


@pytest.fixture(scope="session")
def tiny_engine(tiny_gguf: Gguf) -> Engine:
    """The engine a worker builds, on the tiny model, in this process: 32,768 tokens of
    context (the tiny model decodes about 2,700 tokens a second here, so a request can
    still be running when a test cuts it), one thread, llguidance, 8 tokens when a
    request names no maximum."""
    model = load_model(tiny_gguf.path, tiny_gguf.sha256, LoadOptions(32768, 1))
    factory = ConstraintFactory(model.vocab, model.n_vocab, "llguidance", min_entries=4)
    return Engine(model, EngineConfig(ENGINE_FLOOR_BYTES, ENGINE_GUARD_BYTES, 8), factory)


@pytest.fixture
def endpoint(tiny_engine: Engine) -> Iterator[Callable[..., ChatEndpoint]]:
    """`ChatEndpoint`s on the in-process engine: `endpoint(queue_depth=0, ...)` with
    `ApiConfig`'s fields as keywords; their threads are joined at teardown."""
    made: list[ChatEndpoint] = []

    def make(**overrides: Any) -> ChatEndpoint:
        fields: dict[str, Any] = {
            "model_id": MODEL_ID, "deadline_s": 60.0, "queue_depth": 4, "limits": Limits(),
            **overrides,
        }  # fmt: skip
        chat = ChatEndpoint(tiny_engine, ApiConfig(**fields), RecordLog(None))
        made.append(chat)
        return chat

    yield make
    for chat in made:
        chat.prep.shutdown(wait=True)
        chat.executor.shutdown(wait=True)
        assert chat.pending == 0, "a request's queue slot was never given back"


SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
    "Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""SmolLM2-135M-Instruct's chat template, as its GGUF carries it: it renders `role` and
`content` only, never `tools`, `tool_calls` or a tool result's meaning."""


@pytest.fixture(scope="session")
def plain_gguf(tmp_path_factory: pytest.TempPathFactory) -> Gguf:
    """The tiny model's weights with SmolLM2's tool-blind template: what `make trial`
    serves, at the tiny model's speed."""
    root = tmp_path_factory.mktemp("worker-model-plain")
    synthesize_tiny(root / "checkpoint")
    config = root / "checkpoint" / "tokenizer_config.json"
    data = json.loads(config.read_text())
    data["chat_template"] = SMOLLM2_TEMPLATE
    config.write_text(json.dumps(data))
    result = convert(root / "checkpoint", root / "gguf", "f32")
    return Gguf(result.path, result.sha256)


@pytest.fixture(scope="session")
def smollm2_gguf() -> Gguf:
    """SmolLM2-135M-Instruct from the harness cache (`make setup` fills it; adopted, no
    network): the real model whose template ignores tools."""
    from harness.profiles import load_profile
    from harness.trial.modelstage import prepare

    prepared = prepare(load_profile("smollm2"), Path.home() / ".cache" / "harness")
    assert prepared.gguf is not None, prepared.record.category
    assert prepared.record.gguf_sha256 is not None
    return Gguf(prepared.gguf, prepared.record.gguf_sha256)


@dataclass
class Worker:
    """A running worker process and clients for it."""

    proc: subprocess.Popen[bytes]
    socket: Path
    records_file: Path
    port: int | None
    stderr_file: Path
    clients: list[httpx2.Client] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def client(self, timeout: float = 60.0) -> httpx2.Client:
        c = httpx2.Client(
            transport=httpx2.HTTPTransport(uds=str(self.socket)),
            base_url="http://worker",
            timeout=timeout,
        )
        self.clients.append(c)
        return c

    def records(self) -> list[dict[str, Any]]:
        with self.client() as c:
            response = c.get("/v1/harness/records")
        assert response.status_code == 200
        records: list[dict[str, Any]] = response.json()["records"]
        return records

    def file_lines(self) -> list[dict[str, Any]]:
        text = self.records_file.read_text() if self.records_file.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line.endswith("}")]

    def file_records(self) -> list[dict[str, Any]]:
        """The request records of the records file (its connection lines left out)."""
        return [r for r in self.file_lines() if r["schema"] != WorkerConnectionLine.schema_id()]

    def refusals(self) -> ConnectionRefusals:
        """The refused connections, counted from the file as the host counts them."""
        data = self.records_file.read_bytes() if self.records_file.exists() else b""
        return connection_refusals(data)

    def stop(self) -> int:
        for c in self.clients:
            c.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start_worker(
    gguf: Gguf, directory: Path, *extra: str, port: bool = False, command: str = "module"
) -> Worker:
    """Start a worker and wait for its ready line (30 s at most). *command*: `module`
    (`python -m guest.worker`, as the guest runs it) or `cli` (`harness worker`)."""
    directory.mkdir(parents=True, exist_ok=True)
    sock = directory / "api.sock"
    records = directory / "records.jsonl"
    stderr_file = directory / "stderr.log"
    entry = [sys.executable, "-m", "guest.worker"]
    if command == "cli":
        entry = [str(Path(sys.executable).with_name("harness")), "worker"]
    args = [
        *entry, "serve",
        "--model", str(gguf.path), "--sha256", gguf.sha256,
        "--socket", str(sock), "--threads", "1", "--model-id", MODEL_ID,
        "--records", str(records), *extra,
    ]  # fmt: skip
    if port:
        args += ["--port", "0"]
    with stderr_file.open("wb") as err:
        proc = subprocess.Popen(
            args,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=err,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    line = b""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line or proc.poll() is not None:
            break
    if not line:
        proc.kill()
        proc.wait()
        raise AssertionError("worker did not become ready")
    ready = json.loads(line)
    assert ready["ready"] is True
    return Worker(proc, sock, records, ready["port"], stderr_file)


@pytest.fixture
def worker_factory(tiny_gguf: Gguf, tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    """Start workers with extra CLI arguments; all are stopped at teardown."""
    started: list[Worker] = []
    counter = iter(range(100))

    def make(*extra: str, port: bool = False) -> Worker:
        w = start_worker(tiny_gguf, tmp_path / f"w{next(counter)}", *extra, port=port)
        started.append(w)
        return w

    yield make
    for w in started:
        w.stop()


@pytest.fixture(scope="module")
def shared_worker(tiny_gguf: Gguf, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """One worker for the tests of a module that do not disturb it."""
    w = start_worker(tiny_gguf, tmp_path_factory.mktemp("shared"), "--context", "4096", port=True)
    yield w
    w.stop()


READ_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "read",
        "description": "Read a file",
        "parameters": {
            "type": "object",
            "properties": {
                "filePath": {"type": "string", "maxLength": 24},
                "offset": {"type": "integer", "minimum": 0, "maximum": 100000},
                "limit": {"type": "integer", "minimum": 1, "maximum": 2000},
            },
            "required": ["filePath"],
            "additionalProperties": False,
        },
    },
}
EDIT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "edit",
        "parameters": {
            "type": "object",
            "properties": {
                "filePath": {"type": "string", "minLength": 1, "maxLength": 16},
                "mode": {"enum": ["replace", "append", 3, None]},
                "lines": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": -40, "maximum": 7},
                    "minItems": 1,
                    "maxItems": 3,
                },
                "replaceAll": {"type": "boolean"},
                "ratio": {"type": "number"},
                "meta": {
                    "type": "object",
                    "properties": {"tag": {"type": ["string", "null"], "maxLength": 8}},
                    "required": ["tag"],
                },
            },
            "required": ["filePath", "lines"],
        },
    },
}
FINISH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {"name": "finish", "parameters": {"type": "object", "properties": {}}},
}
TOOLS = [READ_TOOL, EDIT_TOOL, FINISH_TOOL]
