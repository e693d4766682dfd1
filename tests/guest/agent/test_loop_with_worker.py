"""The agent loop driving the real worker (tiny model, llama.cpp) on the host, no VM."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from guest.agent.loop import AgentLimits, AgentRun, run_agent
from guest.agent.policy import ModelPolicy
from guest.tools.registry import ToolSet
from guest.tools.sandbox import finish
from host.model.convert import convert
from host.model.synth import synthesize_tiny
from receipts.records.agent import AGENT_FAILURES
from tests.guest.agent.identity import HARNESS_LOOP
from tests.guest.support_sandbox import host_sandbox
from tests.guest.support_tasks import scratch, task_copy
from tests.guest.worker.conftest import MODEL_ID, Gguf, start_worker

__all__ = ["scratch"]


@pytest.mark.integration
def test_loop_drives_the_real_worker_to_a_closed_outcome(tmp_path: Path, scratch: Path) -> None:
    synthesize_tiny(tmp_path / "checkpoint")
    converted = convert(tmp_path / "checkpoint", tmp_path / "gguf", "f32")
    worker = start_worker(
        Gguf(converted.path, converted.sha256), tmp_path / "worker", "--context", "8192"
    )
    task, _task_dir, workspace = task_copy("py-one-line-fix", scratch)

    async def drive() -> AgentRun:
        policy = ModelPolicy(
            "http://worker",
            MODEL_ID,
            uds=str(worker.socket),
            max_tokens=48,
            temperature=0.0,
            seed=0,
            request_timeout_s=120,
        )
        try:
            with (
                host_sandbox(workspace) as sandbox,
                ToolSet(
                    workspace, list(task.tests.command), [], "approve_all", sandbox=sandbox
                ) as tools,
            ):
                limits = AgentLimits(4, 4, 3, 200_000, 300)
                return await run_agent(
                    task, tools, policy, limits, lambda: finish(sandbox), identity=HARNESS_LOOP
                )
        finally:
            await policy.aclose()

    try:
        run = asyncio.run(drive())
    finally:
        worker.stop()
    assert run.agent.category not in AGENT_FAILURES
    assert run.agent.turns >= 1
    records = worker.file_records()
    used = [turn for turn in run.turns if turn.request_index is not None]
    assert len(records) == len(used)
    for turn in used:
        record = records[turn.request_index]  # type: ignore[index]
        assert (record["prompt_tokens"], record["completion_tokens"]) == (
            turn.prompt_tokens,
            turn.completion_tokens,
        )


@pytest.mark.integration
def test_tool_choice_required_makes_every_turn_a_call(tmp_path: Path, scratch: Path) -> None:
    """With `tool_choice: "required"` the worker's grammar admits only a tool call, so a
    model that would answer in text (random weights) still takes every turn up to the
    budget, and the record names the policy `model_tool_required`. This is how the
    real-size qwen4b trial measures several turns (docs/qwen4b-memory.md). Mutation
    control: ModelPolicy sending "auto" whatever it was given makes the tiny model answer
    in text and end early (fewer turns, a text turn): this test fails."""
    synthesize_tiny(tmp_path / "checkpoint")
    converted = convert(tmp_path / "checkpoint", tmp_path / "gguf", "f32")
    worker = start_worker(
        Gguf(converted.path, converted.sha256), tmp_path / "worker", "--context", "8192"
    )
    task, _task_dir, workspace = task_copy("py-one-line-fix", scratch)

    async def drive() -> AgentRun:
        policy = ModelPolicy(
            "http://worker",
            MODEL_ID,
            uds=str(worker.socket),
            tool_choice="required",
            max_tokens=96,
            temperature=0.0,
            seed=0,
            request_timeout_s=120,
        )
        try:
            with (
                host_sandbox(workspace) as sandbox,
                ToolSet(
                    workspace, list(task.tests.command), [], "approve_all", sandbox=sandbox
                ) as tools,
            ):
                limits = AgentLimits(3, 3, 3, 200_000, 300)
                return await run_agent(
                    task, tools, policy, limits, lambda: finish(sandbox), identity=HARNESS_LOOP
                )
        finally:
            await policy.aclose()

    try:
        run = asyncio.run(drive())
    finally:
        worker.stop()
    assert run.agent.policy == "model_tool_required"
    assert [turn.kind for turn in run.turns] == ["tool_call"] * 3, [t.kind for t in run.turns]
    assert len(worker.file_records()) == 3
