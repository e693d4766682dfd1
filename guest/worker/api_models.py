"""The request body of `POST /v1/chat/completions`, validated at the edge.

`extra="forbid"` everywhere OpenAI's API defines the object, so a typo or an
unsupported parameter (`n=2`, `response_format`) is a 400 naming the field
rather than silently ignored. Lenient only where real clients send more: an assistant
message echoed back from the `openai` SDK's `message.model_dump()` carries `refusal`,
`annotations`, `audio` and `function_call`, which are accepted when empty.
Strict types: `"1"` is not 1, `1` is not `true`.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True, hide_input_in_errors=True)

MAX_MESSAGES = 4096
MAX_TOOLS = 128
ShortText = Annotated[str, Field(max_length=256)]
ToolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
StopString = Annotated[str, Field(min_length=1, max_length=256)]
"""Non-empty (an empty stop string would end every answer before it began)."""
MAX_STOP = 4


class TextPart(BaseModel):
    model_config = _STRICT
    type: Literal["text"]
    text: str


Content = str | list[TextPart]


class SystemMessage(BaseModel):
    model_config = _STRICT
    role: Literal["system", "developer"]
    content: Content
    name: ShortText | None = None


class UserMessage(BaseModel):
    model_config = _STRICT
    role: Literal["user"]
    content: Content
    name: ShortText | None = None


class FunctionCall(BaseModel):
    model_config = _STRICT
    name: ToolName
    arguments: str


class ToolCallIn(BaseModel):
    model_config = _STRICT
    id: ShortText
    type: Literal["function"]
    function: FunctionCall


class AssistantMessage(BaseModel):
    model_config = _STRICT
    role: Literal["assistant"]
    content: Content | None = None
    tool_calls: Annotated[list[ToolCallIn], Field(max_length=64)] | None = None
    name: ShortText | None = None
    # Echoed back by SDKs from a response message; accepted only when empty.
    refusal: None = None
    annotations: Annotated[list[Any], Field(max_length=0)] | None = None
    audio: None = None
    function_call: None = None


class ToolMessage(BaseModel):
    model_config = _STRICT
    role: Literal["tool"]
    content: Content
    tool_call_id: ShortText


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
MESSAGE_ROLES: Final = frozenset(
    role
    for model in (SystemMessage, UserMessage, AssistantMessage, ToolMessage)
    for role in get_args(model.model_fields["role"].annotation)
)
"""Every `role` a message may have: pydantic puts the one it tried into an error's
location (`messages.0.developer.content`), where it is not a field of the request."""


class FunctionDef(BaseModel):
    model_config = _STRICT
    name: ToolName
    description: Annotated[str, Field(max_length=16384)] | None = None
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    strict: bool | None = None


class ToolDef(BaseModel):
    model_config = _STRICT
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(BaseModel):
    model_config = _STRICT
    name: ToolName


class NamedToolChoice(BaseModel):
    model_config = _STRICT
    type: Literal["function"]
    function: NamedFunction


class StreamOptions(BaseModel):
    model_config = _STRICT
    include_usage: bool | None = None


class ChatRequest(BaseModel):
    model_config = _STRICT
    model: Annotated[str, Field(min_length=1, max_length=256)]
    messages: Annotated[list[Message], Field(min_length=1, max_length=MAX_MESSAGES)]
    tools: Annotated[list[ToolDef], Field(max_length=MAX_TOOLS)] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    seed: Annotated[int, Field(ge=-(1 << 63), le=(1 << 64) - 1)] | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    n: Literal[1] | None = None
    stop: StopString | Annotated[list[StopString], Field(max_length=MAX_STOP)] | None = None
    logit_bias: (
        Annotated[dict[str, Annotated[float, Field(ge=-100, le=100)]], Field(max_length=1024)]
        | None
    ) = None
    user: ShortText | None = None


def stop_strings(request: ChatRequest) -> tuple[str, ...]:
    """`stop` as a tuple: one string, up to four, or none."""
    if request.stop is None:
        return ()
    return (request.stop,) if isinstance(request.stop, str) else tuple(request.stop)


def flatten(content: Content | None) -> str | None:
    """Text parts joined as OpenAI does for text-only content."""
    if content is None or isinstance(content, str):
        return content
    return "".join(part.text for part in content)


def template_messages(request: ChatRequest) -> list[dict[str, Any]]:
    """Messages as plain dicts for the chat template (developer -> system)."""
    out: list[dict[str, Any]] = []
    for message in request.messages:
        if isinstance(message, SystemMessage):
            out.append({"role": "system", "content": flatten(message.content)})
        elif isinstance(message, UserMessage):
            out.append({"role": "user", "content": flatten(message.content)})
        elif isinstance(message, ToolMessage):
            out.append(
                {
                    "role": "tool",
                    "content": flatten(message.content),
                    "tool_call_id": message.tool_call_id,
                }
            )
        else:
            entry: dict[str, Any] = {"role": "assistant", "content": flatten(message.content)}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.function.name,
                            "arguments": call.function.arguments,
                        },
                    }
                    for call in message.tool_calls
                ]
            out.append(entry)
    return out
