"""The ledger's arithmetic: whole nano-dollars, rates read as written, bills above their
reservation booked in full, unknown bills booked at the worst case, and price tiers.

Prices are Opus-class unless a test says otherwise: $5/M input, $25/M output, $0.50/M cache
reads, $6.25/M 5-minute cache writes, $10/M 1-hour cache writes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from genai_prices.data_snapshot import get_snapshot
from genai_prices.types import TieredPrices

from overnight.config.prices import genai_price
from overnight.core.budget import (
    MONEY,
    SECONDS,
    STEPS,
    TOKENS,
    BudgetFractions,
    Ledger,
    Price,
    PriceTable,
    PriceTier,
    Usage,
    exact,
    money_band,
    reading,
)
from overnight.core.errors import BudgetRefused
from overnight.store.result import BudgetBlock

OPUS = "opus-class"
OPUS_PRICE = Price(5.0, 25.0, 0.5, 6.25, 10.0)
#: A model whose every rate doubles past 200K input tokens.
TIERED = "tiered"
TIERED_PRICE = Price(
    3.0, 15.0, 0.3, 3.75, 6.0, tiers=(PriceTier(200_000, Price(6.0, 22.5, 0.6, 7.5, 12.0)),)
)


def ledger(limit_usd: float, enforce_fraction: float = 1.0) -> Ledger:
    return Ledger(PriceTable({OPUS: OPUS_PRICE, TIERED: TIERED_PRICE}), limit_usd, enforce_fraction)


# -- clean numbers ------------------------------------------------------------------------------


def test_lines_are_the_decimals_the_user_wrote() -> None:
    f = BudgetFractions()
    money = reading(MONEY, 0.0, 5.0, f)
    # float arithmetic says 5.0 * 0.92 == 4.6000000000000005 and 1.1 * 0.9 == 0.9900000000000001
    assert 5.0 * 0.92 != 4.6 and 1.1 * 0.9 != 0.99
    assert money.enforced_at == 4.6 and repr(money.enforced_at) == "4.6"
    assert repr(reading(MONEY, 0.0, 1.1, f).stop_at) == "0.99"
    assert ledger(5.0, 0.92).enforced_usd == 4.6
    # 100 x 0.29 is 28.999999999999996 in floats: the line is 29 steps, not 28
    assert reading(STEPS, 0, 100, BudgetFractions(0.29, 0.29, 0.29)).enforced_at == 29
    seconds = reading(SECONDS, 12.0000000001, 0.1 * 3600, f)
    assert repr(seconds.limit) == "360.0" and repr(seconds.enforced_at) == "331.2"


def test_counts_are_integers_in_the_result() -> None:
    f = BudgetFractions()
    steps = reading(STEPS, 2, 10, f)
    tokens = reading(TOKENS, 1_234, 10_000, f)
    for r in (steps, tokens):
        assert type(r.used) is int and type(r.enforced_at) is int and type(r.stop_at) is int
    block = BudgetBlock(
        used=steps.used,
        limit=steps.limit,
        stop_at=steps.stop_at,
        enforced_at=steps.enforced_at,
        at_stop=steps.used,
    )
    assert json.loads(block.model_dump_json()) == {
        "used": 2,
        "limit": 10,
        "stop_at": 9,
        "enforced_at": 9,
        "refused_at": None,
        "at_stop": 2,
    }
    assert '"used":2,' in block.model_dump_json()


def test_many_small_bills_add_up_to_exactly_what_they_are() -> None:
    led = ledger(100.0)
    # 4,000 output tokens at $25/M are $0.10; ten of them are $1.00, not 0.9999999999999999
    assert sum([0.1] * 10) != 1.0
    for _ in range(10):
        reservation = led.reserve(OPUS, 0, 4_000)
        led.book(OPUS, Usage(output=4_000), reservation)
    assert led.spent_usd == 1.0
    assert led.spent_nanos == 1_000_000_000


def test_a_rate_is_read_as_written_and_a_bill_is_exact() -> None:
    price = Price(0.3, 1.1, 0.03, 0.375, 0.6)
    usage = Usage(input=7, output=3, cache_read=11)
    # 7 x 0.3 + 3 x 1.1 + 11 x 0.03 = 5.73 micro-dollars, exactly
    assert usage.exact_usd(price) == Decimal("0.00000573")
    assert usage.cost(price) == 5.73e-6
    assert usage.cost_nanos(price) == 5_730
    # Default cache rates are multiplied as decimals too: $3 input reads at $0.30, exactly.
    assert 3.0 * 0.1 != 0.3
    derived = Price.from_input_output(3.0, 15.0)
    assert (derived.cache_read, derived.cache_write_5m, derived.cache_write_1h) == (0.3, 3.75, 6.0)
    assert Usage(cache_read=1_000).cost_nanos(derived) == 300_000


def test_a_fraction_of_a_nano_dollar_is_booked_up_never_down() -> None:
    fine = Price(0.0375, 0.0001, 0.0, 0.0, 0.0)  # rates finer than a thousandth of a $/M
    usage = Usage(input=7, output=1)  # 262.5 + 0.1 nano-dollars
    assert usage.exact_usd(fine) == Decimal("0.0000002626")
    assert usage.cost_nanos(fine) == 263  # 262.6 nano-dollars, booked as 263
    led = Ledger(PriceTable({"fine": fine}), 1.0)
    reservation = led.reserve("fine", 7, 1)
    assert reservation.worst_nanos == 263 and led.book("fine", usage, reservation).nanos == 263


def test_genai_prices_rates_survive_the_conversion_exactly() -> None:
    """Every Anthropic and OpenAI model genai-prices knows: each rate of the Price, every tier
    of it, is genai-prices' Decimal exactly."""
    now = datetime.now(UTC)
    checked = tiered = 0
    for provider in get_snapshot().providers:
        if provider.id not in ("anthropic", "openai"):
            continue
        for model in provider.models:
            price = genai_price(model.id, provider.id, now)
            if price is None:
                continue
            rates = model.get_prices(now)
            for field, key in (("input", "input_mtok"), ("output", "output_mtok")):
                theirs = getattr(rates, key)
                if not isinstance(theirs, TieredPrices):
                    assert exact(getattr(price, field)) == theirs, (model.id, key)
                    continue
                tiered += 1
                assert exact(getattr(price, field)) == theirs.base, (model.id, key)
                ours = {t.above: exact(getattr(t.price, field)) for t in price.tiers}
                for tier in theirs.tiers:
                    assert ours[tier.start] == tier.price, (model.id, key, tier.start)
            checked += 1
    assert checked > 20 and tiered > 0


# -- bills the reservation did not foresee ------------------------------------------------------


def test_a_bill_above_its_reservation_is_booked_in_full_and_said_to_be() -> None:
    led = ledger(0.02)
    reservation = led.reserve(OPUS, 100, 100)  # $0.003 worst case
    assert reservation.worst_usd == 0.003
    booking = led.book(OPUS, Usage(input=2_000, output=399_800), reservation)
    assert booking.usd == 10.005
    assert booking.over_reservation and not booking.at_reservation
    assert led.spent_usd == 10.005  # spent past the cap: a fact, recorded
    assert led.held_usd == 0.0
    # The next stop check reads money exhausted, and nothing more can be reserved.
    assert reading(MONEY, led.spent_usd, 0.02, BudgetFractions()).exhausted
    with pytest.raises(BudgetRefused):
        led.reserve(OPUS, 1, 1)


def test_a_bill_within_its_reservation_is_not_flagged() -> None:
    led = ledger(1.0)
    reservation = led.reserve(OPUS, 1_000, 1_000)
    booking = led.book(OPUS, Usage(input=1_000, output=1_000), reservation)
    assert booking.nanos == reservation.worst_nanos and not booking.over_reservation


def test_an_unknown_bill_is_booked_at_the_reservation() -> None:
    led = ledger(1.0)
    reservation = led.reserve(OPUS, 10_000, 4_000, cache_ttl="1h")
    assert reservation.worst_usd == 0.2  # 10K input at the 1-hour write rate, 4K output
    booking = led.book(OPUS, None, reservation)
    assert booking.at_reservation and booking.usd == 0.2
    assert led.spent_usd == 0.2 and led.tokens_used == 14_000
    # What the call is counted as, tokens included, costs exactly that worst case.
    worst = led.worst_usage(OPUS, 10_000, 4_000, "1h")
    assert worst == Usage(output=4_000, cache_write_1h=10_000)
    assert worst.cost(OPUS_PRICE) == 0.2
    with pytest.raises(ValueError):
        led.book(OPUS, None)  # an unknown bill needs the reservation it is booked at


def test_a_usage_record_cannot_hold_a_negative_or_fractional_count() -> None:
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(ValueError):
            Usage(output=bad)  # type: ignore[arg-type]


# -- price tiers ------------------------------------------------------------------------------


def test_a_request_that_can_reach_the_upper_tier_is_reserved_there() -> None:
    led = ledger(100.0)
    # 300K bytes may be up to 300K tokens: past 200K every token costs the upper tier's rate
    big = led.reserve(TIERED, 300_000, 1_000)
    assert big.worst_usd == pytest.approx(300_000 * 6.0 / 1e6 + 1_000 * 22.5 / 1e6)
    assert big.worst_nanos == 1_822_500_000
    # 150K bytes cannot reach it
    small = led.reserve(TIERED, 150_000, 1_000)
    assert small.worst_usd == (150_000 * 3 + 1_000 * 15) / 1e6 == 0.465


def test_a_bill_is_priced_at_the_tier_its_input_falls_in() -> None:
    # The tier counts every input token, cache reads included: 150K + 60K is past 200K.
    past = Usage(input=150_000, output=1_000, cache_read=60_000)
    assert past.cost(TIERED_PRICE) == (150_000 * 6 + 1_000 * 22.5 + 60_000 * 0.6) / 1e6
    under = Usage(input=140_000, output=1_000, cache_read=60_000)  # exactly 200K: base tier
    assert under.cost(TIERED_PRICE) == (140_000 * 3 + 1_000 * 15 + 60_000 * 0.3) / 1e6
    led = ledger(100.0)
    reservation = led.reserve(TIERED, 250_000, 1_000)
    booking = led.book(TIERED, past, reservation)
    assert booking.usd == 0.9585 and not booking.over_reservation


def test_the_output_a_reserve_can_pay_for_accounts_for_tiers() -> None:
    led = ledger(3.0)
    tokens = led.max_output_tokens(TIERED, 250_000, line="reserve")
    # $3.00 - 250K x $6/M = $1.50 of output at the upper tier's $22.50/M
    assert tokens == 66_666
    led.reserve(TIERED, 250_000, tokens, line="reserve")
    with pytest.raises(BudgetRefused):
        ledger(3.0).reserve(TIERED, 250_000, tokens + 1, line="reserve")
    assert ledger(1.0).max_output_tokens(TIERED, 250_000) == 0  # not even the input fits


def test_price_tiers_must_rise() -> None:
    flat = Price(1.0, 1.0, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError):
        Price(1.0, 1.0, 1.0, 1.0, 1.0, tiers=(PriceTier(200, flat), PriceTier(100, flat)))


def test_the_money_band_reads_the_same_lines_as_the_stop_check() -> None:
    f = BudgetFractions()
    limit = 28.0
    stop_at = reading(MONEY, 0.0, limit, f).stop_at
    assert stop_at == 25.2
    assert money_band(25.2, limit, f) == "finish"
    assert money_band(25.199999, limit, f) == "notice"
    assert money_band(19.6, limit, f) == "notice"
    assert money_band(19.599999, limit, f) == "free"
