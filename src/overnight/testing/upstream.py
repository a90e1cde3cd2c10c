"""``ScriptedUpstream``: a stand-in for the providers' HTTP APIs on 127.0.0.1, answering
Anthropic Messages and OpenAI Chat Completions and Responses, whole or streamed, from a
script, with every usage field a bill is made of.

The answers have the shape of the real APIs' (the recorded responses in the cassettes: the
same objects, the same server-sent events in the same order, the same usage fields), so that
the official SDKs read them as they read the providers'. A script is a list of ``Turn`` (text,
tool calls, or both) and ``Fail`` (an error status), taken one per request, or a function of
the request (``Received``) that returns one, to play an agent that reads its conversation.
Every request is kept (``requests``): its path, headers and body.

The output a turn bills is capped by the request's own output cap, as a provider caps it, and
the answer then says it stopped at the cap.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import secrets
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any, ClassVar

from overnight.core.budget import Usage


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Turn:
    """One answer: its ``text`` and ``tool_calls`` (either or both), and what it bills."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=lambda: Usage(input=1200, output=80))
    reasoning: int = 0
    """Reasoning tokens reported in the OpenAI usage details (a part of ``usage.output``)."""
    cut_after: int | None = None
    """Hang up after this many events of a stream (after half the body of a whole answer),
    without ending the response."""
    stream_error: str | None = None
    """With ``cut_after``: instead of hanging up, send the provider's own error event with this
    message (Anthropic ``error``, a chat chunk with ``error``, ``response.failed``) and end."""
    delay: float = 0.0
    """Seconds to wait before answering."""
    pace: float = 0.0
    """Seconds to wait between the events of a stream."""
    after_first_event: Callable[[], object] | None = None
    """Called once the first event of a stream is sent, before the next (to hold a stream
    open while a test looks at what has arrived)."""
    server_uses: Mapping[str, int] = field(default_factory=dict)
    """Server tools' uses the answer reports (``{"web_search": 2}``): Anthropic's
    ``usage.server_tool_use.<name>_requests``, a ``web_search_call`` item of a response."""
    served: Mapping[str, str] = field(default_factory=dict)
    """How the answer says it was served (``{"speed": "fast"}``): fields of Anthropic's usage,
    OpenAI's top-level ``service_tier``."""
    encode: Callable[[bytes], bytes] | None = None
    """Rewrites the bytes of a whole answer, or of each event of a stream, before they are
    sent (an upstream that writes its JSON its own way)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Headers the answer carries besides its own."""
    gzip: bool = False
    """Send a whole answer gzip-compressed (``Content-Encoding: gzip``)."""
    piece_size: int | None = None
    """Stream text in pieces of this many characters (a word may then span two events)."""


@dataclass(frozen=True)
class Fail:
    """An error status in the provider's own shape."""

    status: int
    message: str = "scripted failure"
    should_retry: bool | None = None


def text(content: str, usage: Usage | None = None, **options: Any) -> Turn:
    return Turn(text=content, usage=usage or Usage(input=1200, output=80), **options)


def tool_calls(*calls: ToolCall, usage: Usage | None = None, **options: Any) -> Turn:
    return Turn(tool_calls=calls, usage=usage or Usage(input=1500, output=120), **options)


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, arguments)


@dataclass(frozen=True)
class Received:
    """One request as the upstream got it."""

    api: str
    """``anthropic``, ``openai-chat``, ``openai-responses``, ``count_tokens`` or ``unknown``."""
    path: str
    headers: dict[str, str]
    """Lower-cased names."""
    body: Any
    raw: bytes

    @property
    def key(self) -> str | None:
        """The credential it carried (``x-api-key`` or ``Authorization: Bearer``)."""
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        scheme, _, value = self.headers.get("authorization", "").partition(" ")
        return value if scheme.lower() == "bearer" else None

    @property
    def max_tokens(self) -> int | None:
        """The output cap it asked for, under whichever name its API uses."""
        if not isinstance(self.body, dict):
            return None
        for name in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            if isinstance(self.body.get(name), int):
                return int(self.body[name])
        return None


Answer = Turn | Fail
Script = Sequence[Answer] | Callable[[Received], Answer]

_PATHS = {
    "/v1/messages": "anthropic",
    "/v1/messages/count_tokens": "count_tokens",
    "/v1/chat/completions": "openai-chat",
    "/v1/responses": "openai-responses",
}


def _id(prefix: str, length: int = 24) -> str:
    return prefix + secrets.token_hex(length // 2)


#: When set (by ``Turn.piece_size``), text is streamed in pieces of this many characters.
_PIECE = threading.local()


def _pieces(content: str) -> list[str]:
    """``content`` in the small pieces a provider streams it in."""
    size = getattr(_PIECE, "size", None)
    if size:
        return [content[i : i + size] for i in range(0, len(content), size)] or [content]
    words = re.findall(r"\S*\s*", content)
    pieces = ["".join(words[i : i + 2]) for i in range(0, len(words), 2)]
    return [p for p in pieces if p] or ([content] if content else [])


class _Billing:
    """A turn's usage as a request's output cap leaves it."""

    def __init__(self, turn: Turn, request: Received) -> None:
        self.turn = turn
        self.usage = turn.usage
        cap = request.max_tokens
        self.capped = cap is not None and turn.usage.output > cap
        self.output = min(turn.usage.output, cap) if cap is not None else turn.usage.output
        self.reasoning = min(turn.reasoning, self.output)
        self.written = turn.usage.cache_write_5m + turn.usage.cache_write_1h
        self.total_in = turn.usage.input + turn.usage.cache_read + self.written

    def anthropic(self, output: int | None = None) -> dict[str, Any]:
        u = self.usage
        return {
            "input_tokens": u.input,
            "cache_creation_input_tokens": self.written,
            "cache_read_input_tokens": u.cache_read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": u.cache_write_5m,
                "ephemeral_1h_input_tokens": u.cache_write_1h,
            },
            "output_tokens": self.output if output is None else output,
            "service_tier": "standard",
            **(
                {"server_tool_use": {f"{k}_requests": v for k, v in self.turn.server_uses.items()}}
                if self.turn.server_uses
                else {}
            ),
            **self.turn.served,
        }

    def _input_details(self) -> dict[str, int]:
        details = {"cached_tokens": self.usage.cache_read}
        if self.written:
            details["cache_write_tokens"] = self.written
        return details

    def chat(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.total_in,
            "completion_tokens": self.output,
            "total_tokens": self.total_in + self.output,
            "prompt_tokens_details": {**self._input_details(), "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": self.reasoning,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def responses(self) -> dict[str, Any]:
        return {
            "input_tokens": self.total_in,
            "input_tokens_details": self._input_details(),
            "output_tokens": self.output,
            "output_tokens_details": {"reasoning_tokens": self.reasoning},
            "total_tokens": self.total_in + self.output,
        }


# --- Anthropic Messages -----------------------------------------------------------------------


def _anthropic_blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    for c in turn.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": c.id or _id("toolu_01"),
                "name": c.name,
                "input": c.arguments,
            }
        )
    return blocks


def _anthropic_stop(turn: Turn, bill: _Billing) -> str:
    return "max_tokens" if bill.capped else "tool_use" if turn.tool_calls else "end_turn"


def anthropic_message(turn: Turn, request: Received) -> dict[str, Any]:
    bill = _Billing(turn, request)
    return {
        "id": _id("msg_01"),
        "type": "message",
        "role": "assistant",
        "model": request.body.get("model"),
        "content": _anthropic_blocks(turn),
        "stop_reason": _anthropic_stop(turn, bill),
        "stop_sequence": None,
        "usage": bill.anthropic(),
    }


def anthropic_events(turn: Turn, request: Received) -> Iterator[tuple[str, dict[str, Any]]]:
    bill = _Billing(turn, request)
    message = anthropic_message(turn, request)
    start = {**message, "content": [], "stop_reason": None, "usage": bill.anthropic(output=1)}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        opened = {**block, "text": ""} if block["type"] == "text" else {**block, "input": {}}
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opened},
        )
        if index == 0:
            yield "ping", {"type": "ping"}
        if block["type"] == "text":
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            arguments = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": ""}]
            deltas += [{"type": "input_json_delta", "partial_json": p} for p in _pieces(arguments)]
        for delta in deltas:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    final = bill.anthropic()
    final.pop("cache_creation")
    for name in ("service_tier", *turn.served):
        final.pop(name, None)
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": final,
        },
    )
    yield "message_stop", {"type": "message_stop"}


# --- OpenAI Chat Completions ------------------------------------------------------------------


def _chat_calls(turn: Turn) -> list[dict[str, Any]]:
    return [
        {
            "id": c.id or _id("call_"),
            "type": "function",
            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
        }
        for c in turn.tool_calls
    ]


def _chat_finish(turn: Turn, bill: _Billing) -> str:
    return "length" if bill.capped else "tool_calls" if turn.tool_calls else "stop"


def chat_completion(turn: Turn, request: Received) -> dict[str, Any]:
    bill = _Billing(turn, request)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": turn.text or None,
        "refusal": None,
        "annotations": [],
    }
    if turn.tool_calls:
        message["tool_calls"] = _chat_calls(turn)
    return {
        "id": _id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.body.get("model"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _chat_finish(turn, bill),
            }
        ],
        "usage": bill.chat(),
        "service_tier": "default",
        "system_fingerprint": "fp_scripted",
    }


def chat_chunks(turn: Turn, request: Received) -> Iterator[tuple[str, Any]]:
    bill = _Billing(turn, request)
    options = request.body.get("stream_options")
    with_usage = isinstance(options, dict) and options.get("include_usage") is True
    head = {
        "id": _id("chatcmpl-"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.body.get("model"),
        "service_tier": "default",
        "system_fingerprint": "fp_scripted",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**head, "choices": [choice], **({"usage": None} if with_usage else {})}

    yield "", chunk({"role": "assistant", "content": "" if turn.text else None, "refusal": None})
    for piece in _pieces(turn.text):
        yield "", chunk({"content": piece})
    for index, c in enumerate(_chat_calls(turn)):
        opened = {**c, "index": index, "function": {"name": c["function"]["name"], "arguments": ""}}
        yield "", chunk({"tool_calls": [opened]})
        for piece in _pieces(c["function"]["arguments"]):
            yield "", chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield "", chunk({}, _chat_finish(turn, bill))
    if with_usage:
        yield "", {**head, "choices": [], "usage": bill.chat()}
    yield "", "[DONE]"


# --- OpenAI Responses -------------------------------------------------------------------------


def _responses_items(turn: Turn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.text:
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": turn.text}
        items.append(
            {
                "id": _id("msg_"),
                "type": "message",
                "status": "completed",
                "content": [part],
                "role": "assistant",
            }
        )
    for c in turn.tool_calls:
        items.append(
            {
                "id": _id("fc_"),
                "type": "function_call",
                "status": "completed",
                "arguments": json.dumps(c.arguments),
                "call_id": c.id or _id("call_"),
                "name": c.name,
            }
        )
    return items


def openai_response(
    turn: Turn, request: Received, items: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    bill = _Billing(turn, request)
    body = request.body
    return {
        "id": _id("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if bill.capped else "completed",
        "background": False,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if bill.capped else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": body.get("model"),
        "output": _responses_items(turn) if items is None else items,
        "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": body.get("store", True),
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": body.get("tools", []),
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": bill.responses(),
        "user": None,
        "metadata": {},
    }


def responses_events(turn: Turn, request: Received) -> Iterator[tuple[str, dict[str, Any]]]:
    final = openai_response(turn, request)
    opening = {
        **final,
        "status": "in_progress",
        "output": [],
        "usage": None,
        "incomplete_details": None,
    }
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": opening},
        {"type": "response.in_progress", "response": opening},
    ]
    for index, item in enumerate(final["output"]):
        at = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            part = item["content"][0]
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "content": []},
                }
            )
            empty = {**part, "text": ""}
            events.append(
                {"type": "response.content_part.added", **at, "content_index": 0, "part": empty}
            )
            for piece in _pieces(part["text"]):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        **at,
                        "content_index": 0,
                        "delta": piece,
                        "logprobs": [],
                    }
                )
            events.append(
                {
                    "type": "response.output_text.done",
                    **at,
                    "content_index": 0,
                    "text": part["text"],
                    "logprobs": [],
                }
            )
            events.append(
                {"type": "response.content_part.done", **at, "content_index": 0, "part": part}
            )
        else:
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "arguments": ""},
                }
            )
            for piece in _pieces(item["arguments"]):
                events.append(
                    {"type": "response.function_call_arguments.delta", **at, "delta": piece}
                )
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    **at,
                    "arguments": item["arguments"],
                }
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    done = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    events.append({"type": done, "response": final})
    for number, event in enumerate(events):
        event["sequence_number"] = number
        yield event["type"], event


# --- errors -----------------------------------------------------------------------------------

_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_of(api: str, status: int, message: str) -> dict[str, Any]:
    if api in ("anthropic", "count_tokens"):
        kind = _ANTHROPIC_ERRORS.get(status, "api_error")
        return {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": _id("req_011"),
        }
    kind = "invalid_request_error" if status < 500 else "server_error"
    code = "invalid_api_key" if status == 401 else None
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def stream_error(request: Received, turn: Turn) -> tuple[str, Any]:
    """The event a provider sends when a stream fails after it began."""
    message = turn.stream_error or "stream failed"
    if request.api == "anthropic":
        error = {"type": "overloaded_error", "message": message}
        return "error", {"type": "error", "error": error}
    if request.api == "openai-chat":
        return "", {
            "error": {"message": message, "type": "server_error", "param": None, "code": None}
        }
    failed = {
        **openai_response(turn, request),
        "status": "failed",
        "error": {"code": "server_error", "message": message},
    }
    return "response.failed", {"type": "response.failed", "response": failed}


# --- the server -------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    upstream: ClassVar[ScriptedUpstream]
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = self.path.partition("?")[0]
        request = Received(
            api=_PATHS.get(path, "unknown"),
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            raw=raw,
        )
        self.upstream.requests.append(request)
        key = self.upstream.key
        if request.api == "unknown":
            return self._json(404, error_of("openai", 404, f"no route {path}"))
        if key is not None and request.key != key:
            return self._json(401, error_of(request.api, 401, "invalid x-api-key"))
        if not isinstance(body, dict):
            return self._json(400, error_of(request.api, 400, "the body is not a JSON object"))
        if request.api == "count_tokens":
            return self._json(200, {"input_tokens": max(1, len(raw) // 4)})
        answer = self.upstream.answer(request)
        if isinstance(answer, Fail):
            headers = {}
            if answer.should_retry is not None:
                headers["x-should-retry"] = "true" if answer.should_retry else "false"
            return self._json(
                answer.status, error_of(request.api, answer.status, answer.message), headers
            )
        if answer.delay:
            time.sleep(answer.delay)
        if body.get("stream") is True:
            return self._stream(request, answer)
        if request.api == "anthropic":
            whole = anthropic_message(answer, request)
        elif request.api == "openai-chat":
            whole = chat_completion(answer, request)
        else:
            whole = openai_response(answer, request)
        if request.api != "anthropic" and "service_tier" in answer.served:
            whole["service_tier"] = answer.served["service_tier"]
        if request.api == "openai-responses" and answer.server_uses.get("web_search"):
            searches = [
                {"type": "web_search_call", "id": _id("ws_"), "status": "completed"}
                for _ in range(answer.server_uses["web_search"])
            ]
            whole["output"] = [*searches, *whole["output"]]
        self._json(200, whole, answer.headers, cut=answer.cut_after is not None, turn=answer)

    do_GET = do_POST

    def _json(
        self,
        status: int,
        data: Any,
        headers: Mapping[str, str] | None = None,
        *,
        cut: bool = False,
        turn: Turn | None = None,
    ) -> None:
        payload = json.dumps(data).encode()
        if turn is not None and turn.encode is not None:
            payload = turn.encode(payload)
        if turn is not None and turn.gzip:
            payload = gzip.compress(payload)
            headers = {**(headers or {}), "Content-Encoding": "gzip"}
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("request-id", _id("req_011"))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if cut:
            self.wfile.write(payload[: len(payload) // 2])
            self._hang_up()
            return
        self.wfile.write(payload)

    def _stream(self, request: Received, turn: Turn) -> None:
        _PIECE.size = turn.piece_size
        try:
            self._stream_events(request, turn)
        finally:
            _PIECE.size = None

    def _stream_events(self, request: Received, turn: Turn) -> None:
        if request.api == "anthropic":
            events: Iterator[tuple[str, Any]] = anthropic_events(turn, request)
        elif request.api == "openai-chat":
            events = chat_chunks(turn, request)
        else:
            events = responses_events(turn, request)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", _id("req_011"))
        for header, value in turn.headers.items():
            self.send_header(header, value)
        self.end_headers()
        for number, (name, data) in enumerate(events):
            failing = turn.cut_after is not None and number >= turn.cut_after
            if failing and turn.stream_error is None:
                return self._hang_up()
            if failing:
                name, data = stream_error(request, turn)
            if number == 1 and turn.after_first_event is not None:
                turn.after_first_event()
            if number and turn.pace:
                time.sleep(turn.pace)
            if not self._event(name, data, turn.encode):
                return
            if failing:
                break
        self.wfile.write(b"0\r\n\r\n")

    def _event(self, name: str, data: Any, encode: Callable[[bytes], bytes] | None = None) -> bool:
        """Send one event; False when the client has gone."""
        text = data if isinstance(data, str) else json.dumps(data)
        chunk = ((f"event: {name}\n" if name else "") + f"data: {text}\n\n").encode()
        if encode is not None:
            chunk = encode(chunk)
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            self.close_connection = True
            return False
        return True

    def _hang_up(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


class ScriptedUpstream:
    """The scripted provider, on an ephemeral port of 127.0.0.1 from ``start()`` (or ``with``)
    to ``close()``. With ``key`` set, a request carrying any other credential is answered
    401 (and still recorded)."""

    def __init__(self, script: Script, *, key: str | None = None) -> None:
        self.script = script
        self.key = key
        self.requests: list[Received] = []
        self._next = 0
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"upstream": self})
        self._server = _Server(("127.0.0.1", 0), handler, bind_and_activate=False)
        self._server.server_bind()  # the port is known from here; it listens from start()
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        port: int = self._server.server_address[1]
        return port

    @property
    def url(self) -> str:
        """The Anthropic base URL (``ANTHROPIC_BASE_URL``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        """The OpenAI base URL (``OPENAI_BASE_URL``), with its ``/v1``."""
        return f"{self.url}/v1"

    def env(self) -> dict[str, str]:
        """The environment that points a harness (or an SDK) at this upstream."""
        key = self.key or "sk-scripted"
        return {
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": key,
            "OPENAI_BASE_URL": self.openai_url,
            "OPENAI_API_KEY": key,
        }

    def answer(self, request: Received) -> Answer:
        if callable(self.script):
            return self.script(request)
        with self._lock:
            at = self._next
            self._next += 1
        if at >= len(self.script):
            return Fail(500, f"the script has {len(self.script)} answers; this is request {at + 1}")
        return self.script[at]

    def start(self) -> ScriptedUpstream:
        if self._thread is None:
            self._server.server_activate()
            self._thread = threading.Thread(
                target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> ScriptedUpstream:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
