"""The recommendation: the hard cap (the derived total x ``cap_factor``, rounded up to a whole
dollar), its headroom, the cost per verified task and the per-task token budget; and, with a
cap to check (a spec's ``budget.usd``), whether its enforcement line covers the derived total,
and the least cap that would."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from overnight.config.estimate import Workload, as_fraction, output_per_task
from overnight.estimate.arithmetic import baseline, task_input_tokens
from overnight.estimate.counts import all_tasks
from overnight.estimate.figures import money, number, percent


@dataclass(frozen=True)
class Recommendation:
    """The hard cap with its headroom, the cost per verified task and the task token budget."""

    derived_usd: float
    hard_cap_usd: int
    headroom_usd: float
    cap_rule: str
    derived_share_of_cap: float
    verified_tasks: float
    cost_per_verified_task_usd: float
    task_input_tokens: int
    task_output_tokens: int
    calls_per_task: int


@dataclass(frozen=True)
class BudgetCheck:
    """The cap the night was given against the derived total: ``covers`` when the total stays
    under the enforcement line (``enforce_at`` of the cap)."""

    cap_usd: float
    enforce_at: float
    enforcement_line_usd: float
    finish_at: float
    finish_line_usd: float
    derived_usd: float
    derived_share_of_cap: float | None
    covers: bool
    past_finish_line: bool
    margin_usd: float
    """The enforcement line minus the derived total: negative by what is missing."""
    least_cap_usd: float
    """The smallest cap, to the cent, whose enforcement line covers the derived total."""
    recommended_cap_usd: int
    """The hard cap, raised to the derived total / ``finish_at`` (rounded up to a dollar) when
    the cap's lines need more, so that every task can start."""
    verdict: str


def hard_cap(w: Workload) -> int:
    """The derived total times ``cap_factor``, rounded up to a whole dollar, and raised when
    the night's own lines need more: the derived total must stay under ``finish_at`` of the
    cap (and so under ``enforce_at``), or the cap this estimate recommends would fail its own
    budget check.

    With the default 1.25 the cap covers the worst case of the caching lever (every call a
    1.25x cache write with no read raises the input bill by 25%) and keeps the derived total
    below 80% of the cap, under the 90% line where a night stops starting tasks."""
    total = baseline(w)[1]
    by_factor = math.ceil(total * as_fraction(w.cap_factor))
    by_lines = math.ceil(total / min(as_fraction(w.finish_at), as_fraction(w.enforce_at)))
    return max(by_factor, by_lines)


def _cap_rule(w: Workload, total: Fraction) -> str:
    rule = (
        f"{money(total)} x {number(w.cap_factor)} = {money(total * as_fraction(w.cap_factor))}, "
        "rounded up to a whole dollar"
    )
    if math.ceil(total * as_fraction(w.cap_factor)) < hard_cap(w):
        line = min(as_fraction(w.finish_at), as_fraction(w.enforce_at))
        rule += (
            f", raised to {money(total)} / {number(line)} = {money(total / line)} rounded up "
            f"so the derived total stays under the {percent(line * 100, 0)} line"
        )
    return rule


def recommend(w: Workload) -> Recommendation:
    """The hard cap and headroom, the cost per verified task, the task token budget."""
    _, total = baseline(w)
    cap = hard_cap(w)
    verified = all_tasks(w) * as_fraction(w.verify_pass_rate)
    return Recommendation(
        derived_usd=float(total),
        hard_cap_usd=cap,
        headroom_usd=float(cap - total),
        cap_rule=_cap_rule(w, total),
        derived_share_of_cap=float(total / cap) if cap else 0.0,
        verified_tasks=float(verified),
        cost_per_verified_task_usd=float(total / verified),
        task_input_tokens=task_input_tokens(w),
        task_output_tokens=output_per_task(w),
        calls_per_task=w.calls_per_task,
    )


def _gap(x: Fraction, word: str) -> str:
    """How far the derived total sits from a line, never shown as a misleading $0.00."""
    if x == 0:
        return "exactly on"
    if x < Fraction(1, 200):
        return f"less than $0.01 {word}"
    return f"{money(x)} {word}"


def check_budget(w: Workload) -> BudgetCheck | None:
    """The derived total against ``budget_usd``: covered when it stays under the enforcement
    line; None when no cap is given. The cap recommended here is the hard cap, raised when the
    cap's own lines need more: high enough that every task can start."""
    if w.budget_usd is None:
        return None
    _, total = baseline(w)
    cap = as_fraction(w.budget_usd)
    line = cap * as_fraction(w.enforce_at)
    finish = cap * as_fraction(w.finish_at)
    covers = total <= line
    past_finish = total > finish
    least = Fraction(math.ceil(total * 100 / as_fraction(w.enforce_at)), 100)
    recommended = hard_cap(w)
    enforce_pct, finish_pct = (
        percent(as_fraction(w.enforce_at) * 100, 0),
        percent(as_fraction(w.finish_at) * 100, 0),
    )
    where = f"its enforcement line, {money(line)} ({enforce_pct} of the cap)"
    if total == 0:
        verdict = "the night makes no model call: it costs nothing, and any cap covers it."
    elif not covers:
        verdict = (
            f"the {money(cap)} cap is too small for this night: the derived {money(total)} is "
            f"{_gap(total - line, 'over')} {where}, past which calls are refused. Set "
            f"budget.usd to at least {money(least)}; ${recommended} is recommended."
        )
    elif past_finish:
        verdict = (
            f"the {money(cap)} cap covers the derived {money(total)} only just: it is within "
            f"{where} but past the {finish_pct} line, {money(finish)}, from which no new task "
            f"starts, so the last tasks may not run; ${recommended} is recommended."
        )
    else:
        verdict = (
            f"the {money(cap)} cap covers the derived {money(total)}: "
            f"{_gap(line - total, 'under')} {where}."
        )
    return BudgetCheck(
        cap_usd=float(cap),
        enforce_at=w.enforce_at,
        enforcement_line_usd=float(line),
        finish_at=w.finish_at,
        finish_line_usd=float(finish),
        derived_usd=float(total),
        derived_share_of_cap=float(total / cap) if cap else None,
        covers=covers,
        past_finish_line=past_finish,
        margin_usd=float(line - total),
        least_cap_usd=float(least),
        recommended_cap_usd=recommended,
        verdict=verdict,
    )
