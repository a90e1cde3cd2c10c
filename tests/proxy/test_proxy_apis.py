"""The three provider APIs through the metering proxy, driven by their official SDKs: what
the client reads is what the upstream answered, what is booked is what the upstream reported
(every usage field), and what the upstream got carries the real key and the granted cap."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx2
import pytest

from overnight.core.budget import Usage
from overnight.proxy.metering import Api
from overnight.proxy.server import Upstream, upstreams_from_env
from overnight.testing.meters import RecordingMeter
from overnight.testing.upstream import Received, Turn, call, text, tool_calls
from tests.proxy.stack import APIS, KEY, TOKEN, anthropic_client, ask, stack

#: OpenAI has one cache-write rate, which the usage readers put in the 5-minute field.
BILLS: dict[str, Usage] = {
    "anthropic": Usage(
        input=12, output=230, cache_read=4012, cache_write_5m=418, cache_write_1h=96
    ),
    "openai-chat": Usage(input=20, output=230, cache_read=1152, cache_write_5m=68),
    "openai-responses": Usage(input=25, output=230, cache_read=1390, cache_write_5m=100),
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_a_text_answer_is_relayed_and_its_whole_bill_is_booked(api: Api, stream: bool) -> None:
    bill = BILLS[api]
    words = "The test failed because the divisor was zero; it now returns None."
    with stack([text(words, bill)]) as s:
        got_text, got_tools = ask(api, s.proxy.url or "", stream=stream)
        [settled] = s.meter.settled(1)

    assert (got_text, got_tools) == (words, [])
    assert settled.asked.api == api
    assert settled.asked.stream is stream
    assert settled.asked.input_bound > 0
    assert settled.failure is None and settled.answer is not None
    assert settled.answer.usage == bill
    assert settled.answer.usage_warning is None
    assert settled.answer.text == words
    assert s.meter.booked == bill.total_tokens
    assert s.meter.held == 0
    [received] = s.upstream.requests
    assert received.key == KEY


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_tool_calls_reach_the_client_and_the_meter(api: Api, stream: bool) -> None:
    turn = tool_calls(
        call("read_file", path="calc.py"),
        call("run_tests", args=["-q", "tests/test_calc.py"]),
        usage=Usage(input=900, output=75),
    )
    with stack([turn]) as s:
        _text, tools = ask(api, s.proxy.url or "", stream=stream)
        [settled] = s.meter.settled(1)

    assert tools == ["read_file", "run_tests"]
    assert settled.answer is not None
    assert settled.answer.tool_calls == ("read_file", "run_tests")
    assert settled.answer.usage == Usage(input=900, output=75)
    expected_stop = {"anthropic": "tool_use", "openai-chat": "tool_calls"}.get(api, "completed")
    assert settled.answer.stop_reason == expected_stop


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("api", APIS)
def test_the_output_cap_is_lowered_to_the_grant(api: Api, stream: bool) -> None:
    meter = RecordingMeter(max_output=300)
    with stack([text("a long answer", Usage(input=50, output=1000))], meter) as s:
        extra = {"anthropic": {"max_tokens": 8000}, "openai-chat": {"max_completion_tokens": 8000}}
        ask(api, s.proxy.url or "", stream=stream, **extra.get(api, {"max_output_tokens": 8000}))
        [settled] = meter.settled(1)

    [received] = s.upstream.requests
    assert settled.asked.max_tokens == 8000
    assert settled.max_tokens == 300
    assert received.max_tokens == 300
    # the upstream stopped at the cap, and that is what was booked
    assert settled.answer is not None and settled.answer.usage == Usage(input=50, output=300)
    assert settled.answer.stop_reason in ("max_tokens", "length", "max_output_tokens")


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses"])
def test_a_cap_is_set_when_the_client_set_none(api: Api) -> None:
    meter = RecordingMeter(max_output=512)
    with stack([text("ok")], meter) as s:
        ask(api, s.proxy.url or "", stream=False)
        [settled] = meter.settled(1)

    assert settled.asked.max_tokens is None
    body = s.upstream.requests[0].body
    name = "max_completion_tokens" if api == "openai-chat" else "max_output_tokens"
    assert body[name] == 512
    assert "max_tokens" not in body


def test_a_chat_client_using_the_older_max_tokens_keeps_its_name() -> None:
    meter = RecordingMeter(max_output=256)
    with stack([text("ok")], meter) as s:
        ask("openai-chat", s.proxy.url or "", stream=False, max_tokens=4000)
        meter.settled(1)

    body = s.upstream.requests[0].body
    assert body["max_tokens"] == 256
    assert "max_completion_tokens" not in body
    assert meter.asked[0].max_tokens == 4000


def test_the_token_cap_lowers_the_grant_by_the_input_bound() -> None:
    meter = RecordingMeter(cap=2000, max_output=4096)
    with stack([text("ok", Usage(input=10, output=5))], meter) as s:
        ask("anthropic", s.proxy.url or "", stream=False, max_tokens=4096)
        [settled] = meter.settled(1)

    assert settled.max_tokens == 2000 - settled.asked.input_bound
    assert s.upstream.requests[0].max_tokens == settled.max_tokens


def test_a_streamed_chat_is_made_to_report_its_usage() -> None:
    with stack([text("ok", Usage(input=7, output=3))]) as s:
        ask("openai-chat", s.proxy.url or "", stream=True)
        [settled] = s.meter.settled(1)

    assert s.upstream.requests[0].body["stream_options"] == {"include_usage": True}
    assert settled.answer is not None and settled.answer.usage == Usage(input=7, output=3)


def test_a_thinking_budget_is_kept_below_a_lowered_cap() -> None:
    meter = RecordingMeter(max_output=8000)
    with stack([text("ok")], meter) as s:
        thinking = {"type": "enabled", "budget_tokens": 31999}
        ask("anthropic", s.proxy.url or "", stream=True, max_tokens=32000, thinking=thinking)
        meter.settled(1)

    body = s.upstream.requests[0].body
    assert body["max_tokens"] == 8000
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 7999}


def test_the_client_s_query_and_headers_reach_the_upstream_with_the_real_key_only() -> None:
    with stack([text("ok")]) as s:
        response = httpx2.post(
            f"{s.proxy.url}/v1/messages?beta=true",
            headers={
                "x-api-key": TOKEN,
                "anthropic-version": "2023-06-01",
                "anthropic-beta": "interleaved-thinking-2025-05-14",
                "cookie": "session=1",
            },
            json={"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": []},
        )
        s.meter.settled(1)

    assert response.status_code == 200
    [received] = s.upstream.requests
    assert received.path == "/v1/messages?beta=true"
    assert received.headers["x-api-key"] == KEY
    assert received.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert "authorization" not in received.headers
    assert "cookie" not in received.headers
    assert TOKEN not in json.dumps(received.headers)


def test_a_callable_script_answers_from_the_conversation() -> None:
    def agent(request: Received) -> Turn:
        last = request.body["messages"][-1]
        if isinstance(last["content"], str):
            return tool_calls(call("read_file", path="calc.py"))
        return text("done")

    with stack(agent) as s:
        url = s.proxy.url or ""
        _, tools = ask("anthropic", url, stream=True)
        follow = [
            *[{"role": "user", "content": "Fix it."}],
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": tools[0], "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 1"}],
            },
        ]
        answer, _ = ask("anthropic", url, stream=True, messages=follow)
        s.meter.settled(2)

    assert tools == ["read_file"]
    assert answer == "done"
    assert len(s.upstream.requests) == 2


def test_count_tokens_is_forwarded_with_the_real_key_and_not_metered() -> None:
    with stack([]) as s:
        counted = anthropic_client(s.proxy.url or "").messages.count_tokens(
            model="claude-sonnet-4-5", messages=[{"role": "user", "content": "hello"}]
        )

    assert counted.input_tokens > 0
    assert s.meter.asked == []
    [received] = s.upstream.requests
    assert received.api == "count_tokens" and received.key == KEY


def test_parallel_requests_are_each_held_and_settled_once() -> None:
    bill = Usage(input=100, output=20, cache_read=50)
    with stack([text("ok", bill)] * 24) as s:
        url = s.proxy.url or ""
        with ThreadPoolExecutor(8) as pool:
            jobs = [
                pool.submit(ask, api, url, stream=bool(i % 2))
                for i, api in enumerate(list(APIS) * 8)
            ]
            results = [job.result() for job in jobs]
        settled = s.meter.settled(24)

    assert all(text_ == "ok" for text_, _ in results)
    assert [r.answer.usage for r in settled if r.answer] == [bill] * 24
    assert s.meter.held == 0
    assert s.meter.booked == 24 * bill.total_tokens


def test_upstreams_come_from_the_harness_s_environment() -> None:
    ups = upstreams_from_env({"ANTHROPIC_API_KEY": "sk-a", "OPENAI_API_KEY": "sk-o"})
    assert ups.anthropic == Upstream("https://api.anthropic.com", "sk-a")
    assert ups.openai == Upstream("https://api.openai.com/v1", "sk-o")
    assert ups.openai.url("openai", "/v1/responses", "") == "https://api.openai.com/v1/responses"
    assert (
        ups.anthropic.url("anthropic", "/v1/messages", "beta=true")
        == "https://api.anthropic.com/v1/messages?beta=true"
    )
    moved = upstreams_from_env({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1/", "OPENAI_API_KEY": "k"})
    assert moved.anthropic is None
    assert moved.openai is not None
    assert moved.openai.url("openai", "/v1/chat/completions", "") == (
        "http://127.0.0.1:9/v1/chat/completions"
    )
    assert "sk-a" not in repr(ups) and "sk-o" not in str(ups)
