"""Recorded real API traffic, replayed through the real SDKs and our adapters.

Every cassette in ``../shared/cassettes`` (or ``$OVERNIGHT_CASSETTES``) is served, response by
response, from a local HTTP server on 127.0.0.1; the official SDK is pointed at it through
``base_url`` and driven by our adapter with a request rebuilt from the recorded one. For each
interaction the tests check what the adapter sent (endpoint, model, streaming, conversation)
and what it made of the answer: text, tool calls, stop reason, the ``Usage`` record, the
dollar cost at the model's price, or the translated error.

The expected figures below come from the cassettes' own index (usage facts per interaction)
and the dollar costs from genai-prices' calculator, written down as numbers.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from overnight.clock import FakeClock
from overnight.config.prices import price_for
from overnight.config.spec import ModelSpec
from overnight.core.budget import BudgetFractions, Ledger, PriceTable, Usage
from overnight.core.endings import classify_exception, describe
from overnight.core.errors import DependencyUnavailable, ModelCallFailed
from overnight.messages.types import ModelRequest, ModelResponse, estimate_input_tokens
from overnight.models.anthropic_provider import TASK_BUDGET_BETA, AnthropicClient
from overnight.models.gateway import ModelGateway
from overnight.models.openai_provider import OpenAIClient
from overnight.models.provider_errors import ProviderError
from overnight.models.providers import build_client
from overnight.models.retry import RetryingClient
from overnight.store.journal import Journal, read_journal
from overnight.store.trace import Trace
from tests.models.cassettes import Interaction, all_files, cassette_dir, load
from tests.models.recorded import (
    anthropic_request,
    chat_facts,
    chat_request,
    recorded_text,
    responses_facts,
    responses_request,
)
from tests.models.replay import ReplayServer

KEY = "test-key-not-real"


@dataclass(frozen=True)
class Ok:
    usage: Usage
    usd: float
    stop: str
    tools: tuple[tuple[str, dict[str, Any]], ...] = ()
    warning: bool = False


@dataclass(frozen=True)
class Err:
    status: int
    retryable: bool
    error_type: str
    message: str


@dataclass(frozen=True)
class Foreign:
    """A call to a host that is neither Anthropic nor OpenAI (Gemini): not replayed."""

    host: str


def U(i: int, o: int, cr: int = 0, w5: int = 0, w1h: int = 0) -> Usage:
    return Usage(input=i, output=o, cache_read=cr, cache_write_5m=w5, cache_write_1h=w1h)


DD = "DataDog__dd-trace-py/tests__contrib__"
SDK = "anthropics__anthropic-sdk-python/tests__lib__"
PAI = "pydantic__pydantic-ai/tests__"
LLMA = "simonw__llm-anthropic/tests__cassettes__test_anthropic__"
LLM = "simonw__llm/tests__cassettes__"
RATE_429 = Err(429, True, "rate_limit_error", "20,000,000 prompt bytes per hour")
WEATHER_SF = ("get_weather", {"location": "San Francisco, CA", "units": "c"})

EXPECTED: dict[str, list[Ok | Err | Foreign]] = {
    # --- Anthropic -------------------------------------------------------------------------
    DD + "anthropic__cassettes__anthropic_completion_cache_read.yaml": [
        Ok(U(11, 100, cr=2055), 0.0021495, "max_tokens"),
    ],
    DD + "anthropic__cassettes__anthropic_completion_cache_write.yaml": [
        # older usage shape: no cache_creation breakdown, so every write is a 5-minute write
        Ok(U(18, 100, w5=2055), 0.00926025, "max_tokens"),
    ],
    DD + "anthropic__cassettes__anthropic_completion_cache_write_1h_ttl.yaml": [
        Ok(U(17, 100, w1h=2056), 0.013887, "max_tokens"),
    ],
    DD + "anthropic__cassettes__anthropic_completion_error.yaml": [
        Err(400, False, "invalid_request_error", "messages.0: Input does not match"),
    ],
    DD + "anthropic__cassettes__anthropic_completion_invalid_api_key.yaml": [
        Err(401, False, "authentication_error", "invalid x-api-key"),
    ],
    DD + "anthropic__cassettes__anthropic_completion_stream_cache_read.yaml": [
        # message_delta carries only output_tokens: the rest survives from message_start
        Ok(U(11, 100, cr=1031), 0.0018423, "max_tokens"),
    ],
    DD + "anthropic__cassettes__anthropic_completion_stream_cache_write.yaml": [
        Ok(U(18, 100, w5=1031), 0.00542025, "max_tokens"),
    ],
    DD + "anthropic__cassettes__anthropic_completion_tools_stream.yaml": [
        # 2024 recording: no cache fields anywhere, which means zero
        Ok(
            U(599, 135),
            0.01911,
            "tool_use",
            (("get_weather", {"location": "San Francisco, CA"}),),
        ),
    ],
    SDK
    + "_parse____inline_snapshot____test_messages__TestAsyncParse__"
    + "d743d628-16aa-4c9f-ae78-51deb578f746.json": [
        RATE_429,
        RATE_429,
        Ok(U(406, 50), 0.001968, "end_turn"),
    ],
    SDK
    + "_parse____inline_snapshot____test_messages__TestAsyncStream__"
    + "a8b7dbb8-2321-4624-abdb-7ba2136b5c38.json": [
        RATE_429,
        RATE_429,
        Ok(U(135, 10), 0.000555, "end_turn"),
    ],
    SDK
    + "tools____inline_snapshot____test_runners__TestSyncRunTools__"
    + "092be1de-d3f8-4c22-a4ea-a7ad54689836.json": [
        # server_tool_use (code execution) is not a client tool call
        Ok(U(3182, 237), 0.021835, "tool_use", (WEATHER_SF,)),
        # usage {input_tokens: 0, output_tokens: 0} and no cache keys at all
        Ok(
            U(0, 0),
            0.0,
            "tool_use",
            (("get_weather", {"location": "New York, NY", "units": "c"}),),
        ),
    ],
    SDK
    + "tools____inline_snapshot____test_runners__TestSyncRunTools__"
    + "f59a9391-643b-422c-96dc-1f28bc7ea4d7.json": [
        Ok(U(659, 74), 0.001029, "tool_use", (WEATHER_SF,)),
        Err(400, False, "invalid_request_error", "unexpected `tool_use_id`"),
    ],
    PAI
    + "cassettes__test_tool_search__test_anthropic_to_google_deferred_capability_history_replay"
    + ".yaml": [
        Ok(U(819, 81), 0.003672, "tool_use", (("load_capability", {"id": "refunds"}),)),
        Ok(
            U(7, 60, w5=1069),
            0.00492975,
            "tool_use",
            (("lookup_refund_policy", {"order_id": "order-123"}),),
        ),
        Ok(U(6, 110, cr=1069, w5=85), 0.00230745, "end_turn"),
        Foreign("generativelanguage.googleapis.com"),
        Foreign("generativelanguage.googleapis.com"),
    ],
    PAI + "models__cassettes__test_anthropic__test_anthropic_cache_real_api.yaml": [
        Ok(U(3, 406, cr=1111), 0.0064323, "end_turn"),
        Ok(U(3, 33, cr=1111, w5=418), 0.0024048, "end_turn"),
    ],
    PAI + "models__cassettes__test_anthropic__test_anthropic_compaction_usage_with_cache.yaml": [
        # top level says in=229 out=5 and no cache write; the compaction iteration wrote
        # 55,096 tokens to the cache, and only usage.iterations says so
        Ok(U(100 + 229, 131 + 5, w5=55_096), 0.209637, "end_turn"),
    ],
    PAI
    + "models__cassettes__test_anthropic__test_anthropic_compaction_usage_with_cache_streaming"
    + ".yaml": [
        # message_start (in=100, cache_read=55,096) and message_delta (in=181, cache_read=0)
        # disagree; the delta's iterations carry the bill
        Ok(U(100 + 181, 83 + 8, cr=55_096), 0.0187368, "end_turn"),
    ],
    PAI
    + "models__cassettes__test_anthropic__test_anthropic_explicit_effort_xhigh_unsupported_model"
    + "_errors.yaml": [
        Err(400, False, "invalid_request_error", "does not support effort level 'xhigh'"),
    ],
    PAI + "models__cassettes__test_anthropic__test_anthropic_mixed_strict_tool_run.yaml": [
        # these 200s carry a retry-after header: a success is never delayed by it
        Ok(U(628, 50), 0.002634, "tool_use", (("country_source", {}),)),
        Ok(U(691, 53), 0.002868, "tool_use", (("capital_lookup", {"country": "Japan"}),)),
        Ok(U(757, 6), 0.002361, "end_turn"),
    ],
    PAI + "models__cassettes__test_anthropic__test_anthropic_opus_5_features.yaml": [
        # 33 thinking tokens are part of output_tokens=44
        Ok(U(13, 44), 0.001165, "end_turn"),
    ],
    PAI + "models__cassettes__test_anthropic__test_anthropic_web_search_tool.yaml": [
        Ok(U(8984, 520), 0.034752, "end_turn"),
        Ok(U(19859, 544), 0.067737, "end_turn"),
    ],
    PAI + "models__cassettes__test_anthropic__test_multiple_parallel_tool_calls.yaml": [
        Ok(
            U(423, 202),
            0.001433,
            "tool_use",
            tuple(
                ("retrieve_entity_info", {"name": n}) for n in ("Alice", "Bob", "Charlie", "Daisy")
            ),
        ),
        Ok(U(771, 77), 0.001156, "end_turn"),
    ],
    PAI
    + "models__cassettes__test_anthropic_mid_conversation_system__test_inline_system_prompt_"
    + "cache_prefix_is_reused.yaml": [
        Ok(U(2, 4, w5=1590), 0.0100475, "end_turn"),
        Ok(U(2, 4, cr=1590), 0.000905, "end_turn"),
    ],
    LLMA + "test_fixed_version_tool_chain_with_thinking_display_regression.yaml": [
        Ok(U(598, 92), 0.001058, "tool_use", (("fixed_version", {}),)),
        Ok(U(707, 89), 0.001152, "end_turn"),
    ],
    LLMA + "test_prompt_with_prefill_and_stop_sequences.yaml": [
        Ok(U(16, 28), 0.000156, "stop_sequence"),
    ],
    LLMA + "test_tools.yaml": [
        # two parallel calls whose input arrives as an empty partial_json
        Ok(
            U(542, 62),
            0.000852,
            "tool_use",
            (("pelican_name_generator", {}), ("pelican_name_generator", {})),
        ),
        Ok(U(678, 82), 0.001088, "end_turn"),
    ],
    LLMA + "test_web_search.yaml": [
        # message_start says input_tokens=2039; the final message_delta says 10423
        Ok(U(10423, 341), 0.18192, "end_turn"),
    ],
    # --- OpenAI ----------------------------------------------------------------------------
    DD + "openai__cassettes__v1__chat_completion_prompt_caching_cache_read.yaml": [
        Ok(U(1220 - 1152, 100, cr=1152), 0.00261, "max_tokens"),
    ],
    DD + "openai__cassettes__v1__chat_completion_stream_prompt_caching_cache_read.yaml": [
        Ok(U(1420 - 1280, 100, cr=1280), 0.00295, "max_tokens"),
    ],
    DD + "openai__cassettes__v1__response_error.yaml": [
        Err(401, False, "invalid_request_error", "Incorrect API key provided"),
    ],
    DD + "openai__cassettes__v1__response_stream_incomplete.yaml": [
        # text was produced, yet the terminal response.incomplete reports zero usage
        Ok(U(0, 0), 0.0, "max_tokens", warning=True),
    ],
    DD + "openai__cassettes__v1__responses_stream_prompt_caching_cache_read.yaml": [
        Ok(U(1515 - 1390, 8, cr=1390), 0.00213, "end_turn"),
    ],
    PAI + "models__cassettes__test_openai__test_openai_o1_mini_system_role[system].yaml": [
        Err(400, False, "invalid_request_error", "does not support 'system' with this model"),
    ],
    PAI + "models__cassettes__test_openai_prompt_cache__test_openai_chat_prompt_cache_e2e.yaml": [
        # prompt_tokens=4020 holds cache_write_tokens=4012: 8 uncached
        Ok(U(8, 4, w5=4012), 0.020172, "end_turn"),
        Ok(U(8, 4, cr=4012), 0.0017168, "end_turn"),
    ],
    PAI
    + "models__cassettes__test_openai_prompt_cache__test_openai_responses_prompt_cache_e2e"
    + ".yaml": [
        Ok(U(8, 5, w5=4012), 0.020192, "end_turn"),
        Ok(U(8, 5, cr=4012), 0.0017368, "end_turn"),
    ],
    PAI + "models__cassettes__test_openai_responses__test_openai_responses_model_http_error.yaml": [
        Err(400, False, "invalid_request_error", "decimal below minimum value"),
    ],
    PAI + "models__cassettes__test_openai_responses__test_openai_responses_streaming_usage.yaml": [
        # 448 reasoning tokens inside output_tokens=469
        Ok(U(53, 469), 0.00475625, "tool_use", (("final_result", {"result": 6666}),)),
    ],
    LLM + "test_openai_responses__test_responses_interleaved_reasoning_between_tool_calls.yaml": [
        Ok(U(88, 65), 0.00239, "tool_use", (("db_lookup", {"key": "start"}),)),
        Ok(U(171, 118), 0.004395, "tool_use", (("db_lookup", {"key": "7"}),)),
        Ok(U(302, 217), 0.00802, "tool_use", (("db_lookup", {"key": "step1"}),)),
        Ok(
            U(532, 119),
            0.00623,
            "tool_use",
            tuple(
                ("db_lookup", {"key": k})
                for k in ("begin", "value", "the value 7", "Begin with the value 7.", "start2")
            ),
        ),
    ],
    LLM + "test_openai_responses__test_responses_tool_use_streaming.yaml": [
        Ok(U(58, 23), 0.00098, "tool_use", (("multiply", {"a": 1231, "b": 2331}),)),
        Ok(U(94, 18), 0.00101, "end_turn"),
    ],
    LLM + "test_tools__test_tool_use_basic.yaml": [
        Ok(U(54, 20), 0.0000201, "tool_use", (("multiply", {"a": 1231, "b": 2331}),)),
        Ok(U(87, 26), 0.00002865, "end_turn"),
    ],
    LLM + "test_tools__test_tool_use_chain_of_two_calls.yaml": [
        Ok(U(92, 17), 0.000024, "tool_use", (("lookup_population", {"country": "Crumpet"}),)),
        Ok(U(118, 18), 0.0000285, "tool_use", (("can_have_dragons", {"population": 123124}),)),
        Ok(U(146, 3), 0.0000237, "end_turn"),
    ],
}


# -- fixtures and drivers ---------------------------------------------------------------------


@pytest.fixture
def folder() -> Path:
    return cassette_dir()


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    srv = ReplayServer()
    try:
        yield srv
    finally:
        srv.close()


def api_of(interaction: Interaction) -> str:
    if interaction.host == "api.anthropic.com":
        return "anthropic"
    return "chat" if interaction.path.endswith("/chat/completions") else "responses"


def adapter_for(interaction: Interaction, url: str) -> AnthropicClient | OpenAIClient:
    api = api_of(interaction)
    if api == "anthropic":
        return AnthropicClient(base_url=url, api_key=KEY, stream=interaction.is_sse)
    return OpenAIClient(api=api, base_url=url + "/v1", api_key=KEY, stream=interaction.is_sse)


def request_for(interaction: Interaction) -> ModelRequest:
    assert interaction.request is not None
    return {"anthropic": anthropic_request, "chat": chat_request, "responses": responses_request}[
        api_of(interaction)
    ](interaction.request)


def provider_of(interaction: Interaction) -> str:
    return "anthropic" if api_of(interaction) == "anthropic" else "openai"


def check_sent(interaction: Interaction, sent: Any, request: ModelRequest) -> None:
    """What the adapter sent says what the recorded request said."""
    recorded = interaction.request
    assert recorded is not None
    assert sent.path.split("?")[0] == interaction.path
    body = sent.body
    assert body["model"] == recorded["model"]
    assert bool(body.get("stream")) == interaction.is_sse
    assert sent.headers.get("x-stainless-retry-count", "0") == "0"  # the SDK never retried
    api = api_of(interaction)
    if api == "anthropic":
        assert "anthropic-beta" not in sent.headers
        assert body["messages"] == request.messages
        if all(isinstance(m, dict) for m in recorded["messages"]):
            assert body["messages"] == recorded["messages"]
        assert body.get("system", "") == (recorded.get("system") or "")
        assert body["max_tokens"] == recorded["max_tokens"]
        ours = [t["name"] for t in body.get("tools", [])]
        assert ours == [t["name"] for t in recorded.get("tools", []) if "input_schema" in t]
        for mine, theirs in zip(body.get("tools", []), recorded.get("tools", []), strict=False):
            assert mine.get("cache_control") == theirs.get("cache_control")
    elif api == "chat":
        assert chat_facts(body["messages"]) == chat_facts(recorded["messages"])
        assert [t["function"]["name"] for t in body.get("tools", [])] == [
            t["function"]["name"] for t in recorded.get("tools", [])
        ]
        if interaction.is_sse:
            assert body["stream_options"] == {"include_usage": True}
    else:
        assert responses_facts(body["input"]) == responses_facts(recorded.get("input", []))
        assert body.get("instructions", "") == (recorded.get("instructions") or "")
        assert [t["name"] for t in body.get("tools", [])] == [
            t["name"] for t in recorded.get("tools", []) if t.get("type") == "function"
        ]


def check_answer(interaction: Interaction, response: ModelResponse, expect: Ok) -> None:
    api = api_of(interaction)
    assert response.text() == recorded_text(api, interaction.body, interaction.is_sse)
    assert [(u.name, u.input) for u in response.tool_uses()] == list(expect.tools)
    assert response.stop_reason == expect.stop
    assert response.usage == expect.usage
    assert (response.usage_warning is not None) == expect.warning
    model = interaction.request["model"]  # type: ignore[index]
    price = price_for(model, provider_of(interaction), {})
    assert response.usage.cost(price) == pytest.approx(expect.usd, rel=1e-9, abs=1e-15)


def check_error(err: ProviderError, expect: Err, interaction: Interaction) -> None:
    assert err.status == expect.status
    assert err.retryable is expect.retryable
    assert err.error_type == expect.error_type
    assert expect.message in err.message
    assert err.provider == provider_of(interaction)


# -- the corpus -------------------------------------------------------------------------------


def test_every_cassette_file_and_interaction_has_expectations(folder: Path) -> None:
    found = {f"{p.parent.name}/{p.name}": p for p in all_files(folder)}
    assert set(found) == set(EXPECTED)
    assert len(found) == 40
    for name, path in found.items():
        assert len(load(path)) == len(EXPECTED[name]), name


@pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")
@pytest.mark.parametrize("name", sorted(EXPECTED), ids=lambda n: n.split("/")[-1][-70:])
def test_cassette_replays_through_sdk_and_adapter(
    name: str, folder: Path, server: ReplayServer
) -> None:
    interactions = load(folder / name)
    pairs = list(zip(interactions, EXPECTED[name], strict=True))
    for interaction, expect in pairs:
        if isinstance(expect, Foreign):
            # Gemini calls in a mixed-provider recording: no adapter of ours speaks to them.
            assert interaction.host == expect.host
            continue
        server.serve(interaction)
    for interaction, expect in pairs:
        if isinstance(expect, Foreign):
            continue
        before = len(server.received)
        adapter = adapter_for(interaction, server.url)
        request = request_for(interaction)
        if isinstance(expect, Ok):
            response = adapter.complete(request)
            check_answer(interaction, response, expect)
        elif expect.retryable:
            with pytest.raises(ProviderError) as info:
                adapter.complete(request)
            check_error(info.value, expect, interaction)
        else:
            # Not retryable: the retry policy gives up at once, with the provider's message.
            clock = FakeClock()
            retrying = RetryingClient(adapter, sleep=clock.advance, monotonic=clock.monotonic)
            with pytest.raises(ModelCallFailed) as failed:
                retrying.complete(request)
            assert expect.message in str(failed.value)
            assert isinstance(failed.value.__cause__, ProviderError)
            check_error(failed.value.__cause__, expect, interaction)
            assert clock.monotonic() == 0.0
        assert len(server.received) == before + 1  # exactly one HTTP request per interaction
        check_sent(interaction, server.received[-1], request)


# -- retries, waits and outages ---------------------------------------------------------------

SNAPSHOT_429 = [
    SDK
    + "_parse____inline_snapshot____test_messages__TestAsyncParse__"
    + "d743d628-16aa-4c9f-ae78-51deb578f746.json",
    SDK
    + "_parse____inline_snapshot____test_messages__TestAsyncStream__"
    + "a8b7dbb8-2321-4624-abdb-7ba2136b5c38.json",
]


class Sleeper:
    """The harness's sleep in tests: moves a FakeClock and remembers each wait."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(seconds)


@pytest.mark.parametrize("name", SNAPSHOT_429, ids=["non-streaming", "streaming"])
def test_recorded_429s_are_retried_until_the_200(
    name: str, folder: Path, server: ReplayServer
) -> None:
    interactions = load(folder / name)
    assert [i.status for i in interactions] == [429, 429, 200]
    assert interactions[0].headers["x-should-retry"] == "true"
    for interaction in interactions:
        server.serve(interaction)
    clock = FakeClock()
    sleeper = Sleeper(clock)
    client = RetryingClient(
        adapter_for(interactions[2], server.url),
        base_delay_s=1.0,
        max_delay_s=60.0,
        sleep=sleeper,
        monotonic=clock.monotonic,
        jitter=lambda: 1.0,
    )
    response = client.complete(request_for(interactions[2]))
    assert len(server.received) == 3
    assert sleeper.waits == [1.0, 2.0]  # exponential backoff; the recording kept no retry-after
    assert clock.monotonic() == 3.0
    expect = EXPECTED[name][2]
    assert isinstance(expect, Ok)
    check_answer(interactions[2], response, expect)


def test_retry_after_is_honoured_never_shortened(folder: Path, server: ReplayServer) -> None:
    """The recorded 429 body, composed with the retry-after headers the recording dropped."""
    interactions = load(folder / SNAPSHOT_429[0])
    server.serve(interactions[0], retry_after="7")
    server.serve(interactions[1], retry_after_ms="2500")
    server.serve(interactions[2], retry_after="30")  # a success is not delayed by it
    clock = FakeClock()
    sleeper = Sleeper(clock)
    client = RetryingClient(
        adapter_for(interactions[2], server.url),
        sleep=sleeper,
        monotonic=clock.monotonic,
        jitter=lambda: 0.0,  # backoff alone would wait 0.5 s, then 1 s
    )
    response = client.complete(request_for(interactions[2]))
    assert sleeper.waits == [7.0, 2.5]
    assert response.usage == U(406, 50)


def test_a_long_outage_ends_dependency_unavailable(folder: Path, server: ReplayServer) -> None:
    rate_limited = load(folder / SNAPSHOT_429[0])[0]
    for _ in range(20):
        server.serve(rate_limited, retry_after="120")
    clock = FakeClock()
    sleeper = Sleeper(clock)
    client = RetryingClient(
        adapter_for(rate_limited, server.url),
        max_attempts=100,
        outage_limit_s=900.0,
        sleep=sleeper,
        monotonic=clock.monotonic,
    )
    with pytest.raises(DependencyUnavailable) as info:
        client.complete(request_for(rate_limited))
    # tries at t = 0, 120, ..., 840; the next wait would end at 960 > 900
    assert len(server.received) == 8
    assert sleeper.waits == [120.0] * 7
    assert clock.monotonic() == 840.0
    assert "outage limit" in str(info.value) and "HTTP 429" in str(info.value)
    stop = classify_exception(info.value)
    assert stop is not None and stop.detail == "dependency_unavailable"
    assert describe(stop).resumable is True


def test_connection_refused_is_retried_then_gives_up() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # nothing listens on ``port`` now
    clock = FakeClock()
    sleeper = Sleeper(clock)
    client = RetryingClient(
        AnthropicClient(base_url=f"http://127.0.0.1:{port}", api_key=KEY, timeout_s=5.0),
        max_attempts=3,
        sleep=sleeper,
        monotonic=clock.monotonic,
        jitter=lambda: 1.0,
    )
    request = ModelRequest(
        model="claude-haiku-4-5",
        purpose="plan",
        system="s",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=8,
    )
    with pytest.raises(DependencyUnavailable) as info:
        client.complete(request)
    assert sleeper.waits == [1.0, 2.0]
    assert "after 3 attempts" in str(info.value) and "(no response)" in str(info.value)


# -- the rest of the chain: spec -> client -> gateway -> ledger -------------------------------


def test_spec_built_client_through_the_gateway_bills_the_compaction(
    folder: Path, server: ReplayServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A spec names no key: the SDK reads it from the environment, as in production.
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    name = (
        PAI + "models__cassettes__test_anthropic__test_anthropic_compaction_usage_with_cache.yaml"
    )
    (interaction,) = load(folder / name)
    server.serve(interaction)
    spec = ModelSpec(
        provider="anthropic", name="claude-sonnet-4-6", base_url=server.url, stream=False
    )
    clock = FakeClock()
    client = build_client(spec, sleep=clock.advance, monotonic=clock.monotonic)
    assert isinstance(client, RetryingClient)
    price = price_for("claude-sonnet-4-6", "anthropic", {})
    ledger = Ledger(prices=PriceTable({"claude-sonnet-4-6": price}), limit_usd=5.0)
    spend = Journal(tmp_path / "spend.jsonl", durable=True)
    trace = Trace(tmp_path / "trace.jsonl", clock.monotonic, clock.now_iso)
    gateway = ModelGateway(client, ledger, spend, trace, clock.monotonic, BudgetFractions())
    response = gateway.call(request_for(interaction))
    assert response.text() == "Hello!"
    assert ledger.spent_usd == pytest.approx(0.209637)
    spent = [r for r in read_journal(tmp_path / "spend.jsonl") if r["kind"] == "spend"]
    assert spent[0]["usage"]["cache_write_5m"] == 55_096


def test_an_incomplete_zero_usage_answer_is_flagged_in_the_trace(
    folder: Path, server: ReplayServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    (interaction,) = load(folder / (DD + "openai__cassettes__v1__response_stream_incomplete.yaml"))
    server.serve(interaction)
    spec = ModelSpec(provider="openai", name="gpt-4o", base_url=server.url + "/v1")
    clock = FakeClock()
    client = build_client(spec, sleep=clock.advance, monotonic=clock.monotonic)
    ledger = Ledger(prices=PriceTable({"gpt-4o": price_for("gpt-4o", "openai", {})}), limit_usd=1)
    trace = Trace(tmp_path / "trace.jsonl", clock.monotonic, clock.now_iso)
    gateway = ModelGateway(
        client,
        ledger,
        Journal(tmp_path / "spend.jsonl", durable=True),
        trace,
        clock.monotonic,
        BudgetFractions(),
    )
    request = request_for(interaction)
    response = gateway.call(request)
    assert response.stop_reason == "max_tokens" and response.text()
    # Zero usage on an answer that produced text cannot be the bill: the worst case is booked.
    worst = ledger.worst_case("gpt-4o", estimate_input_tokens(request), request.max_tokens)
    assert worst > 0 and ledger.spent_usd == worst
    assert not response.usage_known and response.usage.output == request.max_tokens
    (call,) = [e for e in read_journal(tmp_path / "trace.jsonl") if e["kind"] == "model_call"]
    assert "zero usage" in call["usage_warning"]
    assert call["booked_at_worst_case"] is True
    (spent,) = [r for r in read_journal(tmp_path / "spend.jsonl") if r["kind"] == "spend"]
    assert [w["kind"] for w in spent["warnings"]] == ["usage_unknown"]


# -- the beta path and the compatible flavour -------------------------------------------------


@pytest.mark.parametrize(
    ("name", "stream"),
    [
        (PAI + "models__cassettes__test_anthropic__test_anthropic_opus_5_features.yaml", False),
        (
            PAI
            + "models__cassettes__test_anthropic__test_anthropic_compaction_usage_with_cache_"
            + "streaming.yaml",
            True,
        ),
    ],
)
def test_task_budget_goes_to_the_beta_api(
    name: str, stream: bool, folder: Path, server: ReplayServer
) -> None:
    (interaction,) = load(folder / name)
    server.serve(interaction)
    request = request_for(interaction).model_copy(
        update={"task_budget_tokens": 40_000, "effort": "high"}
    )
    response = AnthropicClient(base_url=server.url, api_key=KEY, stream=stream).complete(request)
    sent = server.received[-1]
    assert sent.path.split("?")[0] == "/v1/messages"
    assert sent.headers["anthropic-beta"].split(",") == [TASK_BUDGET_BETA]
    assert sent.body["output_config"] == {
        "task_budget": {"type": "tokens", "total": 40_000},
        "effort": "high",
    }
    expect = EXPECTED[name][0]
    assert isinstance(expect, Ok)
    check_answer(interaction, response, expect)


def test_openai_compatible_chat_sends_max_tokens(folder: Path, server: ReplayServer) -> None:
    name = LLM + "test_tools__test_tool_use_chain_of_two_calls.yaml"
    interaction = load(folder / name)[0]
    server.serve(interaction)
    spec = ModelSpec(
        provider="openai-compatible", name="gpt-4o-mini", base_url=server.url + "/v1", stream=False
    )
    client = build_client(spec)
    response = client.complete(request_for(interaction))
    assert isinstance(response, ModelResponse)
    body = server.received[-1].body
    assert body["max_tokens"] == 1024 and "max_completion_tokens" not in body
    assert [(u.name, u.input) for u in response.tool_uses()] == [
        ("lookup_population", {"country": "Crumpet"})
    ]
    assert json.loads(json.dumps(body["tools"]))[0]["function"]["name"] == "lookup_population"
