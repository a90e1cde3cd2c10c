"""A night's bill learned from recorded nights: a range, the chance the cap stops it early, a
recommended cap and the levers, all priced on recorded tokens. Pure.

Every recorded call is billed again at the prices the new night will pay (``rebill``). A
recorded night is its night calls (the plan, the closing summary) and its tasks, each task
with the calls made while it was the latest started (its execute and compaction calls, the
drift check and replan after it). A simulated night draws one recorded night's night calls
and, with replacement, as many recorded tasks as the new night has, from every chosen run;
``TRIALS`` such nights, drawn by a fixed seed, give the median and the 90th percentile.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from decimal import ROUND_CEILING, Decimal
from typing import Any

from overnight.core.budget import Price, to_usd
from overnight.estimate.rebill import CachePolicy, Rebilled, rebill, recorded_policy
from overnight.night.workload import WorkloadFacts, main_model

TRIALS = 4000
SEED = 20261205
SUMMARY = "summarize"


@dataclass(frozen=True)
class Night:
    """One recorded night, billed again: its plan, its summary and each task, in nanos."""

    run_id: str
    opening: int
    summary: int
    tasks: tuple[int, ...]
    verified: int


@dataclass(frozen=True)
class LearnedLever:
    name: str
    median_usd: float
    saving_usd: float
    note: str


@dataclass(frozen=True)
class UsedRun:
    run_id: str
    created_at: str
    tasks: int
    verified: int
    usd: float
    """Its bill at the prices the new night pays."""


@dataclass(frozen=True)
class Learned:
    """The estimate from history, in the order it is printed."""

    runs: tuple[UsedRun, ...]
    chosen_by: str
    tasks: int | None
    """The night's agent tasks; None when drawn from the recorded nights' counts."""
    tasks_from: str
    trials: int
    method: str
    low_usd: float
    """The 10th percentile."""
    median_usd: float
    p90_usd: float
    mean_usd: float
    summary_p90_usd: float
    budget_usd: float | None
    chance_stopped_early: float | None
    """The share of simulated nights the cap stops before their last task is done."""
    recommended_cap_usd: float
    cap_arithmetic: str
    cost_per_verified_task_usd: float | None
    levers: tuple[LearnedLever, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "learned_estimate", "version": 1, **asdict(self)}


def night_of(billed: Sequence[Rebilled], facts: WorkloadFacts) -> Night:
    by_call = {id(b.call): b.nanos for b in billed}
    tasks = tuple(sum(by_call[id(c)] for c in t.calls) for t in facts.tasks)
    summary = sum(by_call[id(c)] for c in facts.night_calls if c.purpose == SUMMARY)
    opening = sum(by_call[id(c)] for c in facts.night_calls if c.purpose != SUMMARY)
    return Night(facts.run_id, opening, summary, tasks, facts.tasks_verified)


def _percentile(values: Sequence[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True)
class Draws:
    totals: tuple[int, ...]
    summaries: tuple[int, ...]
    stopped: int


def simulate(
    nights: Sequence[Night],
    tasks: int | None,
    *,
    cap_nanos: int | None = None,
    finish_at: float = 0.9,
    enforce_at: float = 0.92,
    trials: int = TRIALS,
    seed: int = SEED,
) -> Draws:
    """``trials`` nights drawn from the recorded ones. A night is stopped early when, before
    a task, the money spent has reached the cap's ``finish_at`` line (no new task starts), or
    a task would take it past the ``enforce_at`` line (its calls are refused)."""
    rng = random.Random(seed)
    pool = [t for n in nights for t in n.tasks]
    totals: list[int] = []
    summaries: list[int] = []
    stopped = 0
    for _ in range(trials):
        night = rng.choice(nights)
        count = tasks if tasks is not None else len(rng.choice(nights).tasks)
        spent, early = night.opening, False
        for _ in range(count):
            if cap_nanos is not None and spent >= cap_nanos * finish_at:
                early = True
            spent += rng.choice(pool)
            if cap_nanos is not None and spent > cap_nanos * enforce_at:
                early = True
        stopped += early
        totals.append(spent + night.summary)
        summaries.append(night.summary)
    return Draws(tuple(totals), tuple(summaries), stopped)


def _cents_up(nanos: float) -> float:
    return float((Decimal(nanos) / Decimal(10**9)).quantize(Decimal("0.01"), ROUND_CEILING))


def recommended_cap(
    p90: int, summary_p90: int, finish_at: float, enforce_at: float
) -> tuple[float, str]:
    """The least cap, up to the cent, under whose ``finish_at`` line the 90th-percentile
    night's work fits and whose wrap-up reserve (above ``enforce_at``) pays its summary."""
    work = p90 - summary_p90
    by_work = work / finish_at
    by_reserve = summary_p90 / (1 - enforce_at) if enforce_at < 1 else 0.0
    cap = _cents_up(max(by_work, by_reserve))
    text = (
        f"the 90th percentile's work ${to_usd(work):.4f} / finish_at {finish_at:g} = "
        f"${by_work / 1e9:.4f}"
    )
    if by_reserve > by_work:
        text += (
            f"; its summary ${to_usd(summary_p90):.4f} needs a wrap-up reserve of "
            f"{1 - enforce_at:.0%}: ${by_reserve / 1e9:.4f}"
        )
    else:
        reserve = cap * (1 - enforce_at)
        text += f"; its wrap-up reserve ({1 - enforce_at:.0%}) ${reserve:.4f} pays the summary"
    return cap, text + f" -> ${cap:.2f}"


@dataclass(frozen=True)
class NightPrices:
    """What the new night pays: the price of each model, the spec's main model (recorded
    main-model calls are billed at its price), the cheaper model for the tiering lever."""

    price_of: Callable[[str], Price]
    model: str | None
    cheap_model: str | None = None
    min_cacheable: int = 1024


def bill_nights(
    runs: Sequence[WorkloadFacts],
    prices: NightPrices,
    *,
    policy: CachePolicy | None = None,
    cheap_share: float = 0.0,
    loop_cap: int | None = None,
    output_cut: float = 0.0,
) -> list[Night]:
    """Each run billed at the new night's prices, with one lever applied if given: another
    cache policy, ``cheap_share`` of the tasks on the cheaper model (their output cut by
    ``output_cut``: low effort), or a loop cap (a task's agent calls past it not made, and the
    calls' own cost only: what the task then leaves undone is not priced)."""
    nights: list[Night] = []
    for facts in runs:
        billed = rebill(
            facts,
            prices.price_of,
            model=prices.model,
            replaces=main_model(facts),
            policy=policy,
            min_cacheable=prices.min_cacheable,
        )
        night = night_of(billed, facts)
        if cheap_share or loop_cap is not None:
            night = _levered(facts, billed, night, prices, cheap_share, loop_cap, output_cut)
        nights.append(night)
    return nights


def _levered(
    facts: WorkloadFacts,
    billed: Sequence[Rebilled],
    night: Night,
    prices: NightPrices,
    cheap_share: float,
    loop_cap: int | None,
    output_cut: float,
) -> Night:
    by_call = {id(b.call): b for b in billed}
    tiered = round(len(facts.tasks) * cheap_share)
    tasks: list[int] = []
    for i, task in enumerate(facts.tasks):
        nanos, agent = 0, 0
        for c in task.calls:
            b = by_call[id(c)]
            if c.purpose == "execute":
                agent += 1
                if loop_cap is not None and agent > loop_cap:
                    continue
            if i < tiered and b.usage is not None and prices.cheap_model is not None:
                usage = b.usage
                if output_cut:
                    cut = round(usage.output * output_cut)
                    usage = type(usage)(
                        usage.input,
                        usage.output - cut,
                        usage.cache_read,
                        usage.cache_write_5m,
                        usage.cache_write_1h,
                    )
                nanos += usage.cost_nanos(prices.price_of(prices.cheap_model))
            else:
                nanos += b.nanos
        tasks.append(nanos)
    return Night(night.run_id, night.opening, night.summary, tuple(tasks), night.verified)


@dataclass(frozen=True)
class Settings:
    """The night to estimate and the levers' settings."""

    tasks: int | None
    tasks_from: str
    budget_usd: float | None
    finish_at: float = 0.90
    enforce_at: float = 0.92
    loop_cap_calls: int = 4
    tiered_share: float = 0.6
    low_effort_share: float = 40_000 / 100_800


def _median(nights: Sequence[Night], tasks: int | None) -> int:
    return _percentile(simulate(nights, tasks).totals, 0.5)


def learned_levers(
    runs: Sequence[WorkloadFacts], prices: NightPrices, s: Settings, median: int
) -> list[LearnedLever]:
    out: list[LearnedLever] = []

    def row(name: str, nights: Sequence[Night], note: str) -> None:
        m = _median(nights, s.tasks)
        out.append(LearnedLever(name, to_usd(m), to_usd(median - m), note))

    recorded = recorded_policy([c for f in runs for c in f.all_calls])
    if recorded == "off":
        row(
            "prompt caching (5-minute TTL)",
            bill_nights(runs, prices, policy="5m"),
            "derived from the recorded call times: the recording made no cache reads",
        )
    else:
        row(
            "no prompt caching",
            bill_nights(runs, prices, policy="off"),
            f"exact: every recorded input token billed uncached (recorded: {recorded})",
        )
        row(
            "prompt caching with the 1-hour TTL",
            bill_nights(runs, prices, policy="1h"),
            "derived from the recorded call times",
        )
    row(
        f"a loop cap at {s.loop_cap_calls} agent calls",
        bill_nights(runs, prices, loop_cap=s.loop_cap_calls),
        "the calls past the cap are not made; what those tasks then leave undone is not priced",
    )
    if prices.cheap_model is not None:
        row(
            f"{s.tiered_share:.0%} of the tasks on {prices.cheap_model}",
            bill_nights(runs, prices, cheap_share=s.tiered_share),
            "the recorded tokens at the cheaper model's price",
        )
        row(
            f"low effort on those tasks (output cut {s.low_effort_share:.1%})",
            bill_nights(runs, prices, cheap_share=s.tiered_share, output_cut=s.low_effort_share),
            "the recorded output of the tiered tasks cut by the reference night's share",
        )
    return out


def learn(
    runs: Sequence[WorkloadFacts], chosen_by: str, prices: NightPrices, s: Settings
) -> Learned:
    """The estimate of a night of ``s.tasks`` agent tasks (or as many as the recorded nights
    had) from ``runs``."""
    nights = bill_nights(runs, prices)
    cap = None if not s.budget_usd else round(s.budget_usd * 10**9)
    draws = simulate(nights, s.tasks, cap_nanos=cap, finish_at=s.finish_at, enforce_at=s.enforce_at)
    median = _percentile(draws.totals, 0.5)
    p90 = _percentile(draws.totals, 0.9)
    summary_p90 = _percentile(draws.summaries, 0.9)
    cap_usd, arithmetic = recommended_cap(p90, summary_p90, s.finish_at, s.enforce_at)
    verified = sum(n.verified for n in nights)
    attempted = sum(len(n.tasks) for n in nights)
    per_task = None
    if verified:
        mean_tasks = s.tasks if s.tasks is not None else attempted / len(nights)
        per_task = round(to_usd(median) / (mean_tasks * verified / attempted), 6)
    return Learned(
        runs=tuple(
            UsedRun(
                f.run_id,
                f.created_at,
                len(n.tasks),
                n.verified,
                to_usd(n.opening + n.summary + sum(n.tasks)),
            )
            for f, n in zip(runs, nights, strict=True)
        ),
        chosen_by=chosen_by,
        tasks=s.tasks,
        tasks_from=s.tasks_from,
        trials=len(draws.totals),
        method=(
            f"{len(draws.totals)} nights simulated (seed {SEED}): each draws one recorded "
            "night's plan and summary and, with replacement, the night's number of recorded "
            "tasks, each with its calls and the drift check and replan after it"
        ),
        low_usd=to_usd(_percentile(draws.totals, 0.1)),
        median_usd=to_usd(median),
        p90_usd=to_usd(p90),
        mean_usd=to_usd(round(sum(draws.totals) / len(draws.totals))),
        summary_p90_usd=to_usd(summary_p90),
        budget_usd=s.budget_usd or None,
        chance_stopped_early=(draws.stopped / len(draws.totals)) if cap is not None else None,
        recommended_cap_usd=cap_usd,
        cap_arithmetic=arithmetic,
        cost_per_verified_task_usd=per_task,
        levers=tuple(learned_levers(runs, prices, s, median)),
    )
