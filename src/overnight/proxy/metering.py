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
    """An upper bound on the request's input tokens (``overnight.proxy.allowlist``): the
    bytes of its text, its images and PDFs by their own rules, what the provider adds for its
    tools, and every pass of a server tool's loop."""
    max_tokens: int | None
    """The output cap the client asked for; None when it set none."""
    stream: bool
    server_uses: tuple[tuple[str, int], ...] = ()
    """The most uses of each server tool the request allows (``web_search``, ``web_fetch``),
    each billed by the use at the spec's price."""
    multipliers: tuple[str, ...] = ()
    """The ``field=value`` multipliers it asks for (``speed=fast``), each priced by the spec."""
    domains: tuple[str, ...] = ()
    """The hosts a server tool it offers is limited to: the provider reaches them for it."""
    open_web: bool = False
    """A server tool it offers is limited to no host."""
    long_context: bool = False
    """It asks for a context past the model's standard window (billed at a dearer tier)."""
    cache_writes: bool = False
    """It asks for explicit cache writes (OpenAI's ``prompt_cache_options`` or breakpoints;
    an Anthropic request is always held as if it wrote its prompt to the 1-hour cache)."""


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
    server_uses: tuple[tuple[str, int], ...] = ()
    """The server tools' uses it reported (``web_search``: 2), billed by the use."""
    served: tuple[tuple[str, str], ...] = ()
    """How it says it was served, field by field (``("service_tier", "priority")``), for the
    fields a multiplier can be keyed by; a field it does not name was served as asked."""
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

    def unforwardable(self, api: Api, message: str) -> None:
        """A request was kept back by the allowlist, unforwarded, for the reason ``message``."""
        ...
