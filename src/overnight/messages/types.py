"""What crosses the model seam: one request type and one response type for every provider.

A response may also be given as a plain dict shaped like an Anthropic Messages API response;
``coerce_response`` turns it into a ``ModelResponse`` and its usage into the internal record.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from overnight.core.budget import CacheTTL, Usage
from overnight.core.errors import UnreadableAnswer
from overnight.messages.usage import UsageRecord, from_anthropic

Purpose = Literal["plan", "execute", "drift", "replan", "compact", "summarize"]
PURPOSES: tuple[Purpose, ...] = ("plan", "execute", "drift", "replan", "compact", "summarize")


class ToolSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    input_schema: dict[str, Any]
    cache_control: dict[str, Any] | None = None
    """An Anthropic cache breakpoint after this tool (the end of the stable tool prefix)."""


class ModelRequest(BaseModel):
    """One call. ``messages`` follow the Anthropic Messages shape (role + content)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    purpose: Purpose
    system: str | list[dict[str, Any]]
    """Plain text, or Anthropic system blocks (which may carry ``cache_control``)."""
    messages: list[dict[str, Any]]
    tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int = Field(gt=0)
    cache_ttl: CacheTTL | None = None
    """The longest cache TTL any breakpoint in this request asks for; None when it sets none.
    The ledger uses it to price the worst case of the input."""
    task_budget_tokens: int | None = None
    """The visible token budget for the task (Anthropic's task-budget beta); None: not sent."""
    effort: str | None = None
    """Provider effort setting, when the model supports one; None: the provider's default."""
    tool_choice: str | None = None
    """Force a call of the named tool (structured answers); None: the model chooses."""


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


class ThinkingBlock(BaseModel):
    """Extended thinking, kept only to be sent back unchanged in the next assistant turn
    (the Messages API requires it there during a tool loop); never shown as text."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = ""


class RedactedThinkingBlock(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


ContentBlock = Annotated[
    TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock, Field(discriminator="type")
]
KEPT_BLOCK_TYPES = ("text", "tool_use", "thinking", "redacted_thinking")


class ModelResponse(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    content: list[ContentBlock] = Field(default_factory=list)
    stop_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    """What the call was billed for. Trust it only when ``usage_known``; the response the
    gateway returns for an unknown bill carries the worst case it booked instead."""
    usage_known: bool = True
    """False when the response said nothing readable about its bill (a response built without
    ``usage`` is one): the gateway then books the call's reservation, its worst case."""
    model: str | None = None
    usage_warning: str | None = None
    """Set when the usage figures may not be what the provider bills (see
    ``overnight.messages.usage``); the gateway traces it and reports it in ``result.json``."""

    @model_validator(mode="before")
    @classmethod
    def _usage_given(cls, data: Any) -> Any:
        """A response without ``usage`` (or with ``usage=None``) has an unknown bill."""
        if isinstance(data, dict) and data.get("usage") is None and "usage_known" not in data:
            data = {k: v for k, v in data.items() if k != "usage"}
            data["usage_known"] = False
        return data

    @classmethod
    def billed(cls, record: UsageRecord, **fields: Any) -> ModelResponse:
        """A response whose bill is ``record`` (an unreadable one leaves ``usage_known``
        False)."""
        return cls(
            usage=record.usage if record.usage is not None else Usage(),
            usage_known=record.usage is not None,
            usage_warning=record.warning,
            **fields,
        )

    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]


def usage_from_anthropic(raw: dict[str, Any] | None) -> Usage:
    """Read an Anthropic ``usage`` object (see ``overnight.messages.usage`` for every rule:
    missing cache fields are zero, the ``cache_creation`` breakdown splits 5-minute from
    1-hour writes, and compaction ``iterations`` are summed). A usage that cannot be read
    reads as zero here; ``coerce_response`` keeps the difference (``usage_known``)."""
    usage = from_anthropic(raw).usage
    return usage if usage is not None else Usage()


def coerce_response(raw: object) -> ModelResponse:
    """Accept a ``ModelResponse`` or an Anthropic-shaped dict; anything else is a clear
    ``UnreadableAnswer``.

    A dict whose ``usage`` is missing or names neither count is read with an unknown bill; one
    whose counts are not non-negative integers is malformed, like a non-list ``content``.
    """
    if isinstance(raw, ModelResponse):
        return raw
    if not isinstance(raw, dict):
        raise UnreadableAnswer(
            f"the model returned {type(raw).__name__}; expected a ModelResponse or a dict "
            "shaped like an Anthropic Messages response"
        )
    content = raw.get("content")
    if content is not None and not isinstance(content, list):
        raise UnreadableAnswer(f"the model's content must be a list of blocks, got {content!r:.80}")
    record = from_anthropic(raw.get("usage"))
    if record.malformed:
        raise UnreadableAnswer(f"the model's response is malformed: {record.warning}")
    try:
        blocks = [
            b for b in content or [] if isinstance(b, dict) and b.get("type") in KEPT_BLOCK_TYPES
        ]
        return ModelResponse.billed(
            record,
            content=blocks,
            stop_reason=raw.get("stop_reason"),
            model=raw.get("model"),
        )
    except (ValidationError, ValueError, TypeError) as exc:
        raise UnreadableAnswer(f"the model's response is malformed: {exc}") from exc


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
