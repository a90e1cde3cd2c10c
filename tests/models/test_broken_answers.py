"""Answers the network breaks, through the official SDKs against a local server: a stream cut
mid-way, a stream that stalls past the read timeout, an error event inside a stream, a failed
Responses answer that reports its usage, answers without a readable usage. Each attempt is
classified by whether the provider may have billed it, and the gateway books it accordingly:
its reported usage, else its worst case, or nothing when it cannot have been billed."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from overnight.clock import FakeClock
from overnight.core.budget import BudgetFractions, Ledger, Price, PriceTable, Usage
from overnight.core.errors import DependencyUnavailable
from overnight.messages.types import ModelRequest, estimate_input_tokens
from overnight.models.anthropic_provider import AnthropicClient
from overnight.models.gateway import ModelGateway
from overnight.models.openai_provider import OpenAIClient
from overnight.models.provider_errors import ProviderError
from overnight.models.retry import RetryingClient
from overnight.store.journal import Journal, read_journal
from overnight.store.trace import Trace
from tests.models.cassettes import Interaction
from tests.models.replay import Breakage, ReplayServer

KEY = "test-key-not-real"
MODEL = "claude-opus-4-8"
PRICE = Price(5.0, 25.0, 0.5, 6.25, 10.0)


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    srv = ReplayServer()
    try:
        yield srv
    finally:
        srv.close()


def answer(status: int, body: bytes, *, sse: bool) -> Interaction:
    kind = "text/event-stream" if sse else "application/json"
    return Interaction(
        method="POST",
        url="https://api.anthropic.com/v1/messages",
        request=None,
        status=status,
        headers={"content-type": kind},
        body=body,
    )


def sse(*events: tuple[str | None, Any]) -> bytes:
    out = []
    for name, data in events:
        payload = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {payload}\n\n")
    return "".join(out).encode()


START = (
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    },
)
TEXT = [
    (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Hello"},
        },
    ),
]
END = [
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
]
WHOLE_STREAM = sse(START, *TEXT, *END)
#: Where the stream is cut: after the text began, before its end and its final usage.
CUT = len(sse(START, *TEXT))
OVERLOADED_EVENT = (
    "error",
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
)


def message(**fields: Any) -> bytes:
    body: dict[str, Any] = {
        "id": "msg_2",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": "Hello"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    body.update(fields)
    return json.dumps({k: v for k, v in body.items() if v is not ...}).encode()


def hello() -> ModelRequest:
    return ModelRequest(
        model=MODEL,
        purpose="execute",
        system="be brief",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=64,
    )


REAL = Usage(input=10, output=5).cost(PRICE)  # what the whole answer bills: $0.000175


def worst() -> float:
    return Ledger(PriceTable({MODEL: PRICE}), 1.0).worst_case(
        MODEL, estimate_input_tokens(hello()), 64
    )


class Rig:
    def __init__(self, tmp: Path, client: Any, model: str = MODEL, price: Price = PRICE) -> None:
        self.tmp = tmp
        clock = FakeClock()
        self.ledger = Ledger(PriceTable({model: price}), 5.0)
        self.gateway = ModelGateway(
            client,
            self.ledger,
            Journal(tmp / "spend.jsonl", durable=True),
            Trace(tmp / "trace.jsonl", clock.monotonic, clock.now_iso),
            clock.monotonic,
            BudgetFractions(),
        )

    def records(self) -> list[dict[str, Any]]:
        return read_journal(self.tmp / "spend.jsonl")

    def kinds(self) -> list[str]:
        return [r["kind"] for r in self.records()]

    def spent(self) -> list[dict[str, Any]]:
        return [r for r in self.records() if r["kind"] == "spend"]


def retrying(adapter: Any, **kw: Any) -> RetryingClient:
    clock = FakeClock()
    return RetryingClient(
        adapter, sleep=clock.advance, monotonic=clock.monotonic, jitter=lambda: 0.0, **kw
    )


def anthropic(url: str, *, stream: bool = True, timeout_s: float = 10.0) -> AnthropicClient:
    return AnthropicClient(base_url=url, api_key=KEY, stream=stream, timeout_s=timeout_s)


# -- Anthropic ----------------------------------------------------------------------------------


def test_a_stream_cut_mid_way_may_have_been_billed(server: ReplayServer) -> None:
    server.serve(answer(200, WHOLE_STREAM, sse=True), Breakage(after=CUT))
    with pytest.raises(ProviderError) as info:
        anthropic(server.url).complete(hello())
    assert info.value.maybe_billed and info.value.retryable
    assert info.value.usage is None  # the final usage never arrived


def test_a_cut_stream_is_booked_at_its_worst_case_and_the_retry_at_its_bill(
    server: ReplayServer, tmp_path: Path
) -> None:
    server.serve(answer(200, WHOLE_STREAM, sse=True), Breakage(after=CUT))
    server.serve(answer(200, WHOLE_STREAM, sse=True))
    rig = Rig(tmp_path, retrying(anthropic(server.url)))
    response = rig.gateway.call(hello())

    assert response.text() == "Hello" and len(server.received) == 2
    assert rig.kinds() == ["reserve", "spend", "reserve", "spend"]
    assert [r["usd"] for r in rig.spent()] == [worst(), REAL]
    assert rig.spent()[0]["warnings"][0]["kind"] == "attempt_failed"
    assert rig.ledger.spent_usd == pytest.approx(worst() + REAL)


def test_an_error_event_inside_a_stream_is_retried_and_booked(
    server: ReplayServer, tmp_path: Path
) -> None:
    server.serve(answer(200, sse(START, *TEXT, OVERLOADED_EVENT), sse=True))
    server.serve(answer(200, WHOLE_STREAM, sse=True))
    rig = Rig(tmp_path, retrying(anthropic(server.url)))
    rig.gateway.call(hello())
    assert [r["usd"] for r in rig.spent()] == [worst(), REAL]
    assert "529" in rig.spent()[0]["warnings"][0]["message"]


def test_a_stream_that_stalls_past_the_read_timeout_is_booked_at_its_worst_case(
    server: ReplayServer, tmp_path: Path
) -> None:
    server.serve(answer(200, WHOLE_STREAM, sse=True), Breakage(after=CUT, stall_s=2.0))
    rig = Rig(tmp_path, retrying(anthropic(server.url, timeout_s=0.3), max_attempts=1))
    with pytest.raises(DependencyUnavailable):
        rig.gateway.call(hello())
    assert rig.kinds() == ["reserve", "spend"]
    assert rig.ledger.spent_usd == worst()


def test_an_error_status_before_any_output_is_not_billed(
    server: ReplayServer, tmp_path: Path
) -> None:
    overloaded = json.dumps(OVERLOADED_EVENT[1]).encode()
    server.serve(answer(529, overloaded, sse=False))
    server.serve(answer(200, WHOLE_STREAM, sse=True))
    rig = Rig(tmp_path, retrying(anthropic(server.url)))
    rig.gateway.call(hello())
    assert rig.kinds() == ["reserve", "release", "reserve", "spend"]
    assert rig.ledger.spent_usd == REAL


def test_a_connection_never_made_is_not_billed(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rig = Rig(tmp_path, retrying(anthropic(f"http://127.0.0.1:{port}"), max_attempts=2))
    with pytest.raises(DependencyUnavailable):
        rig.gateway.call(hello())
    assert rig.kinds() == ["reserve", "release"] * 2
    assert rig.ledger.spent_usd == 0.0


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (message(usage=...), "no usage"),
        (message(usage={"inputTokens": 10, "outputTokens": 5}), "names no"),
        (message(usage={"input_tokens": "10", "output_tokens": 5}), "non-negative integer"),
        (message(usage={"input_tokens": 10, "output_tokens": 5.5}), "non-negative integer"),
    ],
    ids=["absent", "foreign-shape", "string-count", "float-count"],
)
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
def test_a_whole_answer_without_a_readable_usage_is_used_and_booked_at_its_worst_case(
    server: ReplayServer, tmp_path: Path, body: bytes, why: str
) -> None:
    server.serve(answer(200, body, sse=False))
    rig = Rig(tmp_path, retrying(anthropic(server.url, stream=False)))
    response = rig.gateway.call(hello())
    assert response.text() == "Hello" and not response.usage_known
    (spent,) = rig.spent()
    assert spent["usd"] == worst() and spent["warnings"][0]["kind"] == "usage_unknown"
    assert why in spent["warnings"][0]["message"]


# -- OpenAI -------------------------------------------------------------------------------------

GPT = "gpt-4o"
GPT_PRICE = Price(2.5, 10.0, 1.25, 2.5, 2.5)


def gpt_request() -> ModelRequest:
    return hello().model_copy(update={"model": GPT})


def chunk(**fields: Any) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": GPT, **fields}


CHAT_STREAM = [
    (None, chunk(choices=[{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}])),
    (None, chunk(choices=[{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}])),
    (
        None,
        chunk(choices=[], usage={"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}),
    ),
    (None, "[DONE]"),
]


def openai(url: str, api: str, *, stream: bool = True) -> OpenAIClient:
    return OpenAIClient(api=api, base_url=url + "/v1", api_key=KEY, stream=stream)  # type: ignore[arg-type]


def test_a_chat_stream_cut_before_its_usage_is_booked_at_its_worst_case(
    server: ReplayServer, tmp_path: Path
) -> None:
    body = sse(*CHAT_STREAM)
    server.serve(answer(200, body, sse=True), Breakage(after=len(sse(*CHAT_STREAM[:1]))))
    server.serve(answer(200, body, sse=True))
    rig = Rig(tmp_path, retrying(openai(server.url, "chat")), GPT, GPT_PRICE)
    response = rig.gateway.call(gpt_request())
    assert response.text() == "Hello"
    gpt_worst = rig.ledger.worst_case(GPT, estimate_input_tokens(gpt_request()), 64)
    assert [r["usd"] for r in rig.spent()] == [gpt_worst, Usage(10, 2).cost(GPT_PRICE)]


def test_a_chat_answer_with_no_choices_is_booked_at_the_usage_it_reports(
    server: ReplayServer, tmp_path: Path
) -> None:
    body = {
        "id": "c2",
        "object": "chat.completion",
        "created": 1,
        "model": GPT,
        "choices": [],
        "usage": {"prompt_tokens": 40, "completion_tokens": 0, "total_tokens": 40},
    }
    server.serve(answer(200, json.dumps(body).encode(), sse=False))
    rig = Rig(tmp_path, retrying(openai(server.url, "chat", stream=False)), GPT, GPT_PRICE)
    with pytest.raises(Exception, match="no choices"):
        rig.gateway.call(gpt_request())
    (spent,) = rig.spent()
    assert spent["usd"] == Usage(input=40).cost(GPT_PRICE)
    assert spent["warnings"][0]["kind"] == "attempt_failed"


def test_a_failed_responses_answer_is_booked_at_the_usage_it_reports(
    server: ReplayServer, tmp_path: Path
) -> None:
    failed = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "failed",
        "error": {"code": "server_error", "message": "the model broke down"},
        "model": GPT,
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 20,
            "output_tokens": 7,
            "total_tokens": 27,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    body = sse(
        ("response.failed", {"type": "response.failed", "sequence_number": 1, "response": failed})
    )
    server.serve(answer(200, body, sse=True))
    rig = Rig(tmp_path, retrying(openai(server.url, "responses"), max_attempts=1), GPT, GPT_PRICE)
    with pytest.raises(DependencyUnavailable, match="broke down"):
        rig.gateway.call(gpt_request())
    (spent,) = rig.spent()
    assert spent["usd"] == Usage(input=20, output=7).cost(GPT_PRICE)
    assert spent["usage"]["input"] == 20 and spent["usage"]["output"] == 7
