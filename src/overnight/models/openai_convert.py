"""Conversion between our Anthropic-shaped requests / responses and the OpenAI shapes (chat
completions and Responses). See ``overnight.models.openai_provider`` for the rules."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response

from overnight.core.budget import Usage
from overnight.core.errors import ModelCallFailed
from overnight.messages.types import (
    ContentBlock,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolUseBlock,
)
from overnight.messages.usage import from_openai_chat, from_openai_responses
from overnight.models.provider_errors import ProviderError

CHAT_STOP = {
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "stop": "end_turn",
    "content_filter": "refusal",
}
INCOMPLETE_STOP = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}


def system_text(system: str | list[dict[str, Any]]) -> str:
    if isinstance(system, str):
        return system
    return "\n\n".join(str(b.get("text", "")) for b in system if b.get("type") == "text")


def _blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        text = content
    else:
        text = "\n".join(
            str(b.get("text", "")) for b in _blocks(content) if b.get("type") == "text"
        )
    return f"[error] {text}" if block.get("is_error") else text


def _unsupported(kind: object) -> ModelCallFailed:
    return ModelCallFailed(f"cannot send a {kind!r} block to the OpenAI API")


def parse_arguments(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"_unparsed_arguments": raw}
    return value if isinstance(value, dict) else {"_unparsed_arguments": raw}


#: Block types with no OpenAI counterpart that carry nothing the model needs resent.
_SKIPPED = frozenset({"thinking", "redacted_thinking"})


def chat_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The chat-completions ``messages`` for an Anthropic-shaped request."""
    out: list[dict[str, Any]] = []
    system = system_text(request.system)
    if system:
        out.append({"role": "system", "content": system})
    for message in request.messages:
        role = message.get("role")
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for block in _blocks(message.get("content")):
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use" and role == "assistant":
                calls.append(
                    {
                        "id": block["id"],
                        "type": "function",
                        "function": {
                            "name": block["name"],
                            "arguments": json.dumps(block["input"]),
                        },
                    }
                )
            elif kind == "tool_result":
                results.append(
                    {
                        "role": "tool",
                        "tool_call_id": block["tool_use_id"],
                        "content": _result_text(block),
                    }
                )
            elif kind not in _SKIPPED:
                raise _unsupported(kind)
        # Tool results answer the previous assistant turn, so they come first.
        out.extend(results)
        text = "".join(texts)
        if role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = calls
            if text or calls:
                out.append(entry)
        elif texts:
            out.append({"role": "system" if role == "system" else "user", "content": text})
    return out


def responses_input(request: ModelRequest) -> list[dict[str, Any]]:
    """The Responses ``input`` items for an Anthropic-shaped request (system goes apart)."""
    out: list[dict[str, Any]] = []
    for message in request.messages:
        role = message.get("role")
        for block in _blocks(message.get("content")):
            kind = block.get("type")
            if kind == "text":
                item_role = role if role in ("user", "assistant", "system") else "user"
                out.append({"role": item_role, "content": str(block.get("text", ""))})
            elif kind == "tool_use" and role == "assistant":
                out.append(
                    {
                        "type": "function_call",
                        "call_id": block["id"],
                        "name": block["name"],
                        "arguments": json.dumps(block["input"]),
                    }
                )
            elif kind == "tool_result":
                out.append(
                    {
                        "type": "function_call_output",
                        "call_id": block["tool_use_id"],
                        "output": _result_text(block),
                    }
                )
            elif kind not in _SKIPPED:
                raise _unsupported(kind)
    return out


def chat_tools(request: ModelRequest) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
            },
        }
        for t in request.tools
    ]


def responses_tools(request: ModelRequest) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.input_schema,
            "strict": False,
        }
        for t in request.tools
    ]


def _stop(
    content: Iterable[ContentBlock], reason: str | None, table: Mapping[str, str]
) -> str | None:
    if any(isinstance(b, ToolUseBlock) for b in content):
        return "tool_use"
    if reason is None:
        return None
    return table.get(reason, reason)


def response_from_chat(completion: ChatCompletion) -> ModelResponse:
    if not completion.choices:
        raise ModelCallFailed("the chat completion has no choices")
    choice = completion.choices[0]
    content: list[ContentBlock] = []
    if choice.message.content:
        content.append(TextBlock(text=choice.message.content))
    for call in choice.message.tool_calls or []:
        function = getattr(call, "function", None)
        if function is None:
            continue
        content.append(
            ToolUseBlock(id=call.id, name=function.name, input=parse_arguments(function.arguments))
        )
    usage = completion.usage.to_dict(mode="json") if completion.usage else None
    record = from_openai_chat(usage, incomplete=choice.finish_reason == "length")
    return ModelResponse.billed(
        record,
        content=content,
        stop_reason=_stop(content, choice.finish_reason, CHAT_STOP),
        model=completion.model,
    )


def chat_usage(completion: ChatCompletion) -> Usage | None:
    """The bill a chat completion states, when it states one that can be read."""
    usage = completion.usage.to_dict(mode="json") if completion.usage else None
    return from_openai_chat(usage).usage


def responses_usage(response: Response | None) -> Usage | None:
    """The bill a Responses answer states (a failed one included), when it can be read."""
    if response is None or response.usage is None:
        return None
    return from_openai_responses(response.usage.to_dict(mode="json")).usage


def response_from_chat_stream(chunks: Iterable[ChatCompletionChunk]) -> ModelResponse:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    model: str | None = None
    usage: dict[str, object] | None = None
    for chunk in chunks:
        model = model or chunk.model
        if chunk.usage is not None:
            usage = chunk.usage.to_dict(mode="json")
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            if choice.finish_reason is not None:
                finish = choice.finish_reason
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
            for part in delta.tool_calls or []:
                slot = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                if part.id:
                    slot["id"] = part.id
                if part.function is not None:
                    slot["name"] += part.function.name or ""
                    slot["arguments"] += part.function.arguments or ""
    content: list[ContentBlock] = []
    if text:
        content.append(TextBlock(text="".join(text)))
    for index in sorted(calls):
        slot = calls[index]
        content.append(
            ToolUseBlock(id=slot["id"], name=slot["name"], input=parse_arguments(slot["arguments"]))
        )
    record = from_openai_chat(usage, incomplete=finish == "length")
    return ModelResponse.billed(
        record,
        content=content,
        stop_reason=_stop(content, finish, CHAT_STOP),
        model=model,
    )


def response_from_responses(response: Response, provider: str = "openai") -> ModelResponse:
    if response.status == "failed":
        error = response.error
        code = error.code if error is not None else None
        message = error.message if error is not None else "the response failed"
        retryable = code in ("server_error", "rate_limit_exceeded")
        raise ProviderError(
            provider,
            message,
            status=500 if retryable else None,
            retryable=retryable,
            error_type=code,
            maybe_billed=True,
            usage=responses_usage(response),
        )
    content: list[ContentBlock] = []
    for item in response.output:
        if item.type == "message":
            for part in item.content:
                if part.type == "output_text":
                    content.append(TextBlock(text=part.text))
        elif item.type == "function_call":
            content.append(
                ToolUseBlock(id=item.call_id, name=item.name, input=parse_arguments(item.arguments))
            )
    incomplete = response.status == "incomplete"
    usage = response.usage.to_dict(mode="json") if response.usage else None
    record = from_openai_responses(usage, incomplete=incomplete)
    if incomplete:
        details = response.incomplete_details
        reason = details.reason if details is not None else None
        stop = _stop(content, reason or "incomplete", INCOMPLETE_STOP)
    else:
        stop = _stop(
            content, "end_turn" if response.status in ("completed", None) else response.status, {}
        )
    return ModelResponse.billed(record, content=content, stop_reason=stop, model=response.model)
