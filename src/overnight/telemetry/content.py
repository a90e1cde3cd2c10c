"""What was said, for spans that carry content (``[telemetry] content = true``).

The trace holds no prompt and no tool result. When content is asked for, the model client
and the agent's tools are wrapped so that the request of the call being made and the result
of the tool just run are kept, scrubbed of secret values, until the trace record of that call
arrives and its span takes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from overnight.messages.types import ModelRequest, ModelResponse, ToolSpec
from overnight.models.retry import AttemptMeter, MeteredClient
from overnight.seams import ModelClient, ToolContext, ToolOutcome, ToolSet
from overnight.secrecy import secret_values
from overnight.store.trace import redact


@dataclass(frozen=True)
class Prompt:
    system: Any
    messages: Any


@dataclass(frozen=True)
class ToolExchange:
    name: str
    arguments: Any
    result: str


class ContentTap:
    """The latest request and tool exchange, each taken once by the span of its record."""

    def __init__(self) -> None:
        self._secrets = secret_values()
        self._prompt: Prompt | None = None
        self._tool: ToolExchange | None = None

    def saw_request(self, request: ModelRequest) -> None:
        self._prompt = Prompt(
            redact(request.system, self._secrets), redact(request.messages, self._secrets)
        )

    def saw_tool(self, name: str, args: Mapping[str, Any], outcome: ToolOutcome) -> None:
        self._tool = ToolExchange(
            name, redact(dict(args), self._secrets), redact(outcome.content, self._secrets)
        )

    def take_prompt(self) -> Prompt | None:
        prompt, self._prompt = self._prompt, None
        return prompt

    def take_tool(self, name: str) -> ToolExchange | None:
        tool, self._tool = self._tool, None
        return tool if tool is not None and tool.name == name else None

    def client(self, inner: ModelClient) -> ModelClient:
        """``inner``, its requests kept; a client that meters its own attempts still does."""
        if isinstance(inner, MeteredClient):
            return TappedMeteredClient(inner, self)
        return TappedClient(inner, self)

    def tools(self, inner: ToolSet) -> ToolSet:
        return TappedTools(inner, self)


class TappedClient:
    def __init__(self, inner: ModelClient, tap: ContentTap) -> None:
        self.inner = inner
        self.tap = tap

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.tap.saw_request(request)
        return self.inner.complete(request)


class TappedMeteredClient(TappedClient):
    def __init__(self, inner: MeteredClient, tap: ContentTap) -> None:
        super().__init__(inner, tap)  # type: ignore[arg-type]
        self.metered = inner

    def complete_metered(self, request: ModelRequest, meter: AttemptMeter) -> ModelResponse:
        self.tap.saw_request(request)
        return self.metered.complete_metered(request, meter)


class TappedTools:
    def __init__(self, inner: ToolSet, tap: ContentTap) -> None:
        self.inner = inner
        self.tap = tap

    def specs(self) -> list[ToolSpec]:
        return self.inner.specs()

    def mutating(self, name: str) -> bool:
        return self.inner.mutating(name)

    def dispatch(self, name: str, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        outcome = self.inner.dispatch(name, args, ctx)
        self.tap.saw_tool(name, args, outcome)
        return outcome
