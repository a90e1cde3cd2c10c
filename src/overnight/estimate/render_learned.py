"""The estimate learned from recorded nights, as text."""

from __future__ import annotations

from overnight.estimate.figures import plural
from overnight.estimate.learned import Learned


def usd(x: float) -> str:
    """Cents for a dollar and more; a small night's figures to the hundredth of a cent."""
    return f"${x:,.2f}" if abs(x) >= 1 else f"${x:.4f}"


def render_learned(e: Learned) -> str:
    lines = [
        f"Night estimate learned from {plural(len(e.runs), 'recorded night')} ({e.chosen_by}):",
    ]
    for r in e.runs:
        lines.append(
            f"  {r.run_id} ({r.created_at or 'date unknown'}): {plural(r.tasks, 'task')}, "
            f"{r.verified} verified, {usd(r.usd)} at this night's prices"
        )
    if e.tasks is not None:
        night = f"{plural(e.tasks, 'agent task')} ({e.tasks_from})"
    else:
        counts = ", ".join(str(r.tasks) for r in e.runs)
        night = f"as many agent tasks as a recorded night had ({counts}): {e.tasks_from}"
    lines += [
        f"The night: {night}.",
        "",
        f"Range: median {usd(e.median_usd)}, 90th percentile {usd(e.p90_usd)} "
        f"(10th {usd(e.low_usd)}, mean {usd(e.mean_usd)}).",
        f"  How: {e.method}.",
        "  Half the nights like these cost less than the median; nine in ten cost less than "
        "the 90th percentile.",
    ]
    if e.budget_usd is not None and e.chance_stopped_early is not None:
        lines.append(
            f"Chance the {usd(e.budget_usd)} cap stops the night before its work is done: "
            f"{e.chance_stopped_early:.1%}."
        )
    lines.append(f"Recommended cap: {usd(e.recommended_cap_usd)} ({e.cap_arithmetic}).")
    if e.cost_per_verified_task_usd is not None:
        lines.append(f"Cost per verified task: {usd(e.cost_per_verified_task_usd)}.")
    if e.levers:
        lines += ["", "Levers, each alone, priced on the recorded tokens (median of the night):"]
        for lever in e.levers:
            change = "saves" if lever.saving_usd >= 0 else "adds"
            lines.append(
                f"  {lever.name}: {usd(lever.median_usd)}, {change} "
                f"{usd(abs(lever.saving_usd))} ({lever.note})"
            )
    return "\n".join(lines) + "\n"
