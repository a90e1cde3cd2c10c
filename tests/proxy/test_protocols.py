"""Reading a stream as it is relayed: whatever pieces the bytes arrive in, and whichever line
endings the server uses, the proxy reads the same answer from it."""

from __future__ import annotations

import pytest

from overnight.proxy.metering import Api
from overnight.proxy.protocols import BadRequest, EventReader, StreamAnswer, read_request, rewrite
from tests.models.cassettes import cassette_dir, load

STREAMS = [
    (
        "anthropic",
        "DataDog__dd-trace-py/tests__contrib__anthropic__cassettes__"
        "anthropic_completion_tools_stream.yaml",
    ),
    (
        "openai-chat",
        "DataDog__dd-trace-py/tests__contrib__openai__cassettes__v1__"
        "chat_completion_stream_prompt_caching_cache_read.yaml",
    ),
    (
        "openai-responses",
        "simonw__llm/tests__cassettes__test_openai_responses__"
        "test_responses_tool_use_streaming.yaml",
    ),
]


def read(api: Api, body: bytes, size: int) -> StreamAnswer:
    answer = StreamAnswer(api)
    for at in range(0, len(body), size):
        answer.feed(body[at : at + size])
    return answer


@pytest.mark.parametrize(("api", "name"), STREAMS, ids=[a for a, _ in STREAMS])
def test_a_stream_reads_the_same_in_any_pieces_and_line_endings(api: Api, name: str) -> None:
    body = load(cassette_dir() / name)[0].body
    whole = read(api, body, len(body)).answered()
    assert whole.usage is not None

    assert read(api, body, 1).answered() == whole
    assert read(api, body, 7).answered() == whole
    assert read(api, body.replace(b"\n", b"\r\n"), 5).answered() == whole


def test_an_event_split_across_pieces_is_one_event() -> None:
    reader = EventReader()
    assert reader.feed(b"event: ping\nda") == []
    assert reader.feed(b'ta: {"type":') == []
    [event] = reader.feed(b' "ping"}\n\n: a comment\n\ndata:[DONE]\n\n')[:1]
    assert (event.name, event.data) == ("ping", {"type": "ping"})


def test_what_a_request_asks_for_and_how_it_is_rewritten() -> None:
    raw = b'{"model": "gpt-5.5", "messages": [], "stream": true, "max_tokens": 9000}'
    body, asked = read_request("openai-chat", raw)
    assert (asked.model, asked.max_tokens, asked.stream, asked.input_bound) == (
        "gpt-5.5",
        9000,
        True,
        len(raw),
    )
    rewritten = rewrite("openai-chat", body, 100)
    assert b'"max_tokens":100' in rewritten
    assert b'"stream_options":{"include_usage":true}' in rewritten

    for bad in (b"[]", b"{", b'{"messages": []}', b"[" * 100_000):
        with pytest.raises(BadRequest):
            read_request("anthropic", bad)


def test_a_thinking_budget_that_cannot_fit_is_left_for_the_provider_to_refuse() -> None:
    body = {
        "model": "m",
        "max_tokens": 32000,
        "thinking": {"type": "enabled", "budget_tokens": 2000},
    }
    rewrite("anthropic", body, 900)
    assert body["max_tokens"] == 900
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2000}
