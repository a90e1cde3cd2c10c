"""The three provider APIs as the proxy sees them: which path is which API, what a request
asks for (``Asked``), how its body is rewritten before it is forwarded, the provider's own
error shapes, and what an answer says of itself (``Answered``), whole or streamed.

The usage figures are read by ``overnight.messages.usage`` and nowhere here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from overnight.core.budget import Usage
from overnight.messages.usage import (
    NO_USAGE_WARNING,
    UsageRecord,
    from_anthropic,
    from_anthropic_stream,
    from_openai_chat,
    from_openai_responses,
    merge_anthropic_stream,
)
from overnight.proxy import allowlist
from overnight.proxy.metering import Answered, Api, Asked

Family = Literal["anthropic", "openai"]

#: The metered routes: a path (without its query) and the API it speaks.
ROUTES: dict[str, Api] = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai-chat",
    "/v1/responses": "openai-responses",
}
#: Forwarded with the real key but not metered: the provider does not bill it.
FREE_ROUTES: dict[str, Family] = {"/v1/messages/count_tokens": "anthropic"}


def family_of(api: Api) -> Family:
    return "anthropic" if api == "anthropic" else "openai"


class BadRequest(ValueError):
    """A request the proxy will not forward as it stands (answered 400, nothing held)."""


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def read_request(
    api: Api, raw: bytes, headers: Iterable[tuple[str, str]] = ()
) -> tuple[dict[str, Any], Asked]:
    """The request's JSON body and what it asks for; ``BadRequest`` when it cannot be
    metered (not a JSON object, no model, several choices), ``Unforwardable`` when it asks for
    something not on the allowlist (``overnight.proxy.allowlist``) or cannot be bounded. The
    body comes back with the allowlist's caps and pins written into it."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise BadRequest(f"the request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("the request names no model")
    if api == "anthropic":
        asked = _int(body.get("max_tokens"))
    elif api == "openai-chat":
        n = body.get("n")
        if n is not None and n != 1:
            raise BadRequest("only one choice per request (n=1) can be metered")
        asked = _int(body.get("max_completion_tokens"))
        if asked is None:
            asked = _int(body.get("max_tokens"))
    else:
        asked = _int(body.get("max_output_tokens"))
    needs = allowlist.bound(api, body, len(raw), headers)
    return body, Asked(
        api=api,
        model=model,
        input_bound=needs.input_bound(),
        max_tokens=asked,
        stream=body.get("stream") is True,
        server_uses=tuple(sorted(needs.server_uses.items())),
        multipliers=tuple(dict.fromkeys(needs.multipliers)),
        domains=tuple(dict.fromkeys(d.lower().rstrip(".") for d in needs.domains)),
        open_web=needs.open_web,
        long_context=needs.long_context,
        cache_writes=needs.cache_writes,
    )


def rewrite(api: Api, body: dict[str, Any], max_tokens: int) -> bytes:
    """The body to forward: its output cap set to ``max_tokens`` (always one, even when the
    client set none), and a streamed chat completion made to report its usage."""
    if api == "anthropic":
        body["max_tokens"] = max_tokens
        thinking = body.get("thinking")
        if isinstance(thinking, dict):
            budget = _int(thinking.get("budget_tokens"))
            # the thinking budget must stay below the cap; 1024 is the API's least budget
            if budget is not None and budget >= max_tokens and max_tokens > 1024:
                thinking["budget_tokens"] = max_tokens - 1
    elif api == "openai-chat":
        if "max_tokens" in body and "max_completion_tokens" not in body:
            body["max_tokens"] = max_tokens
        else:
            body["max_completion_tokens"] = max_tokens
            if "max_tokens" in body:
                body["max_tokens"] = max_tokens
        if body.get("stream") is True:
            options = body.get("stream_options")
            options = dict(options) if isinstance(options, dict) else {}
            options["include_usage"] = True
            body["stream_options"] = options
    else:
        body["max_output_tokens"] = max_tokens
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


_ANTHROPIC_KINDS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_OPENAI_KINDS = {401: "invalid_request_error", 404: "invalid_request_error", 429: "requests"}


def error_body(family: Family, status: int, message: str, code: str | None = None) -> bytes:
    """An error in the provider's own shape, as its SDKs parse it."""
    if family == "anthropic":
        kind = _ANTHROPIC_KINDS.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        data: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        kind = _OPENAI_KINDS.get(
            status, "server_error" if status >= 500 else "invalid_request_error"
        )
        data = {"error": {"message": message, "type": code or kind, "param": None, "code": code}}
    return json.dumps(data).encode()


#: Anthropic's own words for a spent account. Claude Code stops at the first answer that
#: says them; any other 400 it tries again, turn after turn, until its turns run out.
SPENT_CREDIT = "Your credit balance is too low to access the Anthropic API"


def refusal(family: Family, message: str) -> tuple[int, bytes]:
    """The answer to a request the budgets refused, which the client does not retry.

    Anthropic: HTTP 400 ``invalid_request_error``, as the API answers a spent credit balance,
    in its words (``SPENT_CREDIT``) followed by ``message``. OpenAI: HTTP 429
    ``insufficient_quota``, as the API answers a spent quota; Codex CLI does not retry a 429
    (its transport's ``retry_429`` is off) and takes ``insufficient_quota`` for a spent quota.
    The proxy adds ``x-should-retry: false``, which the official SDKs obey."""
    if family == "anthropic":
        return 400, error_body("anthropic", 400, f"{SPENT_CREDIT}: {message}")
    return 429, error_body("openai", 429, message, code="insufficient_quota")


def stream_error(api: Api, message: str) -> bytes:
    """An error event in the stream's own shape, as the provider ends a stream that failed."""
    if api == "anthropic":
        data = {"type": "error", "error": {"type": "api_error", "message": message}}
        return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"
    if api == "openai-chat":
        error = {"message": message, "type": "server_error", "param": None, "code": None}
        return b"data: " + json.dumps({"error": error}).encode() + b"\n\n"
    failed = {
        "type": "response.failed",
        "response": {"status": "failed", "error": {"code": "server_error", "message": message}},
    }
    return b"event: response.failed\ndata: " + json.dumps(failed).encode() + b"\n\n"


# --- answers ---------------------------------------------------------------------------------


def _answered(
    record: UsageRecord,
    stop: str | None,
    tools: list[str],
    text: list[str],
    *,
    uses: Mapping[str, int] | None = None,
    served: tuple[tuple[str, str], ...] = (),
) -> Answered:
    return Answered(
        usage=record.usage,
        usage_warning=record.warning,
        stop_reason=stop,
        tool_calls=tuple(tools),
        text="".join(text),
        server_uses=tuple(sorted((uses or {}).items())),
        served=served,
    )


def _served(fields: Mapping[str, Any], names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """How an answer says it was served, for each of ``names`` it reports (the service
    tier, the speed, the region)."""
    return tuple((n, fields[n]) for n in names if isinstance(fields.get(n), str))


def _anthropic_uses(usage: object) -> dict[str, int]:
    """The server tools' uses an Anthropic usage reports (``web_search_requests``: N)."""
    used = usage.get("server_tool_use") if isinstance(usage, Mapping) else None
    if not isinstance(used, Mapping):
        return {}
    return {
        str(k).removesuffix("_requests"): v
        for k, v in used.items()
        if str(k).endswith("_requests") and isinstance(v, int) and not isinstance(v, bool)
    }


_ANTHROPIC_SERVED = ("service_tier", "speed", "inference_geo")


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _items(value: object) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, list):
        for item in value:
            if isinstance(item, Mapping):
                yield item


def read_answer(api: Api, raw: bytes) -> Answered:
    """What a whole (not streamed) answer says of itself."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        body = None
    if not isinstance(body, Mapping):
        return Answered(usage=None, usage_warning=NO_USAGE_WARNING + " (the body is not JSON)")
    tools: list[str] = []
    text: list[str] = []
    if api == "anthropic":
        for block in _items(body.get("content")):
            if block.get("type") == "text":
                text.append(_str(block.get("text")) or "")
            elif block.get("type") == "tool_use":
                tools.append(_str(block.get("name")) or "")
        usage = body.get("usage")
        return _answered(
            from_anthropic(usage),
            _str(body.get("stop_reason")),
            tools,
            text,
            uses=_anthropic_uses(usage),
            served=_served(usage, _ANTHROPIC_SERVED) if isinstance(usage, Mapping) else (),
        )
    if api == "openai-chat":
        stop = None
        for choice in _items(body.get("choices")):
            stop = _str(choice.get("finish_reason"))
            message = choice.get("message")
            if isinstance(message, Mapping):
                text.append(_str(message.get("content")) or "")
                for call in _items(message.get("tool_calls")):
                    function = call.get("function")
                    if isinstance(function, Mapping):
                        tools.append(_str(function.get("name")) or "")
        record = from_openai_chat(body.get("usage"), incomplete=stop == "length")
        return _answered(record, stop, tools, text, served=_served(body, ("service_tier",)))
    return _responses_answer(body)


def _responses_answer(response: Mapping[str, Any]) -> Answered:
    tools: list[str] = []
    text: list[str] = []
    searches = 0
    for item in _items(response.get("output")):
        kind = _str(item.get("type")) or ""
        if kind == "web_search_call":
            searches += 1
        if kind == "message":
            for part in _items(item.get("content")):
                if part.get("type") == "output_text":
                    text.append(_str(part.get("text")) or "")
        elif kind.endswith("_call") and isinstance(item.get("name"), str):
            tools.append(item["name"])
    status = _str(response.get("status"))
    record = from_openai_responses(response.get("usage"), incomplete=status == "incomplete")
    details = response.get("incomplete_details")
    stop = status
    if status == "incomplete" and isinstance(details, Mapping):
        stop = _str(details.get("reason")) or status
    uses = {"web_search": searches} if searches else {}
    served = _served(response, ("service_tier",))
    return _answered(record, stop, tools, text, uses=uses, served=served)


# --- streams ---------------------------------------------------------------------------------


@dataclass
class Event:
    name: str
    data: Any
    """The event's JSON data; the raw text when it is not JSON (``[DONE]``)."""


class EventReader:
    """Server-sent events from a byte stream fed in arbitrary pieces."""

    def __init__(self) -> None:
        self._partial = b""
        self._name = ""
        self._data: list[str] = []
        self._raw: list[bytes] = []

    def feed(self, chunk: bytes) -> list[Event]:
        return [event for _raw, event in self.feed_raw(chunk) if event is not None]

    def feed_raw(self, chunk: bytes) -> list[tuple[bytes, Event | None]]:
        """Each event completed by ``chunk``: its bytes as they came (blank line included) and
        the event (None for a block that carries no data, a comment or a keep-alive)."""
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        events: list[tuple[bytes, Event | None]] = []
        for raw in lines:
            self._raw.append(raw)
            line = raw.rstrip(b"\r").decode("utf-8", "replace")
            if not line:
                event = None
                if self._data:
                    text = "\n".join(self._data)
                    try:
                        data: Any = json.loads(text)
                    except (ValueError, RecursionError):
                        data = text
                    event = Event(self._name, data)
                events.append((b"\n".join(self._raw) + b"\n", event))
                self._name, self._data, self._raw = "", [], []
            elif line.startswith("data:"):
                self._data.append(line[5:].removeprefix(" "))
            elif line.startswith("event:"):
                self._name = line[6:].strip()
        return events

    def rest(self) -> bytes:
        """What came after the last complete event (a stream that ended mid-event)."""
        rest = b"".join(raw + b"\n" for raw in self._raw) + self._partial
        self._raw, self._partial = [], b""
        return rest


class StreamAnswer:
    """What a streamed answer says of itself, read event by event as it is relayed."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.events = EventReader()
        self.error: str | None = None
        """The error the provider reported inside the stream, if any."""
        self._start: Mapping[str, Any] | None = None
        self._delta: dict[str, Any] | None = None
        self._usage: object = None
        self._response: Mapping[str, Any] | None = None
        self._stop: str | None = None
        self._tools: list[str] = []
        self._text: list[str] = []
        self._served: dict[str, Any] = {}
        self.ended = False
        """The stream reported its final usage (the whole answer's bill)."""

    def feed(self, chunk: bytes) -> None:
        for event in self.events.feed(chunk):
            self.read(event)

    def read(self, event: Event) -> None:
        """Take one event of the stream into account."""
        if isinstance(event.data, Mapping):
            self._read(event.data)

    def final_usage(self) -> Usage | None:
        """The bill of the whole answer when the stream reported it; None otherwise (a stream
        that broke or was cut before its end is booked at its reservation)."""
        return self.answered().usage if self.ended else None

    def _read(self, data: Mapping[str, Any]) -> None:
        kind = _str(data.get("type")) or ""
        error = data.get("error")
        if kind == "error" or (self.api == "openai-chat" and isinstance(error, Mapping)):
            detail = error if isinstance(error, Mapping) else data
            self.error = _str(detail.get("message")) or json.dumps(detail)[:200]
        elif self.api == "anthropic":
            self._anthropic(kind, data)
        elif self.api == "openai-chat":
            self._chat(data)
        else:
            self._responses(kind, data)

    def _anthropic(self, kind: str, data: Mapping[str, Any]) -> None:
        if kind == "message_start":
            message = data.get("message")
            if isinstance(message, Mapping) and isinstance(message.get("usage"), Mapping):
                self._start = message["usage"]
                self._served.update(
                    {k: v for k, v in self._start.items() if k in _ANTHROPIC_SERVED}
                )
        elif kind == "content_block_start":
            block = data.get("content_block")
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                self._tools.append(_str(block.get("name")) or "")
        elif kind == "content_block_delta":
            delta = data.get("delta")
            if isinstance(delta, Mapping) and delta.get("type") == "text_delta":
                self._text.append(_str(delta.get("text")) or "")
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, Mapping) and delta.get("stop_reason") is not None:
                self._stop = _str(delta.get("stop_reason"))
            usage = data.get("usage")
            if isinstance(usage, Mapping):
                self._delta = merge_anthropic_stream(self._delta, usage)
                self._served.update({k: v for k, v in usage.items() if k in _ANTHROPIC_SERVED})
        elif kind == "message_stop":
            self.ended = self._delta is not None

    def _chat(self, data: Mapping[str, Any]) -> None:
        for choice in _items(data.get("choices")):
            if choice.get("finish_reason") is not None:
                self._stop = _str(choice.get("finish_reason"))
            delta = choice.get("delta")
            if not isinstance(delta, Mapping):
                continue
            if isinstance(delta.get("content"), str):
                self._text.append(delta["content"])
            for call in _items(delta.get("tool_calls")):
                function = call.get("function")
                if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                    self._tools.append(function["name"])
        if data.get("usage") is not None:
            self._usage = data["usage"]
            self.ended = True
        if isinstance(data.get("service_tier"), str):
            self._served["service_tier"] = data["service_tier"]

    def _responses(self, kind: str, data: Mapping[str, Any]) -> None:
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            response = data.get("response")
            if isinstance(response, Mapping):
                self._response = response
                self.ended = True
                failure = response.get("error")
                if kind == "response.failed":
                    message = failure.get("message") if isinstance(failure, Mapping) else None
                    self.error = _str(message) or "the response failed"

    def answered(self) -> Answered:
        """The answer of a stream that ended."""
        if self.api == "anthropic":
            record = from_anthropic_stream(self._start, self._delta)
            if not self.ended:
                record = UsageRecord(warning="the stream carried no final usage; " + _WORST)
            uses = _anthropic_uses(merge_anthropic_stream(self._start, self._delta or {}))
            served = _served(self._served, _ANTHROPIC_SERVED)
            return _answered(record, self._stop, self._tools, self._text, uses=uses, served=served)
        if self.api == "openai-chat":
            record = from_openai_chat(self._usage, incomplete=self._stop == "length")
            if self._usage is None:
                record = UsageRecord(warning="the stream carried no usage chunk; " + _WORST)
            served = _served(self._served, ("service_tier",))
            return _answered(record, self._stop, self._tools, self._text, served=served)
        if self._response is None:
            return Answered(
                usage=None, usage_warning="the stream carried no final response; " + _WORST
            )
        return _responses_answer(self._response)

    def seen(self) -> Usage | None:
        """The usage the stream reported before it broke: what ``message_start`` said of an
        Anthropic message (its input, and the output so far), a chat's usage chunk, or a
        response's final usage; None when it reported none."""
        if self.api == "anthropic":
            if self._delta is not None:
                return from_anthropic(merge_anthropic_stream(self._start, self._delta)).usage
            return from_anthropic(self._start).usage if self._start is not None else None
        return self.answered().usage


_WORST = "its reservation (the worst case) was booked"
