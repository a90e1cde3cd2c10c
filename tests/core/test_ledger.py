"""The ledger: worst cases reserved before a call, every usage field priced after it.

Seed figures use Opus-class prices: $5/M input, $25/M output, $0.50/M cache reads,
$6.25/M 5-minute cache writes, $10/M 1-hour cache writes.
"""

from __future__ import annotations

import pytest

from overnight.core.budget import MONEY, TOKENS, Ledger, Price, PriceTable, Usage
from overnight.core.errors import BudgetRefused, ConfigError
from overnight.messages.types import coerce_response
from overnight.testing import text_answer, usage_dict

OPUS = "opus-class"
OPUS_PRICE = Price(input=5.0, output=25.0, cache_read=0.5, cache_write_5m=6.25, cache_write_1h=10.0)


def table() -> PriceTable:
    return PriceTable({OPUS: OPUS_PRICE})


def ledger(
    limit_usd: float, enforce_fraction: float = 1.0, limit_tokens: int | None = None
) -> Ledger:
    return Ledger(table(), limit_usd, enforce_fraction, limit_tokens)


# -- the four seed checks ---------------------------------------------------------------------


def test_64k_output_tokens_are_1_60_of_exposure() -> None:
    worst = ledger(28.0).worst_case(OPUS, input_tokens=0, max_tokens=64_000)
    assert worst == pytest.approx(1.60, abs=1e-12)


def test_28_dollar_cap_lets_a_20k_in_4k_out_call_through_and_books_0_20() -> None:
    led = ledger(28.0)
    reservation = led.reserve(OPUS, input_tokens=20_000, max_tokens=4_000)
    assert reservation.worst_usd == pytest.approx(0.20, abs=1e-12)
    assert led.held_usd == pytest.approx(0.20, abs=1e-12)

    cost = led.record(OPUS, Usage(input=20_000, output=4_000), reservation)

    assert cost == pytest.approx(0.2000, abs=1e-12)
    assert led.spent_usd == pytest.approx(0.2000, abs=1e-12)
    assert led.held_usd == 0.0
    assert led.tokens_used == 24_000
    assert led.blocked is None
    assert led.refused_at == {}


def test_cached_turn_costs_13_75x_what_input_tokens_alone_suggest() -> None:
    usage = Usage(input=500, cache_read=20_000, cache_write_5m=3_500)
    full = usage.cost(OPUS_PRICE)
    input_only = Usage(input=usage.input).cost(OPUS_PRICE)

    assert round(full, 4) == 0.0344
    assert full == pytest.approx(0.034375, abs=1e-12)
    assert input_only == pytest.approx(0.0025, abs=1e-12)
    assert full / input_only == pytest.approx(13.75, abs=1e-9)

    # The same turn arriving as a provider's usage object is booked at the full figure.
    response = coerce_response(
        text_answer("ok", usage_dict(input=500, cache_read=20_000, cache_write_5m=3_500))
    )
    led = ledger(28.0)
    assert led.record(OPUS, response.usage) == pytest.approx(0.034375, abs=1e-12)
    assert led.tokens_used == 24_000


def test_one_dollar_cap_refuses_a_10k_in_64k_out_reservation_before_the_call() -> None:
    led = ledger(1.00)
    with pytest.raises(BudgetRefused) as info:
        led.reserve(OPUS, input_tokens=10_000, max_tokens=64_000)

    assert "would reach $1.65 of $1.00" in str(info.value)
    assert info.value.budget == "money"
    assert info.value.would_reach == pytest.approx(1.65, abs=1e-12)
    assert led.blocked == "money"
    assert led.refused_at[MONEY] == pytest.approx(1.65, abs=1e-12)
    assert led.spent_usd == 0.0
    assert led.held_usd == 0.0


# -- cases a naive ledger gets wrong ---------------------------------------------------------


def test_one_hour_cache_breakpoints_reserve_input_at_the_highest_rate() -> None:
    led = ledger(100.0)
    million = 1_000_000
    assert led.worst_case(OPUS, million, 0, cache_ttl=None) == pytest.approx(5.0)
    assert led.worst_case(OPUS, million, 0, cache_ttl="5m") == pytest.approx(6.25)
    assert led.worst_case(OPUS, million, 0, cache_ttl="1h") == pytest.approx(10.0)

    marked = led.reserve(OPUS, 100_000, 0, cache_ttl="1h")
    unmarked = led.reserve(OPUS, 100_000, 0)
    assert marked.worst_usd == pytest.approx(1.00)
    assert unmarked.worst_usd == pytest.approx(0.50)


def test_one_hour_cache_writes_are_priced_apart_from_five_minute_writes() -> None:
    assert Usage(cache_write_5m=1_000_000).cost(OPUS_PRICE) == pytest.approx(6.25)
    assert Usage(cache_write_1h=1_000_000).cost(OPUS_PRICE) == pytest.approx(10.0)

    # The provider reports both kinds under one total with a breakdown; the split survives.
    raw = usage_dict(cache_write_5m=200_000, cache_write_1h=100_000)
    assert raw["cache_creation_input_tokens"] == 300_000
    usage = coerce_response(text_answer("ok", raw)).usage
    assert (usage.cache_write_5m, usage.cache_write_1h) == (200_000, 100_000)
    assert usage.cost(OPUS_PRICE) == pytest.approx(1.25 + 1.00)
    # Pricing all 300k writes at the 5-minute rate would have said $1.875.
    assert usage.cost(OPUS_PRICE) != pytest.approx(300_000 * 6.25 / 1e6)


def test_a_token_limit_refuses_by_tokens() -> None:
    led = ledger(1_000.0, limit_tokens=10_000)
    led.reserve(OPUS, 3_000, 3_000)  # held: 6,000 tokens
    with pytest.raises(BudgetRefused) as info:
        led.reserve(OPUS, 2_000, 2_001)

    assert info.value.budget == "tokens"
    assert "would reach 10,001 of 10,000 tokens" in str(info.value)
    assert led.blocked == "tokens"
    assert led.refused_at[TOKENS] == 10_001
    assert MONEY not in led.refused_at
    assert led.spent_usd == 0.0


def test_the_reserve_line_may_use_the_slice_above_enforcement_but_never_the_limit() -> None:
    led = ledger(1.00, enforce_fraction=0.92)
    assert led.enforced_usd == pytest.approx(0.92)
    first = led.reserve(OPUS, 0, 36_000)  # $0.90
    led.record(OPUS, Usage(output=36_000), first)
    assert led.spent_usd == pytest.approx(0.90)

    # $0.04 more would cross the enforcement line: an ordinary call is refused...
    with pytest.raises(BudgetRefused):
        led.reserve(OPUS, 0, 1_600)
    assert led.blocked == "money"
    assert led.refused_at[MONEY] == pytest.approx(0.94)

    # ...and the closing summary may use the reserve above it,
    summary = led.reserve(OPUS, 0, 1_600, line="reserve")
    assert summary.worst_usd == pytest.approx(0.04)
    led.record(OPUS, Usage(output=1_600), summary)
    assert led.spent_usd == pytest.approx(0.94)

    # but never the limit itself.
    with pytest.raises(BudgetRefused) as info:
        led.reserve(OPUS, 0, 2_401, line="reserve")
    assert info.value.cap == pytest.approx(1.00)
    assert led.spent_usd == pytest.approx(0.94)
    assert led.held_usd == 0.0
    # The reserve's own refusal does not rewrite what the ordinary refusal recorded.
    assert led.refused_at[MONEY] == pytest.approx(0.94)


def test_the_reserve_line_respects_a_token_limit_too() -> None:
    led = ledger(1_000.0, enforce_fraction=0.9, limit_tokens=1_000)
    assert led.enforced_tokens == 900
    with pytest.raises(BudgetRefused):
        led.reserve(OPUS, 0, 901)
    led.reserve(OPUS, 0, 1_000, line="reserve")
    with pytest.raises(BudgetRefused):
        led.reserve(OPUS, 0, 1, line="reserve")


def test_a_model_with_no_price_is_a_config_error_never_free() -> None:
    led = ledger(10.0)
    with pytest.raises(ConfigError) as info:
        led.reserve("unpriced-model", 10, 10)
    assert info.value.field == "model.name"
    assert "unpriced-model" in str(info.value)
    with pytest.raises(ConfigError):
        led.record("unpriced-model", Usage(input=10, output=10))
    with pytest.raises(ConfigError):
        led.worst_case("unpriced-model", 10, 10)
    assert led.spent_usd == 0.0
    assert led.tokens_used == 0
    assert led.held_usd == 0.0
