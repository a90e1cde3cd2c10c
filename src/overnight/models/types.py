"""What crosses the model seam: one request type and one response type for every provider.

A response may also be given as a plain dict shaped like an Anthropic Messages API response;
``coerce_response`` turns it into a ``ModelResponse`` and its usage into the internal record.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from overnight.core.budget import CacheTTL, Usage
from overnight.core.errors import ModelCallFailed

Purpose = Literal["plan", "execute", "drift", "replan", "compact", "summarize"]
PURPOSES: tuple[Purpose, ...] = ("plan", "execute", "drift", "replan", "compact", "summarize")


class ToolSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    input_schema: dict[str, Any]


class ModelRequest(BaseModel):
    """One call. ``messages`` follow the Anthropic Messages shape (role + content)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    purpose: Purpose
    system: str
    messages: list[dict[str, Any]]
    tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int = Field(gt=0)
    cache_ttl: CacheTTL | None = None
    """The longest cache TTL any breakpoint in this request asks for; None when it sets none.
    The ledger uses it to price the worst case of the input."""


class TextBlock(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


ContentBlock = Annotated[TextBlock | ToolUseBlock, Field(discriminator="type")]


class ModelResponse(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    content: list[ContentBlock] = Field(default_factory=list)
    stop_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None

    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]


def _count(raw: dict[str, Any], key: str) -> int:
    value = raw.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"usage.{key} must be a non-negative integer, got {value!r}")
    return value


def usage_from_anthropic(raw: dict[str, Any] | None) -> Usage:
    """Read an Anthropic ``usage`` object. Missing cache fields mean zero; when the
    ``cache_creation`` breakdown is present it splits writes into 5-minute and 1-hour."""
    if not raw:
        return Usage()
    created = _count(raw, "cache_creation_input_tokens")
    split = raw.get("cache_creation")
    if isinstance(split, dict):
        w5 = _count(split, "ephemeral_5m_input_tokens")
        w1h = _count(split, "ephemeral_1h_input_tokens")
        if w5 + w1h != created and created:
            # The breakdown does not add up: bill the remainder at the 5-minute rate rather
            # than drop tokens on the floor.
            w5 += max(0, created - w5 - w1h)
    else:
        w5, w1h = created, 0
    return Usage(
        input=_count(raw, "input_tokens"),
        output=_count(raw, "output_tokens"),
        cache_read=_count(raw, "cache_read_input_tokens"),
        cache_write_5m=w5,
        cache_write_1h=w1h,
    )


def coerce_response(raw: object) -> ModelResponse:
    """Accept a ``ModelResponse`` or an Anthropic-shaped dict; anything else is a clear
    ``ModelCallFailed``."""
    if isinstance(raw, ModelResponse):
        return raw
    if not isinstance(raw, dict):
        raise ModelCallFailed(
            f"the model returned {type(raw).__name__}; expected a ModelResponse or a dict "
            "shaped like an Anthropic Messages response"
        )
    content = raw.get("content")
    if content is not None and not isinstance(content, list):
        raise ModelCallFailed(f"the model's content must be a list of blocks, got {content!r:.80}")
    try:
        blocks = [
            b
            for b in content or []
            if isinstance(b, dict) and b.get("type") in ("text", "tool_use")
        ]
        return ModelResponse(
            content=blocks,
            stop_reason=raw.get("stop_reason"),
            usage=usage_from_anthropic(raw.get("usage")),
            model=raw.get("model"),
        )
    except (ValidationError, ValueError, TypeError) as exc:
        raise ModelCallFailed(f"the model's response is malformed: {exc}") from exc


def estimate_input_tokens(request: ModelRequest) -> int:
    """An upper bound on the input tokens of ``request``: its UTF-8 byte count.

    Byte-level tokenizers never put less than one byte in a token, so this over-reserves
    (by about 4x on English) and never under-reserves, which is the side a cap must err on.
    """
    payload = {
        "system": request.system,
        "messages": request.messages,
        "tools": [t.model_dump() for t in request.tools],
    }
    return len(json.dumps(payload, ensure_ascii=False).encode("utf-8"))
