"""Provider failures, translated once at the SDK boundary.

``ProviderError`` is deliberately a plain exception, not a ``RunError``: it never ends a run by
itself. ``RetryingClient`` (``overnight.models.retry``) turns it into the run's vocabulary:
``ModelCallFailed`` when it is not retryable, ``DependencyUnavailable`` when retrying did not
outlast it. An adapter used without ``RetryingClient`` lets it reach the gateway, which
reports any non-``RunError`` as ``ModelCallFailed``.

Retryable: HTTP 408, 409, 429, 5xx (Anthropic's 529 "overloaded" included), timeouts and
connection errors, and error events inside a stream whose type says overload, rate limit or
server error. Not retryable: every other 4xx (400, 401, 403, 404, 413, 422, ...), responses the
SDK could not validate, and anything else. An explicit ``x-should-retry`` header from the
provider overrides the status rule, as the providers intend it to.

Whether a failed attempt may have been billed (``maybe_billed``) is read from where it failed.
An error status answered before any output (4xx, 5xx, 529) was not billed, nor was a request
that never reached the provider whole (``not_sent`` says why: the host name did not resolve,
the connection was refused or timed out, the TLS handshake failed, the request could not be
written). Everything that failed once the provider had the request may have been: a timeout
waiting for the answer, a connection dropped after the request was sent, a stream that broke
or carried an error event, an answer that could not be read. Such an attempt is booked at its
worst case unless the provider said what it billed (``usage``). Code that reads an answer runs
inside ``reading_answer``, which marks whatever fails there as possibly billed.
"""

from __future__ import annotations

import email.utils
import functools
import importlib
import math
import socket
import ssl
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Literal

from overnight.core.budget import Usage
from overnight.secrecy import SecretScan, secret_values

RETRYABLE_STATUS = frozenset({408, 409, 429})

#: Anthropic error ``type`` values that arrive inside a 200 stream, and the status they mean.
STREAM_ERROR_STATUS: dict[str, int] = {
    "overloaded_error": 529,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
}


#: Why a request never reached the provider whole (``ProviderError.not_sent``).
NotSent = Literal[
    "name_unresolved",
    "connection_refused",
    "tls_failed",
    "no_connection",
    "connect_timeout",
    "not_written",
]

NOT_SENT_TEXT: dict[NotSent, str] = {
    "name_unresolved": "the host name could not be resolved",
    "connection_refused": "the connection was refused",
    "tls_failed": "the TLS handshake failed",
    "no_connection": "no connection could be made",
    "connect_timeout": "no connection could be made in time",
    "not_written": "the request could not be written whole",
}

#: The ``NotSent`` reasons that say the provider cannot be reached at that address: no
#: retrying or waiting mends them, a setting or the network does.
UNREACHABLE: frozenset[NotSent] = frozenset(
    {"name_unresolved", "connection_refused", "tls_failed", "no_connection"}
)


class ProviderError(Exception):
    """A provider call that failed, with what a retry policy needs to know."""

    def __init__(
        self,
        provider: str,
        message: str,
        *,
        status: int | None,
        retryable: bool,
        retry_after: float | None = None,
        error_type: str | None = None,
        request_id: str | None = None,
        maybe_billed: bool = False,
        usage: Usage | None = None,
        not_sent: NotSent | None = None,
    ) -> None:
        self.provider = provider
        # A provider's (or a gateway's) text may quote the credential it was sent, escaped or
        # encoded; it reaches the trace, the report and the model, so it is scanned decoded.
        self.message = SecretScan(secret_values()).redact(message)
        self.status = status
        """The HTTP status (an in-stream error is given the status its type stands for);
        None for timeouts and connection failures."""
        self.retryable = retryable
        self.retry_after = retry_after
        """Seconds the provider asked to wait (``retry-after-ms`` / ``retry-after``), or None."""
        self.error_type = error_type
        self.request_id = request_id
        self.maybe_billed = maybe_billed
        """The provider had the request when the attempt failed, so it may have billed it."""
        self.usage = usage
        """What the provider said the failed attempt was billed, when it said (an OpenAI
        ``response.failed`` carries its usage); None otherwise."""
        self.not_sent = not_sent
        """Why the request never reached the provider, when it did not: nothing can have been
        billed."""
        where = f"HTTP {status}" if status is not None else "no response"
        super().__init__(f"{provider} ({where}): {self.message}")


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or status >= 500


def parse_retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (milliseconds) or ``retry-after`` (seconds or an
    HTTP date). None when absent or unreadable; a date in the past means 0."""
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
    return value if math.isfinite(value) and value >= 0 else None


def _body_error(body: object) -> tuple[str | None, str | None]:
    """(message, type) from an error body: ``{"error": {...}}`` or the error object itself."""
    if not isinstance(body, Mapping):
        return (body if isinstance(body, str) and body else None), None
    inner = body.get("error")
    err = inner if isinstance(inner, Mapping) else body
    message = err.get("message")
    kind = err.get("type") or err.get("code")
    return (
        message if isinstance(message, str) else None,
        kind if isinstance(kind, str) else None,
    )


def _classify(
    provider: str,
    status: int,
    headers: Mapping[str, str],
    body: object,
    fallback: str,
    request_id: str | None,
) -> ProviderError:
    message, kind = _body_error(body)
    # An error event inside a stream that had opened with 200: output may have been made.
    in_stream = status == 200
    if in_stream and kind is not None:
        status = STREAM_ERROR_STATUS.get(kind, 500)
    retryable = is_retryable_status(status)
    should = {k.lower(): v for k, v in headers.items()}.get("x-should-retry")
    if should in ("true", "false"):
        retryable = should == "true"
    return ProviderError(
        provider,
        message or fallback,
        status=status,
        retryable=retryable,
        retry_after=parse_retry_after(headers),
        error_type=kind,
        request_id=request_id,
        maybe_billed=in_stream,
    )


#: Transport failures (httpx and its successors) that happen before the request has reached
#: the provider whole, and what each says (refined by the OS error below it, for a failed
#: connection). Any other transport failure came after: the provider may have the request.
_NOT_SENT_BY_CLASS: tuple[tuple[str, NotSent], ...] = (
    ("ConnectTimeout", "connect_timeout"),
    ("PoolTimeout", "connect_timeout"),
    ("ConnectError", "no_connection"),
    ("ProxyError", "no_connection"),
    ("UnsupportedProtocol", "no_connection"),
    ("WriteError", "not_written"),
    ("WriteTimeout", "not_written"),
    ("LocalProtocolError", "not_written"),
)


def _transport_modules() -> list[object]:
    found: list[object] = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name))
        except ImportError:
            continue
    return found


@functools.cache
def _transport_classes(*names: str) -> tuple[type[BaseException], ...]:
    classes: list[type[BaseException]] = []
    for module in _transport_modules():
        for name in names:
            cls = getattr(module, name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                classes.append(cls)
    return tuple(classes)


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and what it was raised from or while handling, nearest first. (The HTTP
    libraries chain the OS error by context, the SDKs theirs by cause.)"""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def not_sent(exc: BaseException | None) -> NotSent | None:
    """Why the request of ``exc`` (an SDK error, or the transport error it wraps) never
    reached the provider whole; None when it may have (or ``exc`` says nothing of it).
    Only the outermost transport error counts: a dropped connection is not made a refused
    one by an earlier failure it was raised while handling."""
    chain = list(_chain(exc))
    for at, err in enumerate(chain):
        if not isinstance(err, _transport_classes("TransportError")):
            continue
        for name, kind in _NOT_SENT_BY_CLASS:
            if isinstance(err, _transport_classes(name)):
                return _refined(kind, chain[at + 1 :])
        return None
    return None


def _refined(kind: NotSent, below: list[BaseException]) -> NotSent:
    if kind != "no_connection":
        return kind
    for err in below:
        if isinstance(err, socket.gaierror):
            return "name_unresolved"
        if isinstance(err, ConnectionRefusedError):
            return "connection_refused"
        if isinstance(err, ssl.SSLError):
            return "tls_failed"
    return kind


def _transport_detail(exc: BaseException) -> str:
    """The words of the transport error an SDK error wraps ("[Errno 111] Connection
    refused"), or the SDK's own."""
    for err in _chain(exc):
        if isinstance(err, _transport_classes("TransportError")) and str(err):
            return str(err)
    return str(exc)


def translate(exc: Exception, provider: str) -> ProviderError | None:
    """The ``ProviderError`` for an exception raised by the Anthropic or OpenAI SDK; None for
    anything else (a bug of ours, which must not be retried or disguised)."""
    import anthropic  # imported here: the SDKs take a second to import, and only SDK-backed
    import openai  # providers ever raise their errors

    if isinstance(exc, anthropic.APIStatusError | openai.APIStatusError):
        headers = dict(exc.response.headers.items())
        return _classify(provider, exc.status_code, headers, exc.body, exc.message, exc.request_id)
    if isinstance(exc, anthropic.APIConnectionError | openai.APIConnectionError):
        # A timeout included (the SDKs' timeout error is a connection error).
        why = not_sent(exc)
        timed_out = isinstance(exc, anthropic.APITimeoutError | openai.APITimeoutError)
        if why is not None:
            text = f"{NOT_SENT_TEXT[why]}: {_transport_detail(exc)}"
        elif timed_out:
            text = "the request timed out"
        else:
            cause = exc.__cause__
            text = "connection failed" + (f": {cause}" if cause is not None else "")
        return ProviderError(
            provider,
            text,
            status=None,
            retryable=True,
            maybe_billed=why is None,
            not_sent=why,
        )
    if isinstance(exc, anthropic.APIError | openai.APIError):
        # A response the SDK could not read, or an error event without a status.
        message, kind = _body_error(exc.body)
        status = STREAM_ERROR_STATUS.get(kind) if kind else None
        return ProviderError(
            provider,
            message or exc.message,
            status=status,
            retryable=status is not None and is_retryable_status(status),
            error_type=kind,
            maybe_billed=True,
        )
    if isinstance(exc, anthropic.AnthropicError | openai.OpenAIError):
        return ProviderError(provider, str(exc), status=None, retryable=False)
    if isinstance(exc, _transport_classes("TransportError")):
        # Raised by the HTTP client itself, outside the SDK's wrapping: a stream that broke
        # while it was being read.
        why = not_sent(exc)
        return ProviderError(
            provider,
            f"the connection broke: {exc!r:.200}",
            status=None,
            retryable=True,
            maybe_billed=why is None,
            not_sent=why,
        )
    return None


@contextmanager
def reading_answer(
    provider: str, reported: Callable[[], Usage | None] = lambda: None
) -> Iterator[None]:
    """Around the code that reads an answer the provider has begun to send (a stream being
    consumed, a response being converted). Whatever fails inside leaves as a ``ProviderError``
    marked ``maybe_billed``: the provider had the request and may have billed it. An SDK error
    keeps its classification (a stream's overload event is retryable); anything else is an
    answer that could not be read, which is not retried. ``reported`` gives the bill the
    provider stated before the failure, if it stated one."""
    try:
        yield
    except Exception as exc:
        err = exc if isinstance(exc, ProviderError) else translate(exc, provider)
        if err is None:
            err = ProviderError(
                provider,
                f"the answer could not be read: {exc!r:.300}",
                status=None,
                retryable=False,
            )
        err.maybe_billed = True
        err.not_sent = None
        if err.usage is None:
            try:
                err.usage = reported()
            except Exception:  # the answer is unreadable; its bill may be too
                err.usage = None
        if err is exc:
            raise
        raise err from exc
