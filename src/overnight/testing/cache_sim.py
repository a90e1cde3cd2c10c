"""A simulated provider that honours prompt-cache semantics, for measuring caching policies.

It bills like the Messages API: the request is read as a sequence of segments (tools,
system, then each message); a breakpoint caches the prefix ending at it, for its TTL from the
last write or read; a request reads the longest unexpired cached prefix ending at one of its
breakpoints, writes the rest up to its last breakpoint, and sends what follows uncached.
Prefixes shorter than the minimum cacheable length are never cached. Token counts are exact
and simple: one token per whitespace-separated word of text, and an assistant message counts
the output tokens this provider produced for it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from overnight.core.budget import Usage
from overnight.messages.types import ModelRequest, ModelResponse, TextBlock, ToolUseBlock

TTL_S = {"5m": 300.0, "1h": 3600.0}
LOOKBACK = 20


def words(text: str) -> int:
    return len(text.split())


@dataclass
class Segment:
    tokens: int
    digest: str
    ttl: str | None


@dataclass
class CachingProvider:
    """``answer(request, call_no)`` decides the content; this class decides the bill."""

    clock: Callable[[], float]
    answer: Callable[[ModelRequest, int], list[TextBlock | ToolUseBlock]]
    output_tokens: int = 300
    min_cacheable: int = 1024
    count: Callable[[str], int] = words
    """Tokens in a piece of text (default: one per word, for exact arithmetic)."""
    entries: dict[str, tuple[float, str]] = field(default_factory=dict)
    produced: dict[str, int] = field(default_factory=dict)
    calls: list[Usage] = field(default_factory=list)

    def complete(self, request: ModelRequest) -> ModelResponse:
        segments = self._segments(request)
        now = self.clock()
        breakpoints = [i for i, s in enumerate(segments) if s.ttl is not None]
        cum = [0]
        for s in segments:
            cum.append(cum[-1] + s.tokens)
        last = breakpoints[-1] + 1 if breakpoints else 0
        # A read may start at any block boundary up to LOOKBACK blocks before the last
        # breakpoint, not only at the breakpoints this request marks.
        hit = 0
        for i in range(last - 1, max(-1, last - 1 - LOOKBACK), -1):
            entry = self.entries.get(segments[i].digest)
            if entry is not None and entry[0] > now and cum[i + 1] >= self.min_cacheable:
                hit = i + 1
                break
        write_5m = write_1h = 0
        if last > hit and cum[last] >= self.min_cacheable:
            written = cum[last] - cum[hit]
            if segments[last - 1].ttl == "1h":
                write_1h = written
            else:
                write_5m = written
        for i in breakpoints:
            if cum[i + 1] >= self.min_cacheable:
                ttl = segments[i].ttl or "5m"
                self.entries[segments[i].digest] = (now + TTL_S[ttl], ttl)
        if hit and hit - 1 not in breakpoints:  # a read refreshes the entry it hit
            digest = segments[hit - 1].digest
            _, ttl = self.entries[digest]
            self.entries[digest] = (now + TTL_S[ttl], ttl)
        cached = cum[last] if (write_5m or write_1h) else cum[hit]
        usage = Usage(
            input=cum[-1] - cached,
            output=self.output_tokens,
            cache_read=cum[hit],
            cache_write_5m=write_5m,
            cache_write_1h=write_1h,
        )
        self.calls.append(usage)
        content = self.answer(request, len(self.calls))
        for block in content:
            if isinstance(block, ToolUseBlock):
                self.produced[block.id] = self.output_tokens
        return ModelResponse(content=content, stop_reason="end_turn", usage=usage)

    def _segments(self, request: ModelRequest) -> list[Segment]:
        out: list[Segment] = []
        h = hashlib.sha256()

        def add(tokens: int, payload: Any, ttl: str | None) -> None:
            h.update(json.dumps(payload, sort_keys=True, default=str).encode())
            out.append(Segment(tokens, h.copy().hexdigest(), ttl))

        for tool in request.tools:
            ttl = (tool.cache_control or {}).get("ttl")
            add(self.count(tool.description), [tool.name, tool.description, tool.input_schema], ttl)
        if isinstance(request.system, str):
            add(self.count(request.system), request.system, None)
        else:
            for block in request.system:
                ttl = (block.get("cache_control") or {}).get("ttl")
                add(self.count(block["text"]), block["text"], ttl)
        for message in request.messages:
            content = message["content"]
            blocks: list[dict[str, Any]] = (
                [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
            )
            for block in blocks:
                ttl = (block.get("cache_control") or {}).get("ttl")
                clean = {k: v for k, v in block.items() if k != "cache_control"}
                add(self._block_tokens(message["role"], block), clean, ttl)
        return out

    def _block_tokens(self, role: str, block: dict[str, Any]) -> int:
        kind = block.get("type")
        if role == "assistant":
            return self.produced.get(str(block.get("id")), 0) if kind == "tool_use" else 0
        if kind == "tool_result":
            return self.count(str(block.get("content", "")))
        return self.count(str(block.get("text", "")))


def effective_input_tokens(usage: Usage) -> float:
    """Input tokens as billed at the plain input price: writes 1.25x / 2x, reads 0.1x."""
    return (
        usage.input
        + 1.25 * usage.cache_write_5m
        + 2.0 * usage.cache_write_1h
        + 0.1 * usage.cache_read
    )
