"""Money and the other budgets: prices, usage, the ledger, and the lines each budget has.

Every budget has three lines, all fractions of the limit the user stated:

- ``stop_at``: the stop check ends the run here (for money, the 90% band: finish the task in
  flight, start no new one; for the others, the enforcement line);
- ``enforced_at``: no ordinary call may cross it (92% by default); the ledger refuses the call
  whose worst case would;
- ``limit``: the stated budget, crossed by nothing. The slice between ``enforced_at`` and
  ``limit`` is the wrap-up reserve that pays for the closing summary.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from overnight.core.errors import BudgetRefused, ConfigError

PER_MILLION = 1_000_000

#: The budget names used in the terminal result, in the order a stop check reads them.
MONEY, TOKENS, STEPS, SECONDS = "cost_usd", "tokens", "steps", "seconds"
BUDGET_ORDER: tuple[str, ...] = (MONEY, TOKENS, STEPS)
TIME_ORDER: tuple[str, ...] = (SECONDS,)

#: How a budget is named in a stop reason: ``BUDGET_EXHAUSTED:money``, ``TIME_LIMIT:wall_clock``.
BUDGET_STOP_DETAIL: dict[str, str] = {
    MONEY: "money",
    TOKENS: "tokens",
    STEPS: "steps",
    SECONDS: "wall_clock",
}

CacheTTL = Literal["5m", "1h"]


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens, one rate per usage field."""

    input: float
    output: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float

    @classmethod
    def from_input_output(cls, input: float, output: float) -> Price:
        """Cache rates by the usual multipliers: reads 0.1x, 5-minute writes 1.25x, 1-hour 2x."""
        return cls(input, output, input * 0.1, input * 1.25, input * 2.0)

    def highest_input_rate(self, cache_ttl: CacheTTL | None) -> float:
        """The most an input token of this call can cost: a call that marks no cache
        breakpoint cannot be billed a cache write."""
        if cache_ttl is None:
            return self.input
        if cache_ttl == "5m":
            return max(self.input, self.cache_write_5m)
        return max(self.input, self.cache_write_5m, self.cache_write_1h)


@dataclass(frozen=True)
class Usage:
    """Tokens one model call was billed for, each field priced at its own rate.

    ``input`` is uncached input only; ``cache_read`` and the two cache writes are input tokens
    billed differently; ``output`` includes any reasoning or thinking tokens.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0

    @property
    def total_tokens(self) -> int:
        return (
            self.input + self.output + self.cache_read + self.cache_write_5m + self.cache_write_1h
        )

    def cost(self, price: Price) -> float:
        return (
            self.input * price.input
            + self.output * price.output
            + self.cache_read * price.cache_read
            + self.cache_write_5m * price.cache_write_5m
            + self.cache_write_1h * price.cache_write_1h
        ) / PER_MILLION


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
    """A worst case held against the budgets while one call is in flight."""

    id: int
    model: str
    worst_usd: float
    worst_tokens: int
    line: Literal["work", "reserve"]


@dataclass
class Ledger:
    """The money and token ledger. ``reserve`` before a call, ``record`` after it.

    ``blocked`` names the budget whose line a refused reservation would have crossed; the stop
    check reads it, because a ledger that refuses early never lets ``spent`` reach the line.
    """

    prices: PriceTable
    limit_usd: float
    enforce_fraction: float = 1.0
    limit_tokens: int | None = None
    spent_usd: float = 0.0
    tokens_used: int = 0
    blocked: str | None = None
    refused_at: dict[str, float] = field(default_factory=dict)
    _open: dict[int, Reservation] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def enforced_usd(self) -> float:
        return self.limit_usd * self.enforce_fraction

    @property
    def enforced_tokens(self) -> int | None:
        if self.limit_tokens is None:
            return None
        return int(self.limit_tokens * self.enforce_fraction)

    @property
    def held_usd(self) -> float:
        return sum(r.worst_usd for r in self._open.values())

    @property
    def held_tokens(self) -> int:
        return sum(r.worst_tokens for r in self._open.values())

    def worst_case(
        self, model: str, input_tokens: int, max_tokens: int, cache_ttl: CacheTTL | None = None
    ) -> float:
        price = self.prices.price(model)
        rate_in = price.highest_input_rate(cache_ttl)
        return (input_tokens * rate_in + max_tokens * price.output) / PER_MILLION

    def reserve(
        self,
        model: str,
        input_tokens: int,
        max_tokens: int,
        cache_ttl: CacheTTL | None = None,
        line: Literal["work", "reserve"] = "work",
    ) -> Reservation:
        """Hold the call's worst case, or refuse it before it is made.

        ``line="work"`` is every ordinary call: it may not cross the enforcement line.
        ``line="reserve"`` is the closing summary: it may use the reserve, never the limit.
        """
        worst = self.worst_case(model, input_tokens, max_tokens, cache_ttl)
        cap = self.enforced_usd if line == "work" else self.limit_usd
        would_reach = self.spent_usd + self.held_usd + worst
        if would_reach > cap + 1e-12:
            if line == "work":
                self.blocked = self.blocked or "money"
                self.refused_at[MONEY] = would_reach
            raise BudgetRefused("money", would_reach, cap)
        worst_tokens = input_tokens + max_tokens
        token_cap = self.enforced_tokens if line == "work" else self.limit_tokens
        if token_cap is not None:
            tokens_would_reach = self.tokens_used + self.held_tokens + worst_tokens
            if tokens_would_reach > token_cap:
                if line == "work":
                    self.blocked = self.blocked or "tokens"
                    self.refused_at[TOKENS] = float(tokens_would_reach)
                raise BudgetRefused("tokens", tokens_would_reach, token_cap, unit="tokens")
        reservation = Reservation(next(self._ids), model, worst, worst_tokens, line)
        self._open[reservation.id] = reservation
        return reservation

    def record(self, model: str, usage: Usage, reservation: Reservation | None = None) -> float:
        """Book what a call actually cost, from every usage field; release its reservation."""
        if reservation is not None:
            self._open.pop(reservation.id, None)
        cost = usage.cost(self.prices.price(model))
        self.spent_usd += cost
        self.tokens_used += usage.total_tokens
        return cost

    def release(self, reservation: Reservation) -> None:
        """The call was not made or failed without being billed."""
        self._open.pop(reservation.id, None)

    def money_fraction(self) -> float:
        return self.spent_usd / self.limit_usd if self.limit_usd > 0 else 1.0


@dataclass(frozen=True)
class BudgetReading:
    """One budget as the terminal result reports it. ``limit`` is None when not set."""

    used: float
    limit: float | None
    stop_at: float | None
    enforced_at: float | None
    refused_at: float | None = None

    @property
    def exhausted(self) -> bool:
        if self.limit is None or self.stop_at is None:
            return False
        # A zero limit (a night with no model needs no money) is exhausted only by a refusal.
        reached = self.stop_at > 0 and self.used >= self.stop_at
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


def reading(
    name: str,
    used: float,
    limit: float | None,
    fractions: BudgetFractions,
    refused_at: float | None = None,
) -> BudgetReading:
    """Build the reading of one budget with its lines placed by ``fractions``."""
    if limit is None:
        return BudgetReading(used, None, None, None, refused_at)
    enforced = limit * fractions.enforce_at
    if name in (TOKENS, STEPS):
        # Round down (a larger reserve is the safe side), but never to zero: a limit of one
        # step must still allow that step.
        enforced = float(max(1, int(enforced)))
    stop_at = limit * fractions.finish_at if name == MONEY else enforced
    return BudgetReading(used, limit, stop_at, enforced, refused_at)


Band = Literal["free", "notice", "finish"]


def money_band(spent: float, limit: float, fractions: BudgetFractions) -> Band:
    """Below ``notice_at``: run freely. From it: tell the agent. From ``finish_at``: no new task."""
    share = spent / limit if limit > 0 else 1.0
    if share >= fractions.finish_at:
        return "finish"
    if share >= fractions.notice_at:
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
