"""Money and the other budgets: prices, usage, the ledger, and the lines each budget has.

Every budget has three lines, all fractions of the limit the user stated:

- ``stop_at``: the stop check ends the run here (for money, the 90% band: finish the task in
  flight, start no new one; for the others, the enforcement line);
- ``enforced_at``: no ordinary call may cross it (92% by default); the ledger refuses the call
  whose worst case would;
- ``limit``: the stated budget, crossed by no reservation. The slice between ``enforced_at``
  and ``limit`` is the wrap-up reserve that pays for the closing summary.

Money is counted in whole nano-dollars (``int``) inside the ledger. Rates are read as the
decimals they were written as (``0.3`` is three tenths, not the binary float nearest it), so a
bill is exact: a rate in $ per million tokens with up to three decimals never leaves a fraction
of a nano-dollar, and one that does (a finer rate) is rounded up, as a reservation is, while a
cap is rounded down: rounding always falls on the side of spending less. Dollars leave the
ledger as floats made from whole nano-dollars, so they print as written (``4.6``, never
``4.6000000000000005``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import Any, Literal

from overnight.core.errors import BudgetRefused, ConfigError

PER_MILLION = 1_000_000
#: Nano-dollars in a dollar: the ledger's unit.
NANOS = 1_000_000_000

#: The budget names used in the terminal result, in the order a stop check reads them.
MONEY, TOKENS, STEPS, SECONDS = "cost_usd", "tokens", "steps", "seconds"
#: A money cap shared with other nights (a fleet's daily cap): in a result only when it applies.
FLEET_MONEY = "fleet_money"
BUDGET_ORDER: tuple[str, ...] = (MONEY, FLEET_MONEY, TOKENS, STEPS)
TIME_ORDER: tuple[str, ...] = (SECONDS,)

#: How a budget is named in a stop reason: ``BUDGET_EXHAUSTED:money``, ``TIME_LIMIT:wall_clock``.
BUDGET_STOP_DETAIL: dict[str, str] = {
    MONEY: "money",
    FLEET_MONEY: "fleet_money",
    TOKENS: "tokens",
    STEPS: "steps",
    SECONDS: "wall_clock",
}

CacheTTL = Literal["5m", "1h"]

_PICO = Decimal("1e-12")
ONE = Decimal(1)


def exact(value: float | Decimal) -> Decimal:
    """A number as the decimal it was written as: a float by its shortest repr (``0.1`` is
    one tenth), an int or a Decimal as it is."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    return Decimal(value)


def to_nanos(usd: float | Decimal, *, up: bool = True) -> int:
    """Dollars as whole nano-dollars, rounded up (a cost) or down (``up=False``: a cap).

    Float noise below a pico-dollar (``0.1 + 0.2``) is dropped first, so a sum of clean
    figures is not pushed up by a nano-dollar it never had.
    """
    amount = exact(usd).quantize(_PICO, ROUND_HALF_EVEN) * NANOS
    return int(amount.to_integral_value(ROUND_CEILING if up else ROUND_FLOOR))


def to_usd(nanos: int) -> float:
    """Whole nano-dollars as dollars: the float nearest the decimal, which prints as it."""
    return nanos / NANOS


def _ceil(value: Decimal) -> int:
    return int(value.to_integral_value(ROUND_CEILING))


def _floor(value: Decimal) -> int:
    return int(value.to_integral_value(ROUND_FLOOR))


def money_line_nanos(limit_usd: float, fraction: float) -> int:
    """A money line (``stop_at``, ``enforced_at``) in nano-dollars: ``limit x fraction``,
    computed on the decimals as written and rounded down."""
    return _floor(exact(limit_usd) * exact(fraction) * NANOS)


def count_line(limit: float, fraction: float) -> int:
    """A line of a counted budget (tokens, steps): ``limit x fraction`` rounded down (a larger
    reserve is the safe side), but never to zero: a limit of one step must allow that step."""
    if limit < 1:
        return 0
    return max(1, _floor(exact(limit) * exact(fraction)))


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens, one rate per usage field.

    ``tiers`` holds the rates of a model whose price rises with the size of the prompt (for
    example past 200K input tokens): a tier applies to every token of a call whose input, all
    input fields together, is more than its ``above``. The fields here are the base tier.

    ``per_use`` prices what a provider bills by the use rather than by the token (a server
    tool: ``web_search``, ``web_fetch``), in dollars per use; ``multipliers`` scales every
    rate for a request that asks for a dearer (or cheaper) way of serving it, keyed
    ``field=value`` (``speed=fast``, ``service_tier=priority``, ``inference_geo=us``). What
    neither names is not priced, and a request that needs it is not sent.
    """

    input: float
    output: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float
    tiers: tuple[PriceTier, ...] = ()
    per_use: tuple[tuple[str, float], ...] = ()
    multipliers: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        aboves = [t.above for t in self.tiers]
        if aboves != sorted(set(aboves)) or any(t.price.tiers for t in self.tiers):
            raise ValueError("price tiers must be flat and in strictly rising order of `above`")
        for name, value in (*self.per_use, *self.multipliers):
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"price {name!r} must be a non-negative number, got {value!r}")

    def fee(self, name: str) -> float | None:
        """Dollars per use of ``name`` (a server tool); None when it is not priced."""
        return dict(self.per_use).get(name)

    def multiplier(self, key: str) -> float | None:
        """The factor ``key`` (``field=value``) scales every rate by; None when unpriced."""
        return dict(self.multipliers).get(key)

    @classmethod
    def from_input_output(cls, input: float, output: float) -> Price:
        """Cache rates by the usual multipliers: reads 0.1x, 5-minute writes 1.25x, 1-hour 2x
        (multiplied as decimals: $3 input makes $0.30 reads, not 0.30000000000000004)."""

        def times(multiplier: str) -> float:
            return float(exact(input) * Decimal(multiplier))

        return cls(input, output, times("0.1"), times("1.25"), times("2"))

    def at(self, input_tokens: int) -> Price:
        """The rates a call whose input totals ``input_tokens`` is billed at."""
        rates = self
        for tier in self.tiers:
            if input_tokens > tier.above:
                rates = tier.price
        return rates

    def reachable(self, input_tokens: int) -> tuple[Price, ...]:
        """Every tier a call of at most ``input_tokens`` input tokens may be billed at."""
        return (self, *(t.price for t in self.tiers if input_tokens > t.above))

    def highest_input_rate(self, cache_ttl: CacheTTL | None) -> float:
        """The most an input token of this call can cost (base tier): a call that marks no
        cache breakpoint cannot be billed a cache write."""
        return float(self._highest_input_rate(cache_ttl))

    def _highest_input_rate(self, cache_ttl: CacheTTL | None) -> Decimal:
        rates = [exact(self.input)]
        if cache_ttl is not None:
            rates.append(exact(self.cache_write_5m))
        if cache_ttl == "1h":
            rates.append(exact(self.cache_write_1h))
        return max(rates)

    def worst_exact(
        self, input_tokens: int, max_tokens: int, cache_ttl: CacheTTL | None
    ) -> Decimal:
        """The most a call can cost, in exact dollars: every input token at the highest input
        rate it can incur, ``max_tokens`` of output, at the dearest tier it can reach."""
        worst = max(
            input_tokens * rates._highest_input_rate(cache_ttl) + max_tokens * exact(rates.output)
            for rates in self.reachable(input_tokens)
        )
        return worst / PER_MILLION


@dataclass(frozen=True)
class PriceTier:
    """Rates in force for a call whose input tokens (all input fields) number more than
    ``above``."""

    above: int
    price: Price


_USAGE_FIELDS = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")


@dataclass(frozen=True)
class Usage:
    """Tokens one model call was billed for, each field priced at its own rate.

    ``input`` is uncached input only; ``cache_read`` and the two cache writes are input tokens
    billed differently; ``output`` includes any reasoning or thinking tokens. Every count is a
    non-negative ``int``: anything else is refused when the record is made.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0

    def __post_init__(self) -> None:
        for name in _USAGE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"usage {name} must be a non-negative integer, got {value!r}")

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output

    @property
    def input_tokens(self) -> int:
        """Every input token, cached or not: what a price tier is chosen by."""
        return self.input + self.cache_read + self.cache_write_5m + self.cache_write_1h

    def exact_usd(self, price: Price) -> Decimal:
        """The exact cost in dollars, at the tier this usage falls in."""
        rates = price.at(self.input_tokens)
        per_million = (
            self.input * exact(rates.input)
            + self.output * exact(rates.output)
            + self.cache_read * exact(rates.cache_read)
            + self.cache_write_5m * exact(rates.cache_write_5m)
            + self.cache_write_1h * exact(rates.cache_write_1h)
        )
        return per_million / PER_MILLION

    def cost_nanos(self, price: Price, rate: Decimal | None = None) -> int:
        """The cost as the ledger books it: whole nano-dollars, rounded up; every rate scaled
        by ``rate`` when the call was served at a multiplier."""
        usd = self.exact_usd(price)
        return _ceil((usd if rate is None else usd * rate) * NANOS)

    def cost(self, price: Price) -> float:
        """The exact cost in dollars (as the nearest float)."""
        return float(self.exact_usd(price))


class PriceTable:
    """Model name to ``Price``. Unknown models are a configuration error, never $0."""

    def __init__(self, prices: Mapping[str, Price]) -> None:
        self._prices = dict(prices)

    def __contains__(self, model: object) -> bool:
        return model in self._prices

    def price(self, model: str) -> Price:
        try:
            return self._prices[model]
        except KeyError:
            raise ConfigError(
                "model.name",
                f"no price is known for model {model!r}",
                f"add a [prices.{model}] table with input and output in $ per million tokens",
            ) from None

    def with_overrides(self, overrides: Mapping[str, Price]) -> PriceTable:
        merged = dict(self._prices)
        merged.update(overrides)
        return PriceTable(merged)


@dataclass(frozen=True)
class Reservation:
    """A worst case held against the budgets while one attempt at a call is in flight."""

    id: int
    model: str
    worst_nanos: int
    worst_tokens: int
    line: Literal["work", "reserve"]
    rate: Decimal = Decimal(1)
    """The multiplier the attempt's tokens are priced at (1: the model's own rates)."""

    @property
    def worst_usd(self) -> float:
        return to_usd(self.worst_nanos)


@dataclass(frozen=True)
class Booking:
    """What the ledger booked for one attempt, beside what it had reserved for it."""

    nanos: int
    tokens: int
    reserved_nanos: int | None = None
    reserved_tokens: int | None = None
    at_reservation: bool = False
    """True when the bill was unknown and the reservation, the worst case, was booked."""

    @property
    def usd(self) -> float:
        return to_usd(self.nanos)

    @property
    def over_reservation(self) -> bool:
        """The bill was larger than the worst case held for it: booked in full all the same."""
        if self.reserved_nanos is None or self.reserved_tokens is None:
            return False
        return self.nanos > self.reserved_nanos or self.tokens > self.reserved_tokens


class Ledger:
    """The money and token ledger: ``reserve`` before each attempt at a call, ``book`` (or
    ``release``) after it.

    ``blocked`` names the budget whose line a refused reservation would have crossed; the stop
    check reads it, because a ledger that refuses early never lets ``spent`` reach the line.
    Spending is booked as it happened, even past a line: a provider that bills more than was
    reserved has spent the money, and the stop check sees it.
    """

    def __init__(
        self,
        prices: PriceTable,
        limit_usd: float,
        enforce_fraction: float = 1.0,
        limit_tokens: int | None = None,
        spent_usd: float = 0.0,
        tokens_used: int = 0,
        blocked: str | None = None,
        refused_at: Mapping[str, float] | None = None,
    ) -> None:
        self.prices = prices
        self.limit_usd = limit_usd
        self.enforce_fraction = enforce_fraction
        self.limit_tokens = limit_tokens
        self.spent_nanos = to_nanos(spent_usd)
        self.tokens_used = int(tokens_used)
        self.blocked = blocked
        self.refused_at: dict[str, float] = dict(refused_at or {})
        self._open: dict[int, Reservation] = {}
        self._ids = itertools.count(1)

    # -- lines and totals --------------------------------------------------------------------

    @property
    def limit_nanos(self) -> int:
        return to_nanos(self.limit_usd, up=False)

    @property
    def enforced_nanos(self) -> int:
        return money_line_nanos(self.limit_usd, self.enforce_fraction)

    @property
    def enforced_usd(self) -> float:
        return to_usd(self.enforced_nanos)

    @property
    def enforced_tokens(self) -> int | None:
        if self.limit_tokens is None:
            return None
        return count_line(self.limit_tokens, self.enforce_fraction)

    @property
    def spent_usd(self) -> float:
        return to_usd(self.spent_nanos)

    @property
    def held_nanos(self) -> int:
        return sum(r.worst_nanos for r in self._open.values())

    @property
    def held_usd(self) -> float:
        return to_usd(self.held_nanos)

    @property
    def held_tokens(self) -> int:
        return sum(r.worst_tokens for r in self._open.values())

    def money_fraction(self) -> float:
        return self.spent_nanos / self.limit_nanos if self.limit_nanos > 0 else 1.0

    # -- worst cases -------------------------------------------------------------------------

    def worst_case_nanos(
        self,
        model: str,
        input_tokens: int,
        max_tokens: int,
        cache_ttl: CacheTTL | None = None,
        *,
        rate: Decimal = ONE,
        fees_nanos: int = 0,
    ) -> int:
        """The most a call can cost: its tokens at the dearest rates it can reach, scaled by
        ``rate`` (a multiplier the request asks for), plus ``fees_nanos`` billed by the use."""
        price = self.prices.price(model)
        tokens = price.worst_exact(input_tokens, max_tokens, cache_ttl) * rate
        return _ceil(tokens * NANOS) + fees_nanos

    def worst_case(
        self, model: str, input_tokens: int, max_tokens: int, cache_ttl: CacheTTL | None = None
    ) -> float:
        return to_usd(self.worst_case_nanos(model, input_tokens, max_tokens, cache_ttl))

    def worst_usage(
        self, model: str, input_tokens: int, max_tokens: int, cache_ttl: CacheTTL | None = None
    ) -> Usage:
        """A usage record as large as the worst case: every input token in the dearest input
        field the call can be billed, and ``max_tokens`` of output. What a call whose bill is
        unknown is counted as (its tokens included)."""
        price = self.prices.price(model).at(input_tokens)
        candidates: list[tuple[Decimal, str]] = [(exact(price.input), "input")]
        if cache_ttl is not None:
            candidates.append((exact(price.cache_write_5m), "cache_write_5m"))
        if cache_ttl == "1h":
            candidates.append((exact(price.cache_write_1h), "cache_write_1h"))
        dearest = max(candidates, key=lambda c: c[0])[1]
        return Usage(**{dearest: input_tokens, "output": max_tokens})

    def max_output_tokens(
        self,
        model: str,
        input_tokens: int,
        cache_ttl: CacheTTL | None = None,
        line: Literal["work", "reserve"] = "work",
        *,
        rate: Decimal = ONE,
        fees_nanos: int = 0,
    ) -> int:
        """The largest ``max_tokens`` a call of ``input_tokens`` could reserve now without
        crossing ``line``'s cap (0 when not even its input fits), its rates scaled by
        ``rate`` and ``fees_nanos`` held beside its tokens."""
        cap = self.enforced_nanos if line == "work" else self.limit_nanos
        # In micro-dollars, the unit a rate in $ per million tokens is per token.
        room = Decimal(cap - self.spent_nanos - self.held_nanos - fees_nanos) * PER_MILLION
        room = room / NANOS
        price = self.prices.price(model)
        best: int | None = None
        for rates in price.reachable(input_tokens):
            left = room - input_tokens * rates._highest_input_rate(cache_ttl) * rate
            out_rate = exact(rates.output) * rate
            if left < 0:
                return 0
            if out_rate > 0:
                fits = _floor(left / out_rate)
                best = fits if best is None else min(best, fits)
        return best if best is not None else 10**9

    def refusal(self) -> BudgetRefused | None:
        """The refusal ``blocked`` stands for (a call refused at a line, by this ledger or by
        a meter holding against it from another thread); None while nothing was refused."""
        budget = self.blocked
        if budget is None:
            return None
        if budget == "tokens":
            reached = self.refused_at.get(TOKENS, 0.0)
            return BudgetRefused(budget, reached, float(self.limit_tokens or 0), unit="tokens")
        reached = self.refused_at.get(FLEET_MONEY if budget == FLEET_MONEY else MONEY, 0.0)
        return BudgetRefused(budget, reached, self.limit_usd)

    # -- reserve, book, release --------------------------------------------------------------

    def reserve(
        self,
        model: str,
        input_tokens: int,
        max_tokens: int,
        cache_ttl: CacheTTL | None = None,
        line: Literal["work", "reserve"] = "work",
        *,
        rate: Decimal = ONE,
        fees_nanos: int = 0,
    ) -> Reservation:
        """Hold the attempt's worst case, or refuse it before it is made.

        ``line="work"`` is every ordinary call: it may not cross the enforcement line.
        ``line="reserve"`` is the closing summary: it may use the reserve, never the limit.
        ``rate`` and ``fees_nanos``: see ``worst_case_nanos``; the booking prices the bill's
        tokens at the same ``rate``.
        """
        worst = self.worst_case_nanos(
            model, input_tokens, max_tokens, cache_ttl, rate=rate, fees_nanos=fees_nanos
        )
        cap = self.enforced_nanos if line == "work" else self.limit_nanos
        would_reach = self.spent_nanos + self.held_nanos + worst
        if would_reach > cap:
            if line == "work":
                self.blocked = self.blocked or "money"
                self.refused_at[MONEY] = to_usd(would_reach)
            raise BudgetRefused("money", to_usd(would_reach), to_usd(cap))
        worst_tokens = input_tokens + max_tokens
        token_cap = self.enforced_tokens if line == "work" else self.limit_tokens
        if token_cap is not None:
            tokens_would_reach = self.tokens_used + self.held_tokens + worst_tokens
            if tokens_would_reach > token_cap:
                if line == "work":
                    self.blocked = self.blocked or "tokens"
                    self.refused_at[TOKENS] = tokens_would_reach
                raise BudgetRefused("tokens", tokens_would_reach, token_cap, unit="tokens")
        reservation = Reservation(next(self._ids), model, worst, worst_tokens, line, rate)
        self._open[reservation.id] = reservation
        return reservation

    def book(
        self,
        model: str,
        usage: Usage | None,
        reservation: Reservation | None = None,
        *,
        rate: Decimal | None = None,
        fees_nanos: int = 0,
    ) -> Booking:
        """Book what an attempt cost, from every usage field, and close its reservation.

        ``usage=None`` means the bill is unknown (no usage, or none that can be read): the
        reservation, the attempt's worst case, is booked. A bill above the reservation is
        booked in full, and the ``Booking`` says so. A known bill's tokens are priced at
        ``rate`` (default: the reservation's), and ``fees_nanos`` (billed by the use) is added.
        """
        if reservation is not None:
            self._open.pop(reservation.id, None)
        if usage is None:
            if reservation is None:
                raise ValueError("an unknown bill can only be booked against its reservation")
            nanos, tokens = reservation.worst_nanos, reservation.worst_tokens
        else:
            if rate is None:
                rate = reservation.rate if reservation is not None else ONE
            nanos = usage.cost_nanos(self.prices.price(model), rate) + fees_nanos
            tokens = usage.total_tokens
        self.spent_nanos += nanos
        self.tokens_used += tokens
        return Booking(
            nanos,
            tokens,
            reservation.worst_nanos if reservation is not None else None,
            reservation.worst_tokens if reservation is not None else None,
            at_reservation=usage is None,
        )

    def record(
        self, model: str, usage: Usage | None, reservation: Reservation | None = None
    ) -> float:
        """``book``, returning the dollars booked."""
        return self.book(model, usage, reservation).usd

    def release(self, reservation: Reservation) -> None:
        """The attempt was not made, or failed before the provider could bill it."""
        self._open.pop(reservation.id, None)


@dataclass(frozen=True)
class BudgetReading:
    """One budget as the terminal result reports it. ``limit`` is None when not set.

    ``used`` is everything used; ``at_stop``, when set, is what was used at the moment the
    stop was decided, and it is the figure ``exhausted`` judges by (the closing summary spends
    after that moment, from the reserve set aside for it).
    """

    used: float
    limit: float | None
    stop_at: float | None
    enforced_at: float | None
    refused_at: float | None = None
    at_stop: float | None = None

    @property
    def decided_on(self) -> float:
        """The figure the stop decision read: ``at_stop`` when known, else ``used``."""
        return self.used if self.at_stop is None else self.at_stop

    @property
    def exhausted(self) -> bool:
        if self.limit is None or self.stop_at is None:
            return False
        # A zero limit (a night with no model needs no money) is exhausted only by a refusal.
        reached = self.stop_at > 0 and self.decided_on >= self.stop_at
        return reached or self.refused_at is not None


BudgetsView = Mapping[str, BudgetReading]


def first_exhausted(budgets: BudgetsView, kind: Literal["budget", "time"]) -> str | None:
    """The first exhausted budget in stop-check order, or None."""
    for name in BUDGET_ORDER if kind == "budget" else TIME_ORDER:
        reading = budgets.get(name)
        if reading is not None and reading.exhausted:
            return name
    return None


@dataclass(frozen=True)
class BudgetFractions:
    """Where the bands sit, as fractions of each stated limit."""

    notice_at: float = 0.70
    finish_at: float = 0.90
    enforce_at: float = 0.92

    def __post_init__(self) -> None:
        if not 0 < self.notice_at <= self.finish_at <= self.enforce_at <= 1.0:
            raise ConfigError(
                "budget.bands",
                "need 0 < notice_at <= finish_at <= enforce_at <= 1",
                "for example notice_at = 0.7, finish_at = 0.9, enforce_at = 0.92",
            )


def clean_amount(name: str, value: float) -> float:
    """A figure as the result reports it: counts as ``int``, dollars in whole nano-dollars,
    seconds to the microsecond; never a float's binary noise."""
    if name in (TOKENS, STEPS):
        return int(value) if float(value).is_integer() else value
    if name in (MONEY, FLEET_MONEY):
        return to_usd(_round_nanos(value))
    return round(float(value), 6)


def _round_nanos(usd: float) -> int:
    return int((exact(usd) * NANOS).to_integral_value(ROUND_HALF_EVEN))


def _line(name: str, limit: float, fraction: float) -> float:
    if name in (TOKENS, STEPS):
        return count_line(limit, fraction)
    if name == MONEY:
        return to_usd(money_line_nanos(limit, fraction))
    return round(float(exact(limit) * exact(fraction)), 6)


def reading(
    name: str,
    used: float,
    limit: float | None,
    fractions: BudgetFractions,
    refused_at: float | None = None,
) -> BudgetReading:
    """Build the reading of one budget with its lines placed by ``fractions``, every figure
    clean (see ``clean_amount``): the lines are computed on the decimals as written, so a $5
    cap at 92% is enforced at exactly 4.6."""
    used = clean_amount(name, used)
    if refused_at is not None:
        refused_at = clean_amount(name, refused_at)
    if limit is None:
        return BudgetReading(used, None, None, None, refused_at)
    limit = clean_amount(name, limit)
    if name == FLEET_MONEY:  # shared with other nights: no band of its own, a hard line
        return BudgetReading(used, limit, limit, limit, refused_at)
    enforced = _line(name, limit, fractions.enforce_at)
    stop_at = _line(name, limit, fractions.finish_at) if name == MONEY else enforced
    return BudgetReading(used, limit, stop_at, enforced, refused_at)


def budget_readings(
    ledger: Ledger,
    fractions: BudgetFractions,
    *,
    steps: tuple[int, int | None],
    seconds: tuple[float, float],
    fleet: tuple[float, float] | None = None,
) -> dict[str, BudgetReading]:
    """Every budget's reading: money and tokens from ``ledger`` (with the amount a refused call
    would have reached), ``steps`` and ``seconds`` as (used, limit), and the money ``fleet``
    nights share as (spent, cap) when there is such a cap."""
    refused = ledger.refused_at
    readings = {
        MONEY: reading(MONEY, ledger.spent_usd, ledger.limit_usd, fractions, refused.get(MONEY)),
        TOKENS: reading(
            TOKENS, ledger.tokens_used, ledger.limit_tokens, fractions, refused.get(TOKENS)
        ),
        STEPS: reading(STEPS, steps[0], steps[1], fractions),
        SECONDS: reading(SECONDS, seconds[0], seconds[1], fractions),
    }
    if fleet is not None:
        spent, cap = fleet
        readings[FLEET_MONEY] = reading(
            FLEET_MONEY, spent, cap, fractions, refused.get(FLEET_MONEY)
        )
    return readings


Band = Literal["free", "notice", "finish"]


def money_band(spent: float, limit: float, fractions: BudgetFractions) -> Band:
    """Below ``notice_at``: run freely. From it: tell the agent. From ``finish_at``: no new task.
    The lines are the money lines of ``reading``, compared in nano-dollars."""
    if to_nanos(limit, up=False) <= 0:
        return "finish"
    spent_nanos = _round_nanos(spent)
    if spent_nanos >= money_line_nanos(limit, fractions.finish_at):
        return "finish"
    if spent_nanos >= money_line_nanos(limit, fractions.notice_at):
        return "notice"
    return "free"


#: Budget fields where a larger value (or none at all) allows more.
_CAPS = ("usd", "hours", "steps", "tokens", "notice_at", "finish_at", "enforce_at")


def loosened(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """The budget fields of ``now`` that allow more than ``recorded`` does (a missing or null
    cap allows everything). Empty when ``now`` is as strict or stricter in every field."""

    def allowance(value: Any) -> float:
        return float("inf") if value is None else float(value)

    return [
        key
        for key in _CAPS
        if key in recorded and allowance(now.get(key)) > allowance(recorded.get(key))
    ]
