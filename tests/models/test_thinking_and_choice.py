"""Thinking blocks come back from the Messages API and go back into the next assistant turn
unchanged; structured answers force their tool on every provider."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from overnight.agent.loop import assistant_message
from overnight.messages.answers import DRIFT_TOOL
from overnight.messages.types import ModelRequest, ThinkingBlock, ToolUseBlock
from overnight.models.anthropic_provider import AnthropicClient
from overnight.models.openai_convert import chat_messages, responses_input
from overnight.models.openai_provider import OpenAIClient
from overnight.night.harness_requests import drift_request
from tests.models.cassettes import all_files, cassette_dir, load
from tests.models.recorded import anthropic_request
from tests.models.replay import ReplayServer

KEY = "test-key-not-real"


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    srv = ReplayServer()
    try:
        yield srv
    finally:
        srv.close()


def cassette(fragment: str) -> Path:
    [path] = [p for p in all_files(cassette_dir()) if fragment in p.name]
    return path


def test_thinking_is_kept_and_sent_back_with_its_signature(server: ReplayServer) -> None:
    first = load(cassette("thinking_display_regression"))[0]
    assert first.request is not None
    server.serve(first)
    client = AnthropicClient(base_url=server.url, api_key=KEY, stream=first.is_sse)
    response = client.complete(anthropic_request(first.request))
    thinking = [b for b in response.content if isinstance(b, ThinkingBlock)]
    assert thinking and thinking[0].signature
    assert any(isinstance(b, ToolUseBlock) for b in response.content)
    assert "thinking" not in response.text()
    turn = assistant_message(response)
    assert turn["content"][0]["type"] == "thinking"
    assert turn["content"][0]["signature"] == thinking[0].signature
    # the OpenAI conversions leave thinking out instead of refusing the turn
    follow = ModelRequest(
        model="m",
        purpose="execute",
        system="s",
        max_tokens=10,
        messages=[{"role": "user", "content": "go"}, turn],
    )
    assert "thinking" not in str(chat_messages(follow))
    assert "thinking" not in str(responses_input(follow))


def test_structured_answers_force_their_tool(server: ReplayServer) -> None:
    anthropic_ok = load(cassette("mixed_strict_tool_run"))[0]
    chat_ok = load(cassette("tool_use_chain_of_two_calls"))[0]
    responses_ok = load(cassette("interleaved_reasoning_between_tool_calls"))[0]
    request = drift_request("m", 512, "the goal", [])
    assert request.tool_choice == DRIFT_TOOL.name
    server.serve(anthropic_ok)
    AnthropicClient(base_url=server.url, api_key=KEY, stream=anthropic_ok.is_sse).complete(request)
    server.serve(chat_ok)
    OpenAIClient(
        api="chat", base_url=server.url + "/v1", api_key=KEY, stream=chat_ok.is_sse
    ).complete(request)
    server.serve(responses_ok)
    OpenAIClient(
        api="responses", base_url=server.url + "/v1", api_key=KEY, stream=responses_ok.is_sse
    ).complete(request)
    sent = [r.body for r in server.received]
    assert sent[0]["tool_choice"] == {"type": "tool", "name": "submit_drift_verdict"}
    assert sent[1]["tool_choice"] == {
        "type": "function",
        "function": {"name": "submit_drift_verdict"},
    }
    assert sent[2]["tool_choice"] == {"type": "function", "name": "submit_drift_verdict"}


def test_retries_stop_when_the_wait_would_outlast_the_night() -> None:
    from overnight.core.errors import DependencyUnavailable
    from overnight.models.provider_errors import ProviderError
    from overnight.models.retry import RetryingClient

    class Overloaded:
        calls = 0

        def complete(self, request: ModelRequest) -> dict[str, object]:
            self.calls += 1
            raise ProviderError(
                "anthropic", "overloaded", status=529, retryable=True, retry_after=120.0
            )

    waits: list[float] = []
    inner = Overloaded()
    client = RetryingClient(
        inner, sleep=waits.append, monotonic=lambda: 0.0, time_left=lambda: 300.0 - sum(waits)
    )
    request = ModelRequest(model="m", purpose="plan", system="", messages=[], max_tokens=1)
    with pytest.raises(DependencyUnavailable, match="clock runs out"):
        client.complete(request)
    assert waits == [120.0, 120.0]  # a third wait of 120 s would pass the 300 s left
    assert inner.calls == 3
