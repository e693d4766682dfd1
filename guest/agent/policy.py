"""Who proposes the next tool call: a model behind an OpenAI-compatible endpoint, or a
fixed script. Both answer through the same `Reply`, so the loop, the tools, the jail
and the permissions are the same code whichever policy runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx

from receipts.canonical import canonical
from receipts.records.agent import InvalidCallCategory
from receipts.records.trial import Policy as PolicyName

ToolChoice = Literal["auto", "required"]
"""What the agent asks the worker: `auto` (text or a call, as OpenCode asks) or
`required` (a call every turn; recorded as the `model_tool_required` policy)."""

PolicyFailureCategory = Literal["worker_unreachable", "worker_error", "script_exhausted"]
Message = dict[str, Any]


@dataclass(frozen=True)
class ProposedCall:
    name: str
    arguments: str
    """The arguments exactly as proposed: a JSON string (validated by the tool set)."""


@dataclass(frozen=True)
class Reply:
    """One turn's answer. `call` None and `invalid` None: a plain text answer."""

    call: ProposedCall | None
    invalid: InvalidCallCategory | None
    prompt_tokens: int
    completion_tokens: int
    request_index: int | None


class ScriptError(ValueError):
    """A script file that is not a list of steps with string tool names."""


class PolicyFailure(Exception):
    """The policy could not answer at all; the loop ends with this category."""

    def __init__(self, category: PolicyFailureCategory) -> None:
        super().__init__(category)
        self.category: PolicyFailureCategory = category


class Policy(Protocol):
    name: PolicyName

    async def reply(self, messages: Sequence[Message], tools: Sequence[Message]) -> Reply: ...


class ScriptedPolicy:
    """Replays a fixed list of tool calls: `[{"tool": NAME, "arguments": {...}}, ...]`.

    `"arguments_raw": "<text>"` in place of `arguments` sends that text verbatim (to test
    the handling of invalid JSON). Exists to test the harness without a model; its
    records say `policy=scripted` and carry no worker request.
    """

    name: PolicyName = "scripted"

    def __init__(self, steps: Sequence[ProposedCall]) -> None:
        self._steps = list(steps)
        self._next = 0

    @property
    def steps(self) -> tuple[ProposedCall, ...]:
        return tuple(self._steps)

    @classmethod
    def from_file(cls, path: Path) -> ScriptedPolicy:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, list):
            raise ScriptError("a script is a JSON list of steps")
        steps = []
        for step in raw:
            if not isinstance(step, dict) or not isinstance(step.get("tool"), str):
                raise ScriptError("each step needs a string `tool`")
            if "arguments_raw" in step:
                arguments = str(step["arguments_raw"])
            else:
                arguments = canonical(step.get("arguments", {})).decode("utf-8")
            steps.append(ProposedCall(name=step["tool"], arguments=arguments))
        return cls(steps)

    async def reply(self, messages: Sequence[Message], tools: Sequence[Message]) -> Reply:
        if self._next >= len(self._steps):
            raise PolicyFailure("script_exhausted")
        step = self._steps[self._next]
        self._next += 1
        return Reply(
            call=step, invalid=None, prompt_tokens=0, completion_tokens=0, request_index=None
        )


def _usage(body: dict[str, Any]) -> tuple[int, int]:
    usage = body.get("usage")
    if not isinstance(usage, dict):
        raise PolicyFailure("worker_error")  # exact accounting needs the endpoint's counts
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not (isinstance(prompt, int) and isinstance(completion, int)) or min(prompt, completion) < 0:
        raise PolicyFailure("worker_error")
    return prompt, completion


def _parse_message(
    message: dict[str, Any],
) -> tuple[ProposedCall | None, InvalidCallCategory | None]:
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        return None, "malformed_tool_call"
    if len(calls) > 1:
        return None, "multiple_tool_calls"
    if not calls:
        return None, None
    function = calls[0].get("function") if isinstance(calls[0], dict) else None
    if not isinstance(function, dict):
        return None, "malformed_tool_call"
    name, arguments = function.get("name"), function.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, str):
        return None, "malformed_tool_call"  # e.g. arguments sent as an object, not a string
    return ProposedCall(name=name, arguments=arguments), None


class ModelPolicy:
    """A model behind an OpenAI-compatible `/v1/chat/completions` (TCP or Unix socket)."""

    name: PolicyName = "model"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        uds: str | None = None,
        tool_choice: ToolChoice = "auto",
        max_tokens: int,
        temperature: float,
        seed: int,
        request_timeout_s: float,
    ) -> None:
        transport = httpx.AsyncHTTPTransport(uds=uds) if uds else None
        self._client = httpx.AsyncClient(
            base_url=base_url, transport=transport, timeout=request_timeout_s
        )
        self._model = model
        self._max_tokens = max_tokens
        self._tool_choice = tool_choice
        # what the receipt says chose the calls: with "required" the grammar forces one
        self.name = "model_tool_required" if tool_choice == "required" else "model"
        self._temperature = temperature
        self._seed = seed
        self._requests = 0

    async def aclose(self) -> None:
        await self._client.aclose()

    async def reply(self, messages: Sequence[Message], tools: Sequence[Message]) -> Reply:
        payload = {
            "model": self._model,
            "messages": list(messages),
            "tools": list(tools),
            "tool_choice": self._tool_choice,
            "max_tokens": self._max_tokens,
            "temperature": self._temperature,
            "seed": self._seed,
        }
        index = self._requests
        self._requests += 1
        try:
            response = await self._client.post("/v1/chat/completions", json=payload)
        except httpx.TimeoutException as exc:
            raise PolicyFailure("worker_error") from exc
        except httpx.TransportError as exc:
            raise PolicyFailure("worker_unreachable") from exc
        try:
            body = response.json()
        except ValueError as exc:
            raise PolicyFailure("worker_error") from exc
        if not isinstance(body, dict):
            raise PolicyFailure("worker_error")
        if response.status_code != 200:
            error = body.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            if code == "invalid_model_output":
                prompt, completion = _usage(body)
                return Reply(
                    call=None,
                    invalid="malformed_tool_call",
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    request_index=index,
                )
            raise PolicyFailure("worker_error")
        prompt, completion = _usage(body)
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise PolicyFailure("worker_error")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise PolicyFailure("worker_error")
        call, invalid = _parse_message(message)
        return Reply(
            call=call,
            invalid=invalid,
            prompt_tokens=prompt,
            completion_tokens=completion,
            request_index=index,
        )
