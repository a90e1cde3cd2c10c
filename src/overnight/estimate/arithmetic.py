"""The bill: the input of every call of an agent task, and what each kind of call costs.

The conversation is re-sent on each call, so call ``t`` carries ``first_call_tokens + (t - 1) x
growth_per_call_tokens`` and a task's input is the sum over its calls, which grows with the
square of the number of calls. Every kind of call (task execution, verification, drift check,
replan, compaction, plan, closing summary) is billed at the main model's rate. Command tasks
make no model calls; a night with none at all costs $0 and needs no price.

Every figure is computed exactly (``Fraction``) and rounded only for display.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from overnight.config.estimate import TABLE, ModelRates, Workload, as_fraction, output_per_task
from overnight.core.budget import PER_MILLION
from overnight.core.errors import ConfigError
from overnight.estimate.counts import compactions, drift_checks, replans
from overnight.estimate.figures import in_k, number


@dataclass(frozen=True)
class BillRow:
    """One kind of call: how many, their tokens, and what they cost at their model's rate."""

    kind: str
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    input_usd: float
    output_usd: float
    cost_usd: float
    arithmetic: str


def cost_of(tokens_in: int | Fraction, tokens_out: int | Fraction, rates: ModelRates) -> Fraction:
    """What ``tokens_in`` input and ``tokens_out`` output tokens cost at ``rates``, exactly."""
    return (
        tokens_in * as_fraction(rates.input) + tokens_out * as_fraction(rates.output)
    ) / PER_MILLION


def call_input_tokens(w: Workload, calls: int | None = None) -> list[int]:
    """Input of each call of one task: ``first + (t - 1) x growth`` for t = 1..calls."""
    n = w.calls_per_task if calls is None else calls
    return [w.first_call_tokens + (t - 1) * w.growth_per_call_tokens for t in range(1, n + 1)]


def task_input_tokens(w: Workload, calls: int | None = None) -> int:
    """Input billed for one task: the sum over its calls, not the size of the last one."""
    return sum(call_input_tokens(w, calls))


def _kinds(w: Workload) -> list[tuple[str, int, int, int]]:
    """Every kind of call: (kind, calls, input tokens, output tokens), task execution first."""
    out = output_per_task(w)
    verify = w.tasks * w.verify_calls_per_task
    counted = [
        ("drift check", drift_checks(w), w.drift_input_tokens, w.drift_output_tokens),
        ("replan", replans(w), w.replan_input_tokens, w.replan_output_tokens),
        ("compaction", compactions(w), w.compaction_input_tokens, w.compaction_output_tokens),
        ("plan", w.plans, w.plan_input_tokens, w.plan_output_tokens),
        ("closing summary", w.summaries, w.summary_input_tokens, w.summary_output_tokens),
    ]
    return [
        (
            "task execution",
            w.tasks * w.calls_per_task,
            w.tasks * task_input_tokens(w),
            w.tasks * out,
        ),
        ("verification", verify, verify * w.verify_input_tokens, verify * w.verify_output_tokens),
        *[(kind, n, n * size_in, n * size_out) for kind, n, size_in, size_out in counted],
    ]


def model_calls(w: Workload) -> int:
    """Every model call of the night (0: nothing to price)."""
    return sum(calls for _, calls, _, _ in _kinds(w))


def main_rates(w: Workload) -> ModelRates:
    """The main model's rates; $0 when the night makes no model call at all."""
    if w.main_price is not None:
        return w.main_price
    if model_calls(w) == 0:
        return ModelRates(input=0.0, output=0.0)
    raise ConfigError(
        f"{TABLE}.main_price",
        "no price for the main model",
        "give [estimate.main_price] input and output ($ per million tokens), a priced "
        "[model] name, or --main-price-input/--main-price-output",
    )


def _bill_exact(w: Workload) -> list[tuple[BillRow, Fraction]]:
    rates = main_rates(w)
    model = w.main_model or "main model"
    rows = []
    for kind, calls, tin, tout in _kinds(w):
        cost = cost_of(tin, tout, rates)
        arithmetic = (
            f"({in_k(tin, unit='')} x {number(rates.input)} + "
            f"{in_k(tout, unit='')} x {number(rates.output)}) / 1000"
        )
        row = BillRow(
            kind=kind,
            model=model,
            calls=calls,
            input_tokens=tin,
            output_tokens=tout,
            input_usd=float(cost_of(tin, 0, rates)),
            output_usd=float(cost_of(0, tout, rates)),
            cost_usd=float(cost),
            arithmetic=arithmetic,
        )
        rows.append((row, cost))
    return rows


def bill(w: Workload) -> list[BillRow]:
    """The bill per kind of call the night makes, each at the main model's rate; task
    execution first. A kind with no call has no row."""
    return [row for row, _ in _bill_exact(w) if row.calls]


def baseline(w: Workload) -> tuple[Fraction, Fraction]:
    """(task-execution row, total), exactly."""
    rows = _bill_exact(w)
    return rows[0][1], sum((cost for _, cost in rows), Fraction(0))


def total_usd(w: Workload) -> float:
    """The derived cost of the night."""
    return float(baseline(w)[1])
