"""The ``anthropic`` provider: the Messages API through the official SDK.

The request is already Anthropic-shaped, so system blocks, messages and ``cache_control``
markers (on tools, system and message blocks) are sent exactly as given. Streaming is the
default (``messages.stream``); ``stream=False`` uses ``messages.create``. A request with
``task_budget_tokens`` goes to the beta Messages API with the task-budget beta header.

Only text and ``tool_use`` blocks come back as content; thinking and server-tool blocks are
left out of the content, but their tokens are in the usage, which ``overnight.messages.usage``
reads from the raw ``usage`` objects (for a stream: ``message_start`` and ``message_delta``).

Everything that reads an answer (a stream being consumed, a message being converted) runs in
``reading_answer``: a stream that breaks or carries an error event, and a message that cannot
be converted, fail as possibly billed, so the gateway books them at their worst case.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import anthropic

from overnight.core.budget import Usage
from overnight.messages.types import (
    ContentBlock,
    ModelRequest,
    ModelResponse,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from overnight.messages.usage import UsageRecord, from_anthropic, from_anthropic_stream
from overnight.models.provider_errors import ProviderError, reading_answer, translate

TASK_BUDGET_BETA = "task-budgets-2026-03-13"
PROVIDER = "anthropic"


def tool_params(request: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in request.tools:
        param: dict[str, Any] = {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.input_schema,
        }
        if tool.cache_control is not None:
            param["cache_control"] = tool.cache_control
        out.append(param)
    return out


def _usage_dict(obj: object) -> dict[str, object] | None:
    """The usage as the API sent it (SDK models keep unknown keys such as ``iterations``)."""
    to_dict = getattr(obj, "to_dict", None)
    if to_dict is None:
        return None
    return cast("dict[str, object]", to_dict(mode="json"))


def to_response(message: object, record: UsageRecord) -> ModelResponse:
    """Text, tool_use and thinking blocks of an SDK message (standard or beta); others (server
    tools, compaction) are left out. Blocks are read by their ``type``: the SDK builds
    blocks of a type it does not know as some other block class."""
    content: list[ContentBlock] = []
    for block in cast("list[Any]", getattr(message, "content", None) or []):
        kind = getattr(block, "type", None)
        if kind == "text":
            content.append(TextBlock(text=str(block.text)))
        elif kind == "tool_use":
            raw_input = block.input
            payload = dict(raw_input) if isinstance(raw_input, Mapping) else {}
            content.append(ToolUseBlock(id=str(block.id), name=str(block.name), input=payload))
        elif kind == "thinking":
            content.append(
                ThinkingBlock(
                    thinking=str(getattr(block, "thinking", "")),
                    signature=str(getattr(block, "signature", "") or ""),
                )
            )
        elif kind == "redacted_thinking":
            content.append(RedactedThinkingBlock(data=str(getattr(block, "data", ""))))
    stop = getattr(message, "stop_reason", None)
    model = getattr(message, "model", None)
    return ModelResponse.billed(
        record,
        content=content,
        stop_reason=stop if isinstance(stop, str) else None,
        model=model if isinstance(model, str) else None,
    )


class AnthropicClient:
    """A ``ModelClient`` for the Anthropic Messages API.

    ``base_url`` None keeps the SDK's own environment handling (``ANTHROPIC_BASE_URL``,
    ``ANTHROPIC_API_KEY`` and the rest); so does ``api_key`` None. The SDK never retries:
    ``RetryingClient`` is the one retry policy.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        timeout_s: float = 600.0,
    ) -> None:
        self.stream = stream
        self.sdk = anthropic.Anthropic(
            base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s
        )

    def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            if request.task_budget_tokens is not None:
                return self._beta(request)
            return self._standard(request)
        except ProviderError:
            raise
        except Exception as exc:
            translated = translate(exc, PROVIDER)
            if translated is None:
                raise
            raise translated from exc

    def _common(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": request.messages,
        }
        if request.system:
            kwargs["system"] = request.system
        tools = tool_params(request)
        if tools:
            kwargs["tools"] = tools
        return kwargs

    @staticmethod
    def _tool_choice(request: ModelRequest) -> Any:
        if request.tool_choice is None:
            return anthropic.omit
        return {"type": "tool", "name": request.tool_choice}

    def _arguments(self, request: ModelRequest, output_config: Any) -> dict[str, Any]:
        """The keyword arguments shared by the standard and beta, streamed and plain calls."""
        kw = self._common(request)
        return {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": kw.pop("messages"),
            "system": kw.pop("system", anthropic.omit),
            "tools": kw.pop("tools", anthropic.omit),
            "tool_choice": self._tool_choice(request),
            "output_config": output_config,
        }

    def _standard(self, request: ModelRequest) -> ModelResponse:
        output_config: Any = (
            {"effort": request.effort} if request.effort is not None else anthropic.omit
        )
        args = self._arguments(request, output_config)
        if self.stream:
            return _streamed(self.sdk.messages.stream(**args))
        return _converted(self.sdk.messages.create(**args, stream=False))

    def _beta(self, request: ModelRequest) -> ModelResponse:
        assert request.task_budget_tokens is not None
        config: dict[str, Any] = {
            "task_budget": {"type": "tokens", "total": request.task_budget_tokens}
        }
        if request.effort is not None:
            config["effort"] = request.effort
        args = self._arguments(request, config)
        args["betas"] = [TASK_BUDGET_BETA]
        if self.stream:
            return _streamed(self.sdk.beta.messages.stream(**args))
        return _converted(self.sdk.beta.messages.create(**args, stream=False))


def _converted(message: Any) -> ModelResponse:
    """A (standard or beta) message that arrived whole."""

    def reported() -> Usage | None:
        return from_anthropic(_usage_dict(message.usage)).usage

    with reading_answer(PROVIDER, reported):
        return to_response(message, from_anthropic(_usage_dict(message.usage)))


def _streamed(manager: Any) -> ModelResponse:
    """Consume a (standard or beta) message stream, keeping the raw ``message_start`` and
    final ``message_delta`` usage for ``overnight.messages.usage`` to merge. Entering the manager
    sends the request (an error status is raised there, unbilled); what fails after that, while
    the answer streams in, may have been billed."""
    start: dict[str, object] | None = None
    delta: dict[str, object] | None = None

    def reported() -> Usage | None:
        # The final message_delta states the whole bill; without it nothing final was said.
        return from_anthropic_stream(start, delta).usage if delta is not None else None

    with manager as stream, reading_answer(PROVIDER, reported):
        for event in stream:
            if event.type == "message_start":
                start = _usage_dict(event.message.usage)
            elif event.type == "message_delta":
                delta = _usage_dict(event.usage)
        final = stream.get_final_message()
        return to_response(final, from_anthropic_stream(start, delta))
