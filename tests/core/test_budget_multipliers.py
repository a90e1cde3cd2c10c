"""Multipliers and per-use fees in the ledger: a request served a dearer (or cheaper) way is
reserved and booked at its factor, and what is billed by the use is held beside its tokens.

Prices: $3/M input, $15/M output (cache reads $0.30, 5-minute writes $3.75, 1-hour $6).
Expectations are computed by hand in exact decimals.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from overnight.core.budget import NANOS, CacheTTL, Ledger, Price, PriceTable, PriceTier, Usage
from overnight.core.errors import BudgetRefused

M = "m"
PRICE = Price.from_input_output(3.0, 15.0)


def ledger(price: Price = PRICE, limit_usd: float = 10.0) -> Ledger:
    return Ledger(PriceTable({M: price}), limit_usd=limit_usd)


def nanos(usd: Decimal) -> int:
    """Exact dollars as the ledger books them: whole nano-dollars, rounded up."""
    return int((usd * NANOS).to_integral_value(ROUND_CEILING))


def tokens_usd(input_tokens: int, output_tokens: int) -> Decimal:
    return (input_tokens * Decimal(3) + output_tokens * Decimal(15)) / 1_000_000


# -- Price: fees and multipliers -----------------------------------------------------------------


def test_price_names_its_per_use_fees_and_multipliers() -> None:
    price = Price(
        3.0,
        15.0,
        0.3,
        3.75,
        6.0,
        per_use=(("web_search", 0.01), ("web_fetch", 0.0)),
        multipliers=(("speed=fast", 6.0), ("service_tier=priority", 1.8)),
    )
    assert price.fee("web_search") == 0.01
    assert price.fee("web_fetch") == 0.0
    assert price.fee("code_execution") is None
    assert price.multiplier("speed=fast") == 6.0
    assert price.multiplier("service_tier=priority") == 1.8
    assert price.multiplier("service_tier=flex") is None


def test_a_price_without_fees_or_multipliers_prices_none() -> None:
    assert PRICE.fee("web_search") is None
    assert PRICE.multiplier("speed=fast") is None


def test_a_negative_fee_is_refused() -> None:
    with pytest.raises(ValueError, match="web_search"):
        Price(3.0, 15.0, 0.3, 3.75, 6.0, per_use=(("web_search", -0.01),))


def test_a_negative_multiplier_is_refused() -> None:
    with pytest.raises(ValueError, match="speed=fast"):
        Price(3.0, 15.0, 0.3, 3.75, 6.0, multipliers=(("speed=fast", -6.0),))


def test_a_zero_fee_and_a_zero_multiplier_are_accepted() -> None:
    price = Price(
        3.0, 15.0, 0.3, 3.75, 6.0, per_use=(("web_fetch", 0),), multipliers=(("speed=x", 0),)
    )
    assert price.fee("web_fetch") == 0
    assert price.multiplier("speed=x") == 0


# -- reserve -------------------------------------------------------------------------------------


def test_the_worst_case_at_rate_one_is_the_tokens_at_the_models_rates() -> None:
    assert ledger().worst_case_nanos(M, 1_000, 2_000) == nanos(tokens_usd(1_000, 2_000))
    assert ledger().worst_case_nanos(M, 1_000, 2_000) == 33_000_000


def test_a_reservation_at_rate_6_holds_six_times_the_tokens_plus_the_fees() -> None:
    led = ledger()
    base = led.worst_case_nanos(M, 1_000, 2_000)
    fees = 10_000_000  # one web search at $0.01
    reservation = led.reserve(M, 1_000, 2_000, rate=Decimal(6), fees_nanos=fees)
    assert reservation.worst_nanos == 6 * base + fees == 208_000_000
    assert reservation.rate == Decimal(6)
    assert led.held_nanos == 208_000_000
    assert reservation.worst_tokens == 3_000


def test_a_fractional_rate_is_rounded_up_once_on_the_exact_product() -> None:
    led = ledger()
    # 1 input token at $3/M is 3000 nano-dollars; at 1.8x, 5400 exactly
    assert led.worst_case_nanos(M, 1, 0, rate=Decimal("1.8")) == 5_400
    # 1 output token at $15/M is 15000 nano-dollars; at 0.3333x, 4999.5, rounded up to 5000
    assert led.worst_case_nanos(M, 0, 1, rate=Decimal("0.3333")) == 5_000


def test_a_reservation_whose_fees_alone_cross_the_cap_is_refused() -> None:
    led = ledger(limit_usd=1.0)
    with pytest.raises(BudgetRefused):
        led.reserve(M, 0, 0, fees_nanos=NANOS + 1)
    assert led.held_nanos == 0
    led.reserve(M, 0, 0, fees_nanos=NANOS)  # exactly the cap fits
    assert led.held_nanos == NANOS


def test_a_rate_that_makes_the_call_too_dear_is_refused_where_rate_one_fits() -> None:
    led = ledger(limit_usd=1.0)
    # 50,000 output tokens at $15/M: $0.75; at 6x: $4.50
    with pytest.raises(BudgetRefused):
        led.reserve(M, 0, 50_000, rate=Decimal(6))
    assert led.blocked == "money"
    assert ledger(limit_usd=1.0).reserve(M, 0, 50_000).worst_nanos == 750_000_000


# -- book ----------------------------------------------------------------------------------------


def test_a_known_bill_is_priced_at_the_reservations_rate_by_default() -> None:
    led = ledger()
    reservation = led.reserve(M, 1_000, 2_000, rate=Decimal(6))
    booking = led.book(M, Usage(input=1_000, output=500), reservation)
    assert booking.nanos == nanos(tokens_usd(1_000, 500) * 6) == 63_000_000
    assert led.spent_nanos == 63_000_000
    assert led.held_nanos == 0
    assert booking.tokens == 1_500
    assert not booking.at_reservation


def test_an_explicit_rate_overrides_the_reservations() -> None:
    led = ledger()
    reservation = led.reserve(M, 1_000, 2_000, rate=Decimal(6))
    booking = led.book(M, Usage(input=1_000, output=500), reservation, rate=Decimal(1))
    assert booking.nanos == nanos(tokens_usd(1_000, 500)) == 10_500_000


def test_a_known_bill_adds_its_fees() -> None:
    led = ledger()
    reservation = led.reserve(M, 1_000, 2_000, rate=Decimal(6), fees_nanos=20_000_000)
    booking = led.book(M, Usage(input=1_000, output=500), reservation, fees_nanos=20_000_000)
    assert booking.nanos == 63_000_000 + 20_000_000
    assert led.spent_nanos == 83_000_000


def test_a_bill_without_a_reservation_is_priced_at_rate_one_unless_told() -> None:
    usage = Usage(input=1_000, output=500)
    assert ledger().book(M, usage).nanos == 10_500_000
    assert ledger().book(M, usage, rate=Decimal("1.8")).nanos == nanos(
        tokens_usd(1_000, 500) * Decimal("1.8")
    )


def test_an_unknown_bill_books_the_reservation_fees_included() -> None:
    led = ledger()
    reservation = led.reserve(M, 1_000, 2_000, rate=Decimal(6), fees_nanos=10_000_000)
    booking = led.book(M, None, reservation)
    assert booking.at_reservation
    assert booking.nanos == 6 * 33_000_000 + 10_000_000
    assert booking.tokens == 3_000
    assert led.spent_nanos == 208_000_000
    assert led.tokens_used == 3_000
    assert led.held_nanos == 0


def test_a_cheaper_tier_at_half_rate_is_booked_at_half() -> None:
    led = ledger()
    usage = Usage(input=10_000, output=4_000)  # $0.03 + $0.06 = $0.09 at rate 1
    reservation = led.reserve(M, 10_000, 8_000, rate=Decimal("0.5"))
    assert reservation.worst_nanos == nanos(tokens_usd(10_000, 8_000)) // 2 == 75_000_000
    booking = led.book(M, usage, reservation)
    assert booking.nanos == 45_000_000
    assert booking.nanos * 2 == usage.cost_nanos(PRICE)


def test_usage_cost_nanos_scales_every_field_by_the_rate() -> None:
    usage = Usage(input=1, output=1, cache_read=10, cache_write_5m=4, cache_write_1h=2)
    # 3 + 15 + 10 x 0.3 + 4 x 3.75 + 2 x 6 = 48 micro-dollars
    assert usage.cost_nanos(PRICE) == 48_000
    assert usage.cost_nanos(PRICE, Decimal(6)) == 288_000
    assert usage.cost_nanos(PRICE, Decimal("1.8")) == 86_400
    assert usage.cost_nanos(PRICE, Decimal("0.5")) == 24_000


# -- max_output_tokens ---------------------------------------------------------------------------


def test_max_output_tokens_at_rate_6_with_fees_is_the_largest_that_fits() -> None:
    led = ledger()
    fees = 10_000_000
    best = led.max_output_tokens(M, 1_000, rate=Decimal(6), fees_nanos=fees)
    # room: $10 - $0.01 = $9.99; input at 6x: $0.018; output at 6x: $90/M
    assert best == int((Decimal("9.99") - Decimal("0.018")) / Decimal(90) * 1_000_000)
    assert best == 110_800
    with pytest.raises(BudgetRefused):
        ledger().reserve(M, 1_000, best + 1, rate=Decimal(6), fees_nanos=fees)
    reservation = led.reserve(M, 1_000, best, rate=Decimal(6), fees_nanos=fees)
    assert reservation.worst_nanos <= led.enforced_nanos


def test_max_output_tokens_is_zero_when_the_fees_leave_no_room_for_the_input() -> None:
    led = ledger(limit_usd=1.0)
    assert led.max_output_tokens(M, 1_000, fees_nanos=NANOS) == 0


def test_max_output_tokens_counts_what_is_already_spent_and_held() -> None:
    led = ledger()
    led.book(M, Usage(output=100_000))  # $1.50
    led.reserve(M, 0, 100_000, rate=Decimal(2))  # $3.00 held
    best = led.max_output_tokens(M, 0, rate=Decimal(6))
    assert best == int(Decimal("5.5") / Decimal(90) * 1_000_000) == 61_111
    led.reserve(M, 0, best, rate=Decimal(6))
    with pytest.raises(BudgetRefused):
        led.reserve(M, 0, 1, rate=Decimal(6))


TTLS: list[CacheTTL | None] = [None, "5m", "1h"]

TIERED = Price(
    3.0,
    15.0,
    0.3,
    3.75,
    6.0,
    tiers=(PriceTier(200_000, Price(6.0, 22.5, 0.6, 7.5, 12.0)),),
)


@given(
    input_tokens=st.integers(0, 400_000),
    rate=st.sampled_from([Decimal(1), Decimal(6), Decimal("1.8"), Decimal("0.5"), Decimal("1.1")]),
    fees=st.integers(0, 50_000_000),
    tiered=st.booleans(),
    ttl=st.sampled_from(TTLS),
)
def test_max_output_tokens_fits_and_one_more_token_is_refused(
    input_tokens: int, rate: Decimal, fees: int, tiered: bool, ttl: CacheTTL | None
) -> None:
    price = TIERED if tiered else PRICE
    best = ledger(price, 100.0).max_output_tokens(M, input_tokens, ttl, rate=rate, fees_nanos=fees)
    assert best > 0  # $100 covers every input here, at every rate here
    fits = ledger(price, 100.0)
    reservation = fits.reserve(M, input_tokens, best, ttl, rate=rate, fees_nanos=fees)
    assert reservation.worst_nanos <= fits.enforced_nanos
    with pytest.raises(BudgetRefused):
        ledger(price, 100.0).reserve(M, input_tokens, best + 1, ttl, rate=rate, fees_nanos=fees)
