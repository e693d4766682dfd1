"""Real OpenCode (npm `opencode-linux-x64`, pinned) against `harness worker serve` with SmolLM2:
a read -> edit -> run-the-tests round trip, then a final answer.

OpenCode runs offline (FIELD-NOTES: models fetch off, a config file with an
`@ai-sdk/openai-compatible` provider). It always streams with `include_usage` and
`tool_choice: "auto"`, and needs a `finish_reason` on every stream. OpenCode has no
`run_tests` tool: the tests run through its `bash` tool.

What is forced, and why: SmolLM2-135M calls no tool on `auto`, so a relay
(relay.py) names the tool of each turn (`read`, `edit`, `bash`, then `none`) and caps
the tools' string arguments at 48 characters (greedy, it fills an `edit` string up to
the output limit). The model chooses every argument; OpenCode runs every call with its
own tools and sends the results back. Sampling is greedy through OpenCode's own agent
setting (`temperature: 0`), so the exchange is the same on every run. Whether SmolLM2's
arguments make sense (its paths are usually made up) is the model's quality, not this
test's subject: the test checks that each call was parsed and run by OpenCode and that
the conversation went on.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from host.agents.opencode import EXECUTABLE, PIN, default_root, ensure_opencode, entry_name
from tests.guest.worker.conftest import MODEL_ID, Gguf, start_worker
from tests.guest.worker.relay import ToolChoiceRelay

OPENCODE = default_root() / entry_name(PIN) / EXECUTABLE
"""The pinned executable, filled by `.ci/setup --guest-wheel` (`make setup-guest`, which
`make test` runs) through host/agents/opencode.py and re-hashed here before it runs."""

TURNS: list[Any] = [
    {"type": "function", "function": {"name": "read"}},
    {"type": "function", "function": {"name": "edit"}},
    {"type": "function", "function": {"name": "bash"}},
    "none",
]
DENIED = ("glob", "grep", "skill", "task", "todowrite", "webfetch", "write")
"""Tools this exchange does not use, denied to keep the prompt at ~3,000 tokens (all ten
measured 7,662, a 4-minute prefill for SmolLM2 on a loaded 2-core host)."""


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (ws / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    return ws


def _config(path: Path, port: int) -> None:
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "harness": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "harness",
                "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": "unused"},
                "models": {
                    MODEL_ID: {
                        "name": MODEL_ID,
                        "temperature": True,
                        "limit": {"context": 8192, "output": 256},
                    }
                },
            }
        },
        "permission": {"*": "allow", **dict.fromkeys(DENIED, "deny")},
        "agent": {"build": {"prompt": "You are a coding agent. Use the tools.", "temperature": 0}},
        "autoupdate": False,
        "share": "disabled",
    }
    path.write_text(json.dumps(config))


@pytest.mark.integration
def test_opencode_read_edit_run_tests_round_trip(smollm2_gguf: Gguf, tmp_path: Path) -> None:
    assert OPENCODE.exists(), "OpenCode is not in the cache: run `make setup-guest`"
    opencode = ensure_opencode().path  # adopts the entry only if it hashes to the pin
    worker = start_worker(
        smollm2_gguf, tmp_path / "worker", "--context", "8192", port=True, command="cli"
    )
    try:
        assert worker.port is not None
        with ToolChoiceRelay(worker.port, TURNS, max_string_chars=48) as relay:
            _config(tmp_path / "opencode.json", relay.port)
            home = tmp_path / "home"
            home.mkdir()
            env = {
                "PATH": os.environ["PATH"],
                "HOME": str(home),
                "OPENCODE_CONFIG": str(tmp_path / "opencode.json"),
                "OPENCODE_DISABLE_MODELS_FETCH": "1",
                "OPENCODE_DISABLE_AUTOUPDATE": "1",
            }
            prompt = (
                "Read the file calc.py. In calc.py replace `return a - b` with "
                "`return a + b`. Then run: python3 -m pytest -q"
            )
            done = subprocess.run(
                [str(opencode), "run", "--format", "json", "--title", "t",
                 "-m", f"harness/{MODEL_ID}", prompt],
                cwd=_workspace(tmp_path), env=env, capture_output=True, text=True,
                timeout=900, check=False,
            )  # fmt: skip
        records = worker.records()
    finally:
        worker.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert not [e for e in events if e.get("type") == "error"], done.stdout[-2000:]
    uses = [e["part"] for e in events if e.get("type") == "tool_use"]
    # each forced call was parsed from the stream and run by OpenCode's own tool
    assert [u["tool"] for u in uses] == ["read", "edit", "bash"]
    assert all(u["state"]["status"] in ("completed", "error") for u in uses), uses
    texts = [e["part"]["text"] for e in events if e.get("type") == "text"]
    assert texts and texts[-1].strip()
    # the conversation carried every call and its result back to the worker
    assert len(relay.seen) == 4
    assert all(r["temperature"] == 0 for r in relay.seen)  # greedy, by OpenCode's own config
    last = relay.seen[-1]["messages"]
    roles = [m["role"] for m in last]
    assert roles[-6:] == ["assistant", "tool", "assistant", "tool", "assistant", "tool"]
    assert all(m.get("tool_calls") for m in last if m["role"] == "assistant")
    assert {m["tool_call_id"] for m in last if m["role"] == "tool"} == {
        c["id"] for m in last if m["role"] == "assistant" for c in m["tool_calls"]
    }
    chat = [r for r in records if r["tools_rendering"] != "none"]
    assert [r["outcome"] for r in chat] == ["tool_calls", "tool_calls", "tool_calls", "stop"]
    assert all(r["tools_rendering"] == "generic" and r["stream"] for r in chat)
    assert all(r["cached_prompt_tokens"] > 0 for r in chat[1:])  # each turn reuses the last
