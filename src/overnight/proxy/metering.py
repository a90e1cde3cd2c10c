"""What the proxy asks of the night for every request it forwards: the seam between the HTTP
side (``overnight.proxy.server``) and the night's budgets (``overnight.proxy.booking``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from overnight.core.budget import Usage

Api = Literal["anthropic", "openai-chat", "openai-responses"]


@dataclass(frozen=True)
class Asked:
    """One request as the proxy received it, before it is forwarded."""

    api: Api
    model: str
    input_bound: int
    """An upper bound on the request's input tokens: the byte count of its body."""
    max_tokens: int | None
    """The output cap the client asked for; None when it set none."""
    stream: bool


class Refused(Exception):
    """The request may not be forwarded: answered in the provider's own error shape, with
    ``message`` as its text, so that the client stops cleanly."""

    def __init__(self, message: str, *, budget: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.budget = budget


@dataclass(frozen=True)
class Answered:
    """What the upstream's answer said of itself, read by the proxy."""

    usage: Usage | None
    """Every usage field it reported; None when its bill could not be read."""
    usage_warning: str | None = None
    stop_reason: str | None = None
    tool_calls: tuple[str, ...] = ()
    text: str = ""


class Attempt(Protocol):
    """One forwarded request: its worst case is held until it is settled, once."""

    max_tokens: int
    """The output cap to forward: the one asked for, lowered to what is still affordable."""

    def answered(self, answer: Answered) -> None:
        """The upstream answered (a complete response or a stream that ended)."""
        ...

    def failed(self, *, status: int | None, sent: bool, usage: Usage | None, error: str) -> None:
        """The upstream failed: ``sent`` False when the request never reached it (nothing can
        be billed); ``status`` the HTTP status it answered, if any; ``usage`` what it reported
        before failing (a stream that broke)."""
        ...


class Meter(Protocol):
    """Holds a request's worst case against the task's and the night's budgets."""

    def open(self, asked: Asked) -> Attempt:
        """Hold ``asked``'s worst case, its output cap lowered to what is affordable; raise
        ``Refused`` when not even a small answer fits."""
        ...
