"""One exchange of the metering proxy: authenticate, hold, forward, relay, settle.

Every request the proxy forwards is settled exactly once on its ``Attempt``: ``answered`` when
the upstream answered (a whole body, or a stream that ended), ``failed`` otherwise, with
``sent`` False only when the request never reached the upstream whole. What the client sees
is the upstream's own answer (its status, headers and bytes, a stream relayed as it arrives),
or an error in the provider's own shape; never the harness's key, in any encoding.

A request is forwarded only once every name in it is on the allowlist and its cost is bounded
(``overnight.proxy.allowlist``). An answer is relayed only once it is scanned for the
harness's secrets in its decoded form (``overnight.secrecy``): a whole body as the client will
parse it, a stream event by event and across events (an event that could start a secret waits
for the next), every header. A body that carries one is replaced by the proxy's own error; a
stream that does is ended with an error event; the usage it reported is booked either way. A
streamed answer is read to its end even when the client hangs up, so that what the provider
goes on generating is booked; one that never reports its final usage is booked at its
reservation.
"""

from __future__ import annotations

import json
import time
from contextlib import AbstractContextManager, closing
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import ClassVar, Protocol

import httpx2

from overnight.core.budget import Usage
from overnight.models.provider_errors import not_sent
from overnight.proxy.allowlist import Unforwardable, check_query
from overnight.proxy.metering import Answered, Api, Attempt, Meter, Refused
from overnight.proxy.protocols import (
    FREE_ROUTES,
    ROUTES,
    BadRequest,
    EventReader,
    Family,
    StreamAnswer,
    error_body,
    family_of,
    read_answer,
    read_request,
    refusal,
    rewrite,
    stream_error,
)
from overnight.secrecy import SecretScan, StreamScan

#: The most a request body may weigh (a long conversation with images stays far below).
MAX_BODY = 64 * 1024 * 1024
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
#: Request headers not forwarded: hop-by-hop, the client's credentials, and what the HTTP
#: client sets itself.
_NOT_FORWARDED = _HOP | {"host", "content-length", "x-api-key", "authorization", "cookie"}
_NOT_FORWARDED |= {"accept-encoding", "expect"}
#: Response headers not relayed: hop-by-hop, the framing (re-made here, the body decoded),
#: the provider's cookies, and what the proxy's own server writes.
_NOT_RELAYED = _HOP | {"content-length", "content-encoding", "set-cookie", "server", "date"}
#: How long a streamed answer is read on after its client hung up, to book what it bills.
DRAIN_S = 600.0
#: What the client is told in place of an answer that carried a secret of the harness.
WITHHELD = "the provider's answer carried a credential of the harness and was withheld"


@dataclass(frozen=True)
class Upstream:
    """One provider as the harness reaches it: its base URL and the real key, which is
    forwarded to it and to nothing else (never in a repr, a log or an answer)."""

    base_url: str
    key: str = field(repr=False)

    def url(self, family: Family, path: str, query: str) -> str:
        base = self.base_url.rstrip("/")
        # OpenAI's base URLs end in /v1, Anthropic's do not.
        if family == "openai" and path.startswith("/v1/"):
            path = path[3:]
        return base + path + (f"?{query}" if query else "")

    def auth(self, family: Family) -> tuple[str, str]:
        if family == "anthropic":
            return "x-api-key", self.key
        return "authorization", f"Bearer {self.key}"


class Gate(Protocol):
    """What an exchange needs of the proxy."""

    def meter_of(self, token: str | None) -> Meter | None: ...

    def secrets(self) -> SecretScan:
        """The harness's secrets, looked for in everything relayed."""
        ...

    def settling(self, meter: Meter) -> AbstractContextManager[None]:
        """Held while an exchange of ``meter``'s is unsettled (revoking its token waits)."""
        ...

    def upstream_of(self, family: Family) -> Upstream | None: ...

    def client_of(self, family: Family) -> httpx2.Client: ...


class _Settlement:
    """Settles an attempt once; ``maybe_sent`` says whether the request may have left."""

    def __init__(self, attempt: Attempt | None) -> None:
        self.attempt = attempt
        self.done = attempt is None
        self.maybe_sent = False

    def answered(self, answer: Answered) -> None:
        if not self.done and self.attempt is not None:
            self.done = True
            self.attempt.answered(answer)

    def failed(self, *, status: int | None, sent: bool, usage: Usage | None, error: str) -> None:
        if not self.done and self.attempt is not None:
            self.done = True
            self.attempt.failed(status=status, sent=sent, usage=usage, error=error)

    def fallback(self) -> None:
        self.failed(
            status=None,
            sent=self.maybe_sent,
            usage=None,
            error="the proxy failed before the answer was read",
        )


class _TooLarge(ValueError):
    pass


def _excerpt(content: bytes) -> str:
    try:
        data = json.loads(content)
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:300]
    except (ValueError, RecursionError):
        pass
    return content[:300].decode("utf-8", "replace")


class Handler(BaseHTTPRequestHandler):
    """An exchange on one connection (kept alive across requests)."""

    gate: ClassVar[Gate]
    protocol_version = "HTTP/1.1"
    server_version = "overnight-proxy"
    sys_version = ""
    timeout = 600  # an idle connection is closed after this long

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_POST(self) -> None:
        self._serve()

    do_GET = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_POST

    # --- the request ---

    def _token(self) -> str | None:
        key = self.headers.get("x-api-key")
        if key:
            return key.strip()
        scheme, _, value = (self.headers.get("authorization") or "").partition(" ")
        return value.strip() if scheme.lower() == "bearer" else None

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            parts: list[bytes] = []
            total = 0
            while True:
                line = self.rfile.readline(65537)
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise BadRequest("a malformed chunked request body") from None
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                total += size
                if total > MAX_BODY:
                    raise _TooLarge
                parts.append(self.rfile.read(size))
                self.rfile.readline(65537)
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            raise BadRequest("a malformed content-length") from None
        if length > MAX_BODY:
            raise _TooLarge
        return self.rfile.read(length) if length > 0 else b""

    def _serve(self) -> None:
        path, _, query = self.path.partition("?")
        api = ROUTES.get(path)
        free = FREE_ROUTES.get(path)
        family: Family = family_of(api) if api else free or self._family_guess()
        meter = self.gate.meter_of(self._token())
        if meter is None:
            self.close_connection = True
            message = "invalid x-api-key" if family == "anthropic" else "Incorrect API key provided"
            code = None if family == "anthropic" else "invalid_api_key"
            return self._error(family, 401, message, code=code)
        if self.command != "POST" or (api is None and free is None):
            self.close_connection = True
            return self._error(family, 404, f"{self.command} {path} is not served here")
        try:
            raw = self._body()
        except _TooLarge:
            self.close_connection = True
            return self._error(family, 413, "the request body is too large")
        except BadRequest as exc:
            self.close_connection = True
            return self._error(family, 400, str(exc))
        upstream = self.gate.upstream_of(family)
        if upstream is None:
            return self._error(family, 403, f"this harness holds no key for {family}")
        if api is None:
            # not billed, but held to the same allowlist: no URL the provider would fetch
            try:
                check_query(query)
                read_request("anthropic", raw, self._forwarded())
            except (BadRequest, Unforwardable) as exc:
                return self._error(family, 400, str(exc), no_retry=True)
            return self._exchange(None, family, upstream, path, query, raw, _Settlement(None))
        self._metered(api, family, upstream, meter, path, query, raw)

    def _forwarded(self) -> list[tuple[str, str]]:
        """The client's headers that go upstream: all but its credentials, hop-by-hop and
        framing headers (the allowlist checks every one of these)."""
        return [(k, v) for k, v in self.headers.items() if k.lower() not in _NOT_FORWARDED]

    def _family_guess(self) -> Family:
        return "anthropic" if self.headers.get("x-api-key") else "openai"

    def _metered(
        self,
        api: Api,
        family: Family,
        upstream: Upstream,
        meter: Meter,
        path: str,
        query: str,
        raw: bytes,
    ) -> None:
        try:
            check_query(query)
            body, asked = read_request(api, raw, self._forwarded())
        except BadRequest as exc:
            return self._error(family, 400, str(exc))
        except Unforwardable as exc:
            meter.unforwardable(api, exc.message)
            status, data = refusal(family, exc.message)
            return self._send(status, data, [("x-should-retry", "false")])
        try:
            attempt = meter.open(asked)
        except Refused as refused:
            status, data = refusal(family, refused.message)
            return self._send(status, data, [("x-should-retry", "false")])
        except Exception:
            self._error(family, 500, "the budget could not be consulted", no_retry=True)
            raise
        settlement = _Settlement(attempt)
        with self.gate.settling(meter):
            try:
                data = rewrite(api, body, attempt.max_tokens)
                self._exchange(api, family, upstream, path, query, data, settlement)
            finally:
                settlement.fallback()

    # --- upstream ---

    def _exchange(
        self,
        api: Api | None,
        family: Family,
        upstream: Upstream,
        path: str,
        query: str,
        data: bytes,
        settlement: _Settlement,
    ) -> None:
        headers = self._forwarded()
        headers.append(upstream.auth(family))
        scan = self.gate.secrets()
        client = self.gate.client_of(family)
        settlement.maybe_sent = True
        try:
            request = client.build_request(
                "POST", upstream.url(family, path, query), headers=headers, content=data
            )
            response = client.send(request, stream=True)
        except Exception as exc:
            error = scan.redact(f"the upstream could not be reached: {type(exc).__name__}")
            settlement.failed(status=None, sent=not_sent(exc) is None, usage=None, error=error)
            return self._error(family, 502, "the provider could not be reached")
        with closing(response):
            relayed = [
                (k, v)
                for k, v in response.headers.multi_items()
                if k.lower() not in _NOT_RELAYED and not scan.found(k + ": " + v)
            ]
            status = response.status_code
            streamed = "text/event-stream" in response.headers.get("content-type", "")
            if 200 <= status < 300 and streamed and api is not None:
                return self._relay_stream(api, response, status, relayed, settlement, scan)
            try:
                content = response.read()
            except httpx2.HTTPError as exc:
                error = f"the answer broke off: {type(exc).__name__}"
                settlement.failed(status=None, sent=True, usage=None, error=error)
                return self._error(family, 502, "the provider's answer broke off")
            if not 200 <= status < 300:
                error = scan.redact(f"HTTP {status}: {_excerpt(content)}")
                settlement.failed(status=status, sent=True, usage=None, error=error)
            try:
                if scan.found_in_json(content):
                    self._error(family, 502, WITHHELD, no_retry=True)
                else:
                    self._send(status, content, relayed)
            finally:
                if api is not None:
                    settlement.answered(read_answer(api, content))

    def _relay_stream(
        self,
        api: Api,
        response: httpx2.Response,
        status: int,
        headers: list[tuple[str, str]],
        settlement: _Settlement,
        scan: SecretScan,
    ) -> None:
        chunked = self.request_version == "HTTP/1.1"
        if chunked:
            headers = [*headers, ("Transfer-Encoding", "chunked")]
        else:
            self.close_connection = True
            headers = [*headers, ("Connection", "close")]
        out = _StreamOut(self, self._head(status, headers), chunked)
        answer = StreamAnswer(api)
        events = EventReader()
        guard = StreamScan(scan)
        held: list[bytes] = []

        def relay(raw: bytes, parsed: object) -> None:
            if out.gone or guard.leaked:
                return
            guard.add(raw, parsed)
            if guard.leaked:  # end the stream as the provider ends one that failed
                held.clear()
                out.write(stream_error(api, WITHHELD))
                return
            held.append(raw)
            if not guard.holding():
                out.write(b"".join(held))
                held.clear()

        try:
            for piece in response.iter_bytes():
                for raw, event in events.feed_raw(piece):
                    if event is not None:
                        answer.read(event)
                    relay(raw, event.data if event is not None else None)
                if out.gone and out.drained_since() > DRAIN_S:
                    break
            rest = events.rest()
            if rest:
                relay(rest, None)
            if held and not guard.leaked and not out.gone:
                out.write(b"".join(held))
        except httpx2.HTTPError as exc:
            self.close_connection = True
            error = f"the stream broke: {type(exc).__name__}"
            settlement.failed(status=None, sent=True, usage=answer.final_usage(), error=error)
            if out.head is not None:  # nothing relayed yet: say so in the provider's shape
                self._error(family_of(api), 502, "the provider's answer broke off")
            # else the client sees the stream break as it broke: no end of body
            return
        if out.gone:
            self.close_connection = True
        if answer.error is not None:
            error = scan.redact(answer.error)
            settlement.failed(status=None, sent=True, usage=answer.final_usage(), error=error)
        elif out.gone and not answer.ended:
            error = "the client hung up mid-stream and the answer never reported its final usage"
            settlement.failed(status=None, sent=True, usage=None, error=error)
        else:
            settlement.answered(answer.answered())
        out.end()

    # --- answers of the proxy's own ---

    def _head(self, status: int, headers: list[tuple[str, str]]) -> bytes:
        """The status line and headers of an answer, to be written with its first bytes."""
        phrase = self.responses.get(status, ("",))[0]
        lines = [
            f"{self.protocol_version} {status} {phrase}",
            f"Server: {self.version_string()}",
            f"Date: {self.date_time_string()}",
            *(f"{name}: {value}" for name, value in headers),
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")

    def _send(self, status: int, data: bytes, headers: list[tuple[str, str]]) -> None:
        headers = list(headers)
        if not any(name.lower() == "content-type" for name, _ in headers):
            headers.append(("Content-Type", "application/json"))
        headers.append(("Content-Length", str(len(data))))
        if self.close_connection:
            headers.append(("Connection", "close"))
        head = self._head(status, headers)
        self.wfile.write(head if self.command == "HEAD" else head + data)

    def _error(
        self,
        family: Family,
        status: int,
        message: str,
        *,
        code: str | None = None,
        no_retry: bool = False,
    ) -> None:
        headers = [("x-should-retry", "false")] if no_retry else []
        self._send(status, error_body(family, status, message, code), headers)


class _StreamOut:
    """The client's side of a relayed stream: the head goes out with the first bytes, in one
    write; once the client hangs up, nothing more is written and the time is kept."""

    def __init__(self, handler: Handler, head: bytes, chunked: bool) -> None:
        self.handler = handler
        self.head: bytes | None = head
        self.chunked = chunked
        self.gone = False
        self._gone_at = 0.0

    def write(self, data: bytes) -> None:
        if self.gone or not data:
            return
        framed = b"%x\r\n%s\r\n" % (len(data), data) if self.chunked else data
        try:
            self.handler.wfile.write(self.head + framed if self.head is not None else framed)
        except OSError:
            self.gone = True
            self._gone_at = time.monotonic()
            self.handler.close_connection = True
            return
        self.head = None

    def drained_since(self) -> float:
        return time.monotonic() - self._gone_at if self.gone else 0.0

    def end(self) -> None:
        if self.gone:
            return
        try:
            self.handler.wfile.write((self.head or b"") + (b"0\r\n\r\n" if self.chunked else b""))
        except OSError:
            self.handler.close_connection = True
