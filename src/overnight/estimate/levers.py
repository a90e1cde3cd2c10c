"""Four levers, each applied alone to the task-execution row against the baseline total: prompt
caching, a cap on the calls per task, moving a share of the tasks to a cheaper model, and a
lower effort setting on those tasks. Their savings do not add up: they compete for the same
tokens."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from overnight.config.estimate import Workload, as_fraction, output_per_task, tiered_tasks
from overnight.estimate.arithmetic import (
    baseline,
    call_input_tokens,
    cost_of,
    main_rates,
    task_input_tokens,
)
from overnight.estimate.counts import low_effort_cut
from overnight.estimate.figures import in_k, money, number, percent, plural, rate_text

#: The cache TTL the caching lever assumes every gap between a task's calls stays under.
CACHE_TTL_MINUTES = 5


@dataclass(frozen=True)
class Lever:
    """One change applied alone to the baseline: the new task-execution row and total."""

    key: str
    name: str
    applies: bool
    task_row_usd: float
    total_usd: float
    saving_usd: float
    saving_pct: float
    arithmetic: str
    notes: tuple[str, ...] = ()
    per_call_input_tokens: tuple[float, ...] = ()
    task_input_tokens: float | None = None
    task_output_tokens: float | None = None
    ttl_miss_total_usd: float | None = None


def _lever(
    w: Workload,
    key: str,
    name: str,
    new_task_row: Fraction,
    arithmetic: str,
    *,
    applies: bool = True,
    notes: tuple[str, ...] = (),
    per_call: tuple[Fraction, ...] = (),
    task_in: Fraction | None = None,
    task_out: Fraction | None = None,
    ttl_miss_total: Fraction | None = None,
) -> Lever:
    row, total = baseline(w)
    new_total = total - row + new_task_row
    saving = total - new_total
    return Lever(
        key=key,
        name=name,
        applies=applies,
        task_row_usd=float(new_task_row),
        total_usd=float(new_total),
        saving_usd=float(saving),
        saving_pct=float(saving / total * 100) if total else 0.0,
        arithmetic=arithmetic,
        notes=notes,
        per_call_input_tokens=tuple(float(t) for t in per_call),
        task_input_tokens=None if task_in is None else float(task_in),
        task_output_tokens=None if task_out is None else float(task_out),
        ttl_miss_total_usd=None if ttl_miss_total is None else float(ttl_miss_total),
    )


def _no_agent_task(w: Workload, key: str, name: str) -> Lever:
    """A lever on a night with no agent task: there are no task-execution calls to change."""
    row, _ = baseline(w)
    return _lever(
        w, key, name, row, "no change", applies=False, notes=("no agent task: nothing to change",)
    )


def cached_call_tokens(w: Workload) -> list[Fraction]:
    """Effective input of each call with prompt caching (tokens billed at the plain input
    price): call 1 writes its whole prefix; each later call reads the previous call's input
    and writes only what is new. With a first call below the minimum cacheable prefix nothing
    is written or read, and every call is its full size."""
    rates = main_rates(w)
    sizes = call_input_tokens(w)
    if w.first_call_tokens < w.min_cacheable_tokens:
        return [Fraction(s) for s in sizes]
    write, read = as_fraction(rates.cache_write), as_fraction(rates.cache_read)
    out = [w.first_call_tokens * write]
    out += [prev * read + w.growth_per_call_tokens * write for prev in sizes[:-1]]
    return out


def caching_lever(w: Workload) -> Lever:
    """Prompt caching on the task-execution calls, assuming every gap between a task's calls
    is under the 5-minute TTL (and saying what the night costs when none is)."""
    rates = main_rates(w)
    ttl = f"{CACHE_TTL_MINUTES}-minute TTL"
    name = f"prompt caching (gaps < {ttl})"
    if w.tasks == 0:
        return _no_agent_task(w, "caching", name)
    row, total = baseline(w)
    effective = cached_call_tokens(w)
    task_in = sum(effective, Fraction(0))
    plain_in = task_input_tokens(w)
    out = w.tasks * output_per_task(w)
    if w.first_call_tokens < w.min_cacheable_tokens:
        return _lever(
            w,
            "caching",
            name,
            row,
            "no change",
            applies=False,
            notes=(
                f"collapses to no saving: the first call's {in_k(w.first_call_tokens)} prefix is "
                f"below the model's minimum cacheable length ({w.min_cacheable_tokens:,} "
                "tokens), so no write is accepted, every read misses, and every call bills at "
                "the full input price",
            ),
            per_call=tuple(effective),
            task_in=task_in,
            task_out=Fraction(output_per_task(w)),
        )
    new_row = cost_of(w.tasks * task_in, out, rates)
    miss_in = w.tasks * plain_in * as_fraction(rates.cache_write)
    miss_total = total - row + cost_of(miss_in, out, rates)
    terms = " + ".join(in_k(t) for t in effective)
    return _lever(
        w,
        "caching",
        name,
        new_row,
        f"({in_k(w.tasks * task_in, unit='')} x {number(rates.input)} + "
        f"{in_k(out, unit='')} x {number(rates.output)}) / 1000 = {money(new_row)} task row",
        notes=(
            f"effective input per call {terms} = {in_k(task_in)} per task "
            f"(vs {in_k(plain_in)}): writes at {number(rates.cache_write)}x, reads at "
            f"{number(rates.cache_read)}x the input price",
            f"assumes every gap between a task's calls is under the {ttl}; with slower tools "
            f"each call pays the {number(rates.cache_write)}x write and reads nothing, and the "
            f"night costs {money(miss_total)} instead: measure the gaps, cache only the fast "
            "tasks, or use the 1-hour TTL",
        ),
        per_call=tuple(effective),
        task_in=task_in,
        task_out=Fraction(output_per_task(w)),
        ttl_miss_total=miss_total,
    )


def loop_cap_lever(w: Workload) -> Lever:
    """Cap every task at ``loop_cap_calls`` calls: the dropped calls take their whole re-sent
    context with them; output shrinks in proportion to the calls."""
    rates = main_rates(w)
    cap = w.loop_cap_calls
    name = f"loop cap at {cap} calls"
    if w.tasks == 0:
        return _no_agent_task(w, "loop_cap", name)
    row, _ = baseline(w)
    if cap >= w.calls_per_task:
        return _lever(
            w,
            "loop_cap",
            name,
            row,
            "no change",
            applies=False,
            notes=(f"a task already makes {w.calls_per_task} call(s), not more than {cap}",),
        )
    out = output_per_task(w)
    sizes = call_input_tokens(w, cap)
    task_in = Fraction(sum(sizes))
    task_out = Fraction(out * cap, w.calls_per_task)
    new_row = cost_of(w.tasks * task_in, w.tasks * task_out, rates)
    return _lever(
        w,
        "loop_cap",
        name,
        new_row,
        f"({in_k(w.tasks * task_in, unit='')} x {number(rates.input)} + "
        f"{in_k(w.tasks * task_out, unit='')} x {number(rates.output)}) / 1000 = "
        f"{money(new_row)} task row",
        notes=(
            f"input {' + '.join(in_k(s) for s in sizes)} = {in_k(task_in)} per task "
            f"(vs {in_k(task_input_tokens(w))}); output {in_k(out)} x "
            f"{cap}/{w.calls_per_task} = {in_k(task_out)}",
        ),
        per_call=tuple(Fraction(s) for s in sizes),
        task_in=task_in,
        task_out=task_out,
    )


def tiering_lever(w: Workload) -> Lever:
    """Move ``tiered_share`` of the tasks to the cheaper model (not applicable without one)."""
    rates = main_rates(w)
    moved = tiered_tasks(w)
    cheap = w.cheap_model or "the cheaper model"
    name = f"{plural(moved, 'task')} ({percent(as_fraction(w.tiered_share) * 100, 0)}) on {cheap}"
    if w.tasks == 0:
        return _no_agent_task(w, "tiering", name)
    row, _ = baseline(w)
    if w.cheap_price is None or moved == 0:
        why = "no cheaper model is priced" if w.cheap_price is None else "no task is moved"
        return _lever(w, "tiering", name, row, "no change", applies=False, notes=(why,))
    t_in, t_out = task_input_tokens(w), output_per_task(w)
    per_main = cost_of(t_in, t_out, rates)
    per_cheap = cost_of(t_in, t_out, w.cheap_price)
    kept = w.tasks - moved
    new_row = kept * per_main + moved * per_cheap
    return _lever(
        w,
        "tiering",
        name,
        new_row,
        f"{kept} x {money(per_main, 4)} + {moved} x {money(per_cheap, 4)} per task = "
        f"{money(new_row)} task row",
        notes=(
            f"{cheap} at {rate_text(w.cheap_price)} against {rate_text(rates)}; only the "
            "task-execution calls move",
        ),
    )


def low_effort_lever(w: Workload) -> Lever:
    """A low effort setting on the tiered tasks: their output shrinks by ``low_effort_cut``
    (billed at the main model's output price)."""
    rates = main_rates(w)
    moved = tiered_tasks(w)
    cut = low_effort_cut(w)
    name = f"low effort on the {plural(moved, 'tiered task')}"
    if w.tasks == 0:
        return _no_agent_task(w, "low_effort", name)
    row, _ = baseline(w)
    if moved == 0 or cut == 0:
        return _lever(
            w,
            "low_effort",
            name,
            row,
            "no change",
            applies=False,
            notes=("no task is tiered" if moved == 0 else "no output is cut",),
        )
    saved = cost_of(0, cut, rates)
    night_out = w.tasks * output_per_task(w)
    return _lever(
        w,
        "low_effort",
        name,
        row - saved,
        f"{in_k(cut, unit='')} x {number(rates.output)} / 1000 = {money(saved)} saved",
        notes=(f"output {in_k(night_out)} -> {in_k(night_out - cut)} for the night",),
        task_out=Fraction(night_out - cut, w.tasks),
    )


def levers(w: Workload) -> list[Lever]:
    """Each lever alone against the baseline total."""
    return [caching_lever(w), loop_cap_lever(w), tiering_lever(w), low_effort_lever(w)]
