"""The ``openai`` and ``openai-compatible`` providers, through the official OpenAI SDK.

Requests arrive Anthropic-shaped and are converted here, in both directions:

- system (text or blocks) -> a system message (chat) or ``instructions`` (Responses);
- user / assistant text -> messages; assistant ``tool_use`` blocks -> function calls with JSON
  arguments; user ``tool_result`` blocks -> tool messages / ``function_call_output`` items;
- tool specs -> function tools (``strict`` off: our schemas are not written for strict mode);
- ``cache_control`` markers are dropped: OpenAI caches prompt prefixes by itself.

Back: text -> ``TextBlock``; function calls -> ``ToolUseBlock`` with the arguments parsed
(arguments that are not a JSON object arrive as ``{"_unparsed_arguments": "<raw>"}`` so the
agent loop can report the problem to the model instead of the run failing). Stop reasons map
to the Anthropic vocabulary: a function call -> ``tool_use``; ``length`` / incomplete for
``max_output_tokens`` -> ``max_tokens``; ``stop`` / ``completed`` -> ``end_turn``;
``content_filter`` -> ``refusal``; anything else passes through unchanged.

Reading an answer (a stream being consumed, a response being converted) runs in
``reading_answer``: a stream that breaks, carries an ``error`` event or ends without a final
response, and a response that cannot be converted, fail as possibly billed, and a failed
Responses answer hands on the usage it reports.
"""

from __future__ import annotations

import os
from typing import Any, Literal, cast

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from openai.types.responses import Response, ResponseInputParam, ToolParam

from overnight.messages.types import ModelRequest, ModelResponse
from overnight.models.openai_convert import (
    chat_messages,
    chat_tools,
    chat_usage,
    response_from_chat,
    response_from_chat_stream,
    response_from_responses,
    responses_input,
    responses_tools,
    responses_usage,
    system_text,
)
from overnight.models.provider_errors import ProviderError, reading_answer, translate

Api = Literal["chat", "responses"]

#: Sent to OpenAI-compatible servers when no key is configured: they do not check it, the SDK
#: insists on one.
PLACEHOLDER_KEY = "unused"


class OpenAIClient:
    """A ``ModelClient`` for the OpenAI Responses or chat-completions API.

    ``compatible`` marks an OpenAI-compatible server (vLLM, Ollama, llama.cpp): ``max_tokens``
    is sent instead of ``max_completion_tokens``, and without ``OPENAI_API_KEY`` a placeholder
    key is sent. ``base_url`` None and ``api_key`` None keep the SDK's environment handling.
    """

    def __init__(
        self,
        *,
        api: Api,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        timeout_s: float = 600.0,
        compatible: bool = False,
    ) -> None:
        self.api: Api = api
        self.stream = stream
        self.compatible = compatible
        if compatible and api_key is None and not os.environ.get("OPENAI_API_KEY"):
            api_key = PLACEHOLDER_KEY
        self.provider = "openai-compatible" if compatible else "openai"
        self.sdk = openai.OpenAI(
            base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s
        )

    def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            if self.api == "chat":
                return self._chat(request)
            return self._responses(request)
        except ProviderError:
            raise
        except Exception as exc:
            translated = translate(exc, self.provider)
            if translated is None:
                raise
            raise translated from exc

    def _chat(self, request: ModelRequest) -> ModelResponse:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": cast("list[ChatCompletionMessageParam]", chat_messages(request)),
        }
        if self.compatible:
            kwargs["max_tokens"] = request.max_tokens
        else:
            kwargs["max_completion_tokens"] = request.max_tokens
        tools = chat_tools(request)
        if tools:
            kwargs["tools"] = tools
            if request.tool_choice is not None:
                kwargs["tool_choice"] = {
                    "type": "function",
                    "function": {"name": request.tool_choice},
                }
        if request.effort is not None:
            kwargs["reasoning_effort"] = request.effort
        if not self.stream:
            completion: ChatCompletion = self.sdk.chat.completions.create(**kwargs, stream=False)
            with reading_answer(self.provider, lambda: chat_usage(completion)):
                return response_from_chat(completion)
        chunks = self.sdk.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
        with chunks, reading_answer(self.provider):
            return response_from_chat_stream(chunks)

    def _responses(self, request: ModelRequest) -> ModelResponse:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "input": cast("ResponseInputParam", responses_input(request)),
            "max_output_tokens": request.max_tokens,
        }
        instructions = system_text(request.system)
        if instructions:
            kwargs["instructions"] = instructions
        tools = cast("list[ToolParam]", responses_tools(request))
        if tools:
            kwargs["tools"] = tools
            if request.tool_choice is not None:
                kwargs["tool_choice"] = {"type": "function", "name": request.tool_choice}
        if request.effort is not None:
            kwargs["reasoning"] = {"effort": request.effort}
        if not self.stream:
            response: Response = self.sdk.responses.create(**kwargs, stream=False)
            with reading_answer(self.provider, lambda: responses_usage(response)):
                return response_from_responses(response, self.provider)
        events = self.sdk.responses.create(**kwargs, stream=True)
        final: Response | None = None
        items: list[Any] = []
        with events, reading_answer(self.provider, lambda: responses_usage(final)):
            for event in events:
                if event.type in ("response.completed", "response.incomplete", "response.failed"):
                    final = event.response
                elif event.type == "response.output_item.done":
                    items.append(event.item)
                elif event.type == "error":
                    status = 429 if event.code == "rate_limit_exceeded" else 500
                    raise ProviderError(
                        self.provider,
                        event.message,
                        status=status,
                        retryable=event.code in ("server_error", "rate_limit_exceeded", None),
                        error_type=event.code,
                    )
            if final is None:
                raise ProviderError(
                    self.provider,
                    "the stream ended without a final response",
                    status=None,
                    retryable=True,
                )
            if not final.output and items:
                final = final.model_copy(update={"output": items})
            return response_from_responses(final, self.provider)
