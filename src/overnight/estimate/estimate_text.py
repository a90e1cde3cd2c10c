"""The estimate as the CLI prints it: the derivation, the bill, the levers table, the
recommendation and the check against the cap."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

from overnight.config.estimate import Workload, as_fraction
from overnight.estimate.arithmetic import main_rates
from overnight.estimate.counts import all_tasks, compactions_per_task
from overnight.estimate.derivation import Estimate
from overnight.estimate.figures import in_k, money, number, ordinal, percent, plural, rate_text
from overnight.estimate.recommend import BudgetCheck


def _header(w: Workload) -> str:
    commands = plural(w.command_tasks, "command task")
    if w.tasks == 0:
        return f"Night estimate: {commands}, no agent task"
    head = f"Night estimate: {w.tasks} tasks x {w.calls_per_task} calls per task"
    return f"{head}, plus {commands} (no model calls)" if w.command_tasks else head


def _derivation(est: Estimate, w: Workload, add: Callable[[str], None]) -> None:
    first, growth = in_k(w.first_call_tokens, min_places=1), in_k(w.growth_per_call_tokens)
    add("Per-task input (every call re-sends the whole conversation):")
    add(f"  input(t) = {first} + (t - 1) x {growth}")
    width = max(len(in_k(s, min_places=1)) for s in est.call_input_tokens)
    for t, size in enumerate(est.call_input_tokens, start=1):
        add(f"  input({t}) = {first} + {t - 1} x {growth} = {in_k(size, min_places=1):>{width}}")
    add(
        f"  per task     {in_k(est.task_input_tokens)} input, "
        f"{in_k(est.task_output_tokens, min_places=1)} output"
    )
    add(
        f"  x {w.tasks} tasks  {in_k(est.night_input_tokens)} input, "
        f"{in_k(est.night_output_tokens)} output"
    )
    add(
        f"  a {ordinal(w.calls_per_task + 1)} call would add {in_k(est.next_call_input_tokens)} "
        f"(its whole context), not {growth}:"
    )
    add("  a task's input grows with the square of its calls")
    if compactions_per_task(w):
        note = (
            f"(past {in_k(w.compact_at_tokens)} a task compacts its conversation; the bill still "
            "prices every call at its uncompacted size, an upper bound)"
        )
        add(textwrap.fill(note, 96, initial_indent="  ", subsequent_indent="   "))


def _bill_table(est: Estimate, add: Callable[[str], None]) -> None:
    add("Bill, each kind of call at the main model's rate:")
    add("  cost = (input in k x $/MTok + output in k x $/MTok) / 1000")
    head = ("kind", "calls", "input", "output", "arithmetic", "cost")
    table = [
        (
            r.kind,
            str(r.calls),
            in_k(r.input_tokens),
            in_k(r.output_tokens),
            r.arithmetic,
            money(r.cost_usd),
        )
        for r in est.bill
    ]
    table.append(("total", str(est.total_calls), "", "", "", money(est.total_usd)))
    widths = [max(len(row[i]) for row in [head, *table]) for i in range(len(head))]
    for row in [head, *table]:
        left = f"{row[0]:<{widths[0]}}"
        rest = "  ".join(
            f"{cell:<{widths[i]}}" if i == 4 else f"{cell:>{widths[i]}}"
            for i, cell in enumerate(row)
            if i
        )
        add(f"  {left}  {rest}".rstrip())
    add(f"  task execution is {percent(est.task_share)} of the night")


def _lever_table(est: Estimate, add: Callable[[str], None]) -> None:
    add(f"Levers, each alone against the {money(est.total_usd)} baseline:")
    lhead = ("lever", "new total", "saving $", "saving %")
    ltable = [
        (lv.name, money(lv.total_usd), money(lv.saving_usd), percent(lv.saving_pct))
        for lv in est.levers
    ]
    lw = [max(len(row[i]) for row in [lhead, *ltable]) for i in range(len(lhead))]
    for lrow in [lhead, *ltable]:
        cells = "  ".join(f"{c:>{lw[i]}}" for i, c in enumerate(lrow) if i)
        add(f"  {lrow[0]:<{lw[0]}}  {cells}")
    for lv in est.levers:
        add(f"  {lv.name}:")
        detail = [] if lv.arithmetic == "no change" else [lv.arithmetic]
        for text in [*detail, *lv.notes]:
            add(textwrap.fill(text, 96, initial_indent="    ", subsequent_indent="      "))
    for note in est.lever_notes:
        add(textwrap.fill(f"({note})", 96, initial_indent="  ", subsequent_indent="   "))


def _recommendation(est: Estimate, w: Workload, add: Callable[[str], None]) -> None:
    rec = est.recommendation
    add("Recommendation:")
    add(f"  hard cap           ${rec.hard_cap_usd} = {rec.cap_rule}")
    add(
        f"  headroom           ${rec.hard_cap_usd}.00 - {money(rec.derived_usd)} = "
        f"{money(rec.headroom_usd)} (the derived total is {percent(rec.derived_share_of_cap * 100)}"
        " of the cap)"
    )
    pass_rate = percent(as_fraction(w.verify_pass_rate) * 100, 0)
    add(f"  verified tasks     {all_tasks(w)} x {pass_rate} = {number(rec.verified_tasks)}")
    add(
        f"  per verified task  {money(rec.derived_usd)} / {number(rec.verified_tasks)} = "
        f"{money(rec.cost_per_verified_task_usd)}"
    )
    if w.tasks:
        add(
            f"  task token budget  {in_k(rec.task_input_tokens)} in / "
            f"{in_k(rec.task_output_tokens, min_places=1)} out per {rec.calls_per_task}-call task"
        )


def _budget(check: BudgetCheck, add: Callable[[str], None]) -> None:
    enforce_pct = percent(as_fraction(check.enforce_at) * 100, 0)
    finish_pct = percent(as_fraction(check.finish_at) * 100, 0)
    add("Against the night's cap (budget.usd):")
    add(
        f"  cap                {money(check.cap_usd)}: enforcement line "
        f"{money(check.enforcement_line_usd)} ({enforce_pct}), "
        f"no new task from {money(check.finish_line_usd)} ({finish_pct})"
    )
    add(f"  derived            {money(check.derived_usd)}")
    add(
        f"  least cap          {money(check.least_cap_usd)} (the derived total / "
        f"{enforce_pct}, rounded up to the cent)"
    )
    word = "COVERED" if check.covers else "NOT COVERED"
    add(textwrap.fill(f"{word}: {check.verdict}", 96, initial_indent="  ", subsequent_indent="  "))


def render_text(est: Estimate) -> str:
    """The derivation, the levers table and the recommendation (and the check against the
    cap, when one is given), as printed by the CLI."""
    w = Workload.model_validate(est.workload)
    lines: list[str] = []
    add = lines.append
    add(_header(w))
    if est.total_calls:
        rates = main_rates(w)
        add(
            f"  main model     {w.main_model or '(unnamed)'} at {rate_text(rates)} "
            f"(cache writes {number(rates.cache_write)}x, reads {number(rates.cache_read)}x input)"
        )
        if w.cheap_price is not None and w.tasks:
            add(f"  cheaper model  {w.cheap_model or '(unnamed)'} at {rate_text(w.cheap_price)}")
    add("")
    if w.tasks:
        _derivation(est, w, add)
        add("")
    if est.total_calls:
        _bill_table(est, add)
    else:
        add("Bill: no model calls (the harness runs each command and verify itself): $0.00")
    add("")
    if w.tasks:
        _lever_table(est, add)
        add("")
    _recommendation(est, w, add)
    if est.budget is not None:
        add("")
        _budget(est.budget, add)
    return "\n".join(lines) + "\n"
