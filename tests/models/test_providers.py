"""The provider layer around the recordings: spec fields and checks, prices from genai-prices,
error translation (including composed failures no recording holds), request conversion for
the OpenAI APIs, and a night whose model is an SDK provider served from 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import genai_prices
import pytest

from overnight.clock import FakeClock
from overnight.config.prices import genai_price, price_for
from overnight.config.spec import PROVIDERS, ModelSpec, parse_spec
from overnight.core.budget import Price, PriceTier, Usage
from overnight.core.errors import ConfigError, ModelCallFailed
from overnight.messages.types import ModelRequest, ToolSpec
from overnight.models.anthropic_provider import AnthropicClient
from overnight.models.openai_convert import chat_messages, responses_input
from overnight.models.provider_errors import ProviderError, parse_retry_after
from overnight.models.providers import build_client
from overnight.models.retry import RetryingClient, sleep_for_clock
from overnight.models.seam import CallableModel
from overnight.night.resolve import check_spec
from overnight.store.journal import read_journal
from tests.helpers.nights import command_task, run_night, spec_data
from tests.models.cassettes import Interaction, cassette_dir
from tests.models.replay import ReplayServer

KEY = "test-key-not-real"


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    srv = ReplayServer()
    try:
        yield srv
    finally:
        srv.close()


def composed(status: int, body: object, *, sse: bool = False, **headers: str) -> Interaction:
    """A response no recording holds (there is no recorded 529), built by hand."""
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    kind = "text/event-stream" if sse else "application/json"
    return Interaction(
        method="POST",
        url="https://api.anthropic.com/v1/messages",
        request=None,
        status=status,
        headers={"content-type": kind, **{k.replace("_", "-"): v for k, v in headers.items()}},
        body=data,
    )


def text_message(text: str = "fine", **usage: int) -> dict[str, Any]:
    return {
        "id": "msg_composed",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-8",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5, **usage},
    }


def hello(**extra: Any) -> ModelRequest:
    return ModelRequest(
        model="claude-opus-4-8",
        purpose="plan",
        system="be brief",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=16,
        **extra,
    )


# -- the spec ---------------------------------------------------------------------------------


def model_spec(repo: Path, **model: Any) -> Any:
    data = spec_data(repo, tasks=[command_task("t_1", "true", "true")])
    data["model"] = {"name": "claude-opus-5", **model}
    return parse_spec(data, repo)


def test_providers_and_defaults() -> None:
    assert PROVIDERS == ("python", "anthropic", "openai", "openai-compatible", "script")
    spec = ModelSpec(provider="anthropic", name="claude-opus-5")
    assert (spec.base_url, spec.api, spec.stream) == (None, None, True)
    assert spec.outage_limit_s == 900.0 and spec.max_attempts >= 1 and spec.timeout_s > 0
    for field in ("base_url", "api", "stream", "timeout_s", "max_attempts", "outage_limit_s"):
        assert ModelSpec.model_fields[field].description, field


@pytest.mark.parametrize(
    ("model", "field", "needle"),
    [
        ({"provider": "carrier-pigeon"}, "model.provider", "python, anthropic, openai, openai-"),
        ({"provider": "python"}, "model.target", "needs a target"),
        ({"provider": "openai-compatible"}, "model.base_url", "base_url"),
        ({"provider": "anthropic", "target": "x:y"}, "model.target", "only used by"),
        ({"provider": "anthropic", "api": "chat"}, "model.api", "OpenAI providers"),
        ({"provider": "anthropic", "name": "mystery-model-9"}, "model.name", "no price"),
    ],
)
def test_check_spec_refuses_what_a_provider_cannot_use(
    repo: Path, model: dict[str, Any], field: str, needle: str
) -> None:
    with pytest.raises(ConfigError) as info:
        check_spec(model_spec(repo, **model))
    assert info.value.field == field and needle in str(info.value)


def test_check_spec_needs_the_openai_key_up_front(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)
    with pytest.raises(ConfigError) as info:
        check_spec(model_spec(repo, provider="openai", name="gpt-5"))
    assert info.value.field == "model.provider" and "OPENAI_API_KEY" in str(info.value)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    check_spec(model_spec(repo, provider="openai", name="gpt-5"))
    # a local server needs no key, only its address (and a price: it is not a hosted model)
    spec = model_spec(
        repo, provider="openai-compatible", name="qwen3-coder:30b", base_url="http://127.0.0.1:9/v1"
    )
    with pytest.raises(ConfigError, match=r"prices\.qwen3-coder:30b"):
        check_spec(spec)


# -- prices -----------------------------------------------------------------------------------


def test_prices_come_from_genai_prices_and_the_spec_wins(repo: Path) -> None:
    spec = model_spec(repo, provider="anthropic", name="claude-sonnet-5")
    # genai-prices knows the seed's names; claude-sonnet-5 is $2/$10, not the $3/$15 the old
    # built-in table assumed
    assert spec.price_table().price("claude-sonnet-5") == Price(2.0, 10.0, 0.2, 2.5, 4.0)
    assert price_for("claude-opus-5", "anthropic", {}) == Price(5.0, 25.0, 0.5, 6.25, 10.0)
    mine = Price(1.0, 2.0, 0.1, 1.25, 2.0)
    assert price_for("claude-opus-5", "anthropic", {"claude-opus-5": mine}) is mine
    # the test suite's fake model is priced by its [prices.fake-opus] table only
    with pytest.raises(ConfigError):
        price_for("fake-opus", "python", {})


def test_tiers_times_and_missing_cache_rates() -> None:
    # tiered (more past 200K input tokens): the base tier, and the tier above it
    sonnet = price_for("claude-sonnet-4-5", "anthropic", {})
    assert sonnet == Price(
        3.0,
        15.0,
        0.3,
        3.75,
        6.0,
        tiers=(PriceTier(200_000, Price(6.0, 22.5, 0.6, 7.5, 12.0)),),
    )
    # no cache-write price (OpenAI bills writes as input): the input rate, for both TTLs
    assert price_for("gpt-4o", "openai", {}) == Price(2.5, 10.0, 1.25, 2.5, 2.5)
    # one cache-write rate (1.25x) and a price cut on 2026-08-21: the price in force
    before = genai_price("gpt-5.6-sol", "openai", datetime(2026, 7, 1, tzinfo=UTC))
    after = genai_price("gpt-5.6-sol", "openai", datetime(2026, 9, 1, tzinfo=UTC))
    assert before is not None and after is not None
    assert replace(before, tiers=()) == Price(5.0, 30.0, 0.5, 6.25, 6.25)
    assert replace(after, tiers=()) == Price(4.0, 20.0, 0.4, 5.0, 5.0)
    assert [t.above for t in before.tiers] == [t.above for t in after.tiers] == [272_000]
    # the python provider lets genai-prices find the provider by the model's name
    assert price_for("gpt-4o-mini", "python", {}) == price_for("gpt-4o-mini", "openai", {})


BILLS = [Usage(1200, 300), Usage(18, 100, 0, 2055, 0), Usage(8, 4, 4012)]
ONE_HOUR = Usage(17, 100, 40, 0, 2056)


@pytest.mark.parametrize(
    ("model", "provider", "usage"),
    [
        (m, p, u)
        for m, p in [
            ("claude-sonnet-4-20250514", "anthropic"),
            ("claude-opus-4-8", "anthropic"),
            ("claude-haiku-4-5", "anthropic"),
            ("gpt-5.6-sol", "openai"),
            ("gpt-4o", "openai"),
        ]
        # OpenAI has no 1-hour cache writes
        for u in (BILLS if p == "openai" else [*BILLS, ONE_HOUR])
    ],
)
def test_our_bill_matches_genai_prices_own_calculation(
    model: str, provider: str, usage: Usage
) -> None:
    theirs = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=usage.input
            + usage.cache_read
            + usage.cache_write_5m
            + usage.cache_write_1h,
            cache_read_tokens=usage.cache_read,
            cache_write_tokens=usage.cache_write_5m + usage.cache_write_1h,
            cache_write_1h_tokens=usage.cache_write_1h or None,
            output_tokens=usage.output,
        ),
        model,
        provider_id=provider,
    )
    ours = usage.cost(price_for(model, provider, {}))
    assert ours == pytest.approx(float(theirs.total_price), rel=1e-12)


# -- errors -----------------------------------------------------------------------------------


def test_retry_after_headers() -> None:
    assert parse_retry_after({"Retry-After": "12"}) == 12.0
    assert parse_retry_after({"retry-after": "12", "retry-after-ms": "1500"}) == 1.5
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after({"retry-after": "Thu, 01 Jan 2026 12:00:45 GMT"}, now) == 45.0
    assert parse_retry_after({"retry-after": "Thu, 01 Jan 2026 11:00:00 GMT"}, now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


@pytest.mark.parametrize(
    ("response", "status", "retryable"),
    [
        (composed(529, OVERLOADED), 529, True),
        (composed(500, OVERLOADED, x_should_retry="false"), 500, False),
        (composed(404, {"type": "error", "error": {"type": "not_found_error"}}), 404, False),
        (
            composed(
                200,
                "event: error\ndata: " + json.dumps(OVERLOADED) + "\n\n",
                sse=True,
            ),
            529,
            True,
        ),
    ],
    ids=["529", "500-told-not-to-retry", "404", "overloaded-inside-a-stream"],
)
def test_composed_failures_are_classified(
    server: ReplayServer, response: Interaction, status: int, retryable: bool
) -> None:
    server.serve(response)
    client = AnthropicClient(base_url=server.url, api_key=KEY, stream=response.is_sse)
    with pytest.raises(ProviderError) as info:
        client.complete(hello())
    assert (info.value.status, info.value.retryable) == (status, retryable)


def test_a_bug_of_ours_is_not_retried_nor_disguised() -> None:
    def broken(request: ModelRequest) -> dict[str, Any]:
        raise KeyError("oops")

    clock = FakeClock()
    client = RetryingClient(CallableModel(broken), sleep=clock.advance, monotonic=clock.monotonic)
    with pytest.raises(KeyError):
        client.complete(hello())
    assert clock.monotonic() == 0.0


# -- request conversion for the OpenAI APIs ---------------------------------------------------

CONVERSATION = ModelRequest(
    model="gpt-5",
    purpose="execute",
    system=[
        {"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "More rules."},
    ],
    messages=[
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "call_1", "name": "read", "input": {"p": "a"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "A", "is_error": True},
                {"type": "text", "text": "[budget] 70% spent", "cache_control": {"type": "x"}},
            ],
        },
    ],
    tools=[
        ToolSpec(
            name="read",
            description="read a file",
            input_schema={"type": "object"},
            cache_control={"type": "ephemeral"},
        )
    ],
    max_tokens=100,
)


def test_chat_conversion_keeps_the_conversation_and_drops_cache_markers() -> None:
    assert chat_messages(CONVERSATION) == [
        {"role": "system", "content": "Rules.\n\nMore rules."},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"p": "a"}'},
                }
            ],
        },
        # the tool answer must follow the call directly; the user's text comes after it
        {"role": "tool", "tool_call_id": "call_1", "content": "[error] A"},
        {"role": "user", "content": "[budget] 70% spent"},
    ]


def test_responses_conversion() -> None:
    assert responses_input(CONVERSATION) == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "Reading."},
        {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": '{"p": "a"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "[error] A"},
        {"role": "user", "content": "[budget] 70% spent"},
    ]


def test_blocks_openai_cannot_take_are_refused_clearly() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "http://x/y.png"}}
    request = CONVERSATION.model_copy(update={"messages": [{"role": "user", "content": [image]}]})
    with pytest.raises(ModelCallFailed, match="'image'"):
        chat_messages(request)


# -- a night on an SDK provider ---------------------------------------------------------------


def test_a_night_builds_its_client_from_the_spec_and_retry_waits_use_its_clock(
    repo: Path, tmp_path: Path, server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    rate_limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    server.serve(composed(429, rate_limited, retry_after="30"))
    for _ in range(5):  # a structured call asks again after an invalid answer
        server.serve(composed(200, text_message("not a verdict", cache_read_input_tokens=1000)))
    data = spec_data(
        repo,
        tasks=[command_task(f"t_{i}", "true", "true") for i in range(2)],
        run={"drift_every": 1},
    )
    data["model"] = {
        "provider": "anthropic",
        "name": "claude-opus-4-8",
        "base_url": server.url,
        "stream": False,
    }
    clock = FakeClock()
    assert sleep_for_clock(clock) == clock.advance
    _rd, result = run_night(parse_spec(data, repo), tmp_path / "run", clock=clock)
    # the drift call got prose instead of a verdict: the run ends there, after paying for it
    assert result.stop_reason == "UNRECOVERABLE_ERROR:invalid_model_output", result.message
    answered = len(server.received) - 1
    assert 1 <= answered < 5 and server.queue  # the 429 was retried once, nothing more
    per_call = (10 * 5 + 5 * 25 + 1000 * 0.5) / 1e6  # claude-opus-4-8 from genai-prices
    spent = [r["usd"] for r in read_journal(_rd.spend) if r["kind"] == "spend"]
    assert spent == pytest.approx([per_call] * answered)  # the closing summary included
    assert result.budgets.seconds.used >= 30.0  # the wait counted against the wall clock
    retries = [e for e in read_journal(_rd.trace) if e.get("kind") == "model_retry"]
    assert retries and retries[0]["status"] == 429 and retries[0]["wait_s"] >= 30.0


def test_absent_cassettes_skip_locally_and_fail_under_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OVERNIGHT_CASSETTES", str(tmp_path / "nowhere"))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="cassettes not found"):
        cassette_dir()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="cassettes not found"):
        cassette_dir()


def test_build_client_python_provider_is_unchanged(tmp_path: Path) -> None:
    client = build_client(ModelSpec(provider="python", name="m", target="json:dumps"))
    assert isinstance(client, CallableModel)


def test_the_mechanical_model_is_priced_like_the_main_one(repo: Path) -> None:
    data = spec_data(repo, tasks=[command_task("t_1", "true", "true")])
    data["model"] = {"provider": "anthropic", "name": "claude-opus-5"}
    data["agent"] = {"mechanical_model": "claude-haiku-4-5"}
    table = parse_spec(data, repo).price_table()
    assert table.price("claude-haiku-4-5") == Price(1.0, 5.0, 0.1, 1.25, 2.0)
    data["agent"] = {"mechanical_model": "mystery-model-9"}
    with pytest.raises(ConfigError) as info:
        check_spec(parse_spec(data, repo))
    assert info.value.field == "agent.mechanical_model"
