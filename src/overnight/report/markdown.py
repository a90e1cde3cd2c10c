"""The terminal result as Markdown, for a person reading it in the morning."""

from __future__ import annotations

from overnight.core.drift import DRIFT_PRUNE_ABOVE
from overnight.core.endings import DRIFT_HALT_ABOVE
from overnight.core.text import printable
from overnight.report.facts import (
    ReportExtras,
    command_note,
    fmt_seconds,
    fmt_usd,
    money_lines,
    sandbox_banner,
    sandbox_line,
)
from overnight.report.result import BudgetBlock, TerminalResult

#: Up to this many model calls, the spend curve is listed point by point.
CURVE_POINTS_LISTED = 30


def _budget_row(name: str, b: BudgetBlock, unit: str) -> str:
    def fmt(v: float | None) -> str:
        if v is None:
            return "-"
        return f"${v:,.2f}" if unit == "$" else f"{v:,.0f}{unit}"

    if unit == "$" and not b.limit:
        return f"| {name} | {fmt(b.used)} | none (no model) | - | - | - |"
    share = f"{100 * b.used / b.limit:.0f}%" if b.limit else "-"
    refused = f" (a call that would reach {fmt(b.refused_at)} was refused)" if b.refused_at else ""
    return (
        f"| {name} | {fmt(b.used)} | {fmt(b.limit)} | {share} | {fmt(b.stop_at)} "
        f"| {fmt(b.enforced_at)} |{refused}"
    )


def _money_lines(r: TerminalResult, extras: ReportExtras) -> str:
    lines = money_lines(r, extras.fractions)
    if not lines:
        return "Money lines: none (no money limit)."
    parts = []
    for line in lines:
        when = (
            "not reached"
            if line.reached_at is None
            else f"reached at {fmt_seconds(line.reached_at)}"
        )
        parts.append(f"{line.name} {fmt_usd(line.usd)} ({100 * line.fraction:.0f}%, {when})")
    text = "Money lines: " + "; ".join(parts) + "."
    enforced = r.budgets.cost_usd.enforced_at
    limit = r.budgets.cost_usd.limit
    if enforced is not None and limit:
        text += (
            f" Enforced at {fmt_usd(enforced)} ({100 * enforced / limit:.0f}%): no ordinary "
            "call may cross it; above it lies the wrap-up reserve."
        )
    return text


def _spend_curve(r: TerminalResult) -> str:
    curve = r.spend.curve
    if not curve:
        return "Spend curve: no model call was made."
    if len(curve) <= CURVE_POINTS_LISTED:
        points = ", ".join(f"{fmt_seconds(p.seconds)} {fmt_usd(p.cost_usd)}" for p in curve)
        return f"Spend curve (time, cumulative), one point per model call: {points}."
    first, last = curve[0], curve[-1]
    return (
        f"Spend curve: {len(curve)} model calls, the first at {fmt_seconds(first.seconds)} "
        f"({fmt_usd(first.cost_usd)}), the last at {fmt_seconds(last.seconds)} "
        f"({fmt_usd(last.cost_usd)})."
    )


def render_markdown(r: TerminalResult, extras: ReportExtras | None = None) -> str:
    """The report; ``extras`` adds the lessons and places the notice band."""
    extras = extras or ReportExtras()
    out: list[str] = []
    out.append(f"# overnight run {r.run_id}")
    out.append("")
    banner = sandbox_banner(r)
    if banner:
        out.append(f"> **{banner}**")
        out.append("")
    out.append(
        f"**{r.stop_reason}** ({r.status}, exit {r.exit_code}, "
        f"{'resumable' if r.resumable else 'not resumable'}): {r.message}."
    )
    out.append("")
    alert = f"Alert: {r.alert}."
    if r.alerts:
        sent = "; ".join(", ".join(f"{k}: {v}" for k, v in a.items()) for a in r.alerts)
        alert += f" Sent: {sent}."
    out.append(alert)
    out.append("")
    out.append(f"Goal: {r.goal.text}")
    out.append("")
    out.append("## Summary")
    out.append("")
    source = "written by the model" if r.wrapup.source == "model" else "rendered from state"
    out.append(f"_{source}_")
    out.append("")
    out.append(r.partial_output)
    out.append("")
    out.append("## Budgets (at the stop decision)")
    out.append("")
    out.append("| budget | used | limit | share | stop at | enforced at |")
    out.append("|---|---|---|---|---|---|")
    out.append(_budget_row("money", r.budgets.cost_usd, "$"))
    out.append(_budget_row("tokens", r.budgets.tokens, ""))
    out.append(_budget_row("steps", r.budgets.steps, ""))
    out.append(_budget_row("seconds", r.budgets.seconds, "s"))
    out.append("")
    out.append(_money_lines(r, extras))
    out.append("")
    cpv = r.spend.cost_per_verified_task
    per_task = "n/a" if cpv is None else f"${cpv:.4f}"
    out.append(
        f"Spent ${r.spend.total_usd:.4f} in {r.spend.model_calls} model call(s), wrap-up "
        f"${r.wrapup.cost_usd:.4f} included; per verified task: {per_task}."
    )
    out.append("")
    if r.spend.by_purpose:
        by = sorted(r.spend.by_purpose.items(), key=lambda kv: -kv[1])
        out.append("By purpose: " + ", ".join(f"{k} {fmt_usd(v)}" for k, v in by) + ".")
        out.append("")
    out.append(_spend_curve(r))
    out.append("")
    out.append(f"## Verified tasks ({len(r.verified)})")
    out.append("")
    for v in r.verified:
        commit = (v.commit or "-")[:12]
        note = command_note(v)
        out.append(
            f"- `{v.id}` {v.title} - commit `{commit}`, {v.attempts} attempt(s), via {v.via}"
            + (f" ({note}; its verify passed)" if note else "")
        )
    if not r.verified:
        out.append("- none")
    out.append("")
    out.append(f"## Parked tasks ({len(r.plan.parked)})")
    out.append("")
    for p in r.plan.parked:
        patch = f" (patch: `{p.patch}`)" if p.patch else ""
        out.append(f"- `{p.id}` {p.title}: {p.reason}{patch}")
        if p.protected_changes:
            changed = ", ".join(f"`{path}`" for path in p.protected_changes)
            out.append(f"  - protected paths it changed (not committed): {changed}")
        if p.detail:
            out.append(f"  - verifier said: {p.detail.strip().splitlines()[-1][:200]}")
    if not r.plan.parked:
        out.append("- none")
    out.append("")
    if r.plan.in_progress:
        out.append(f"In flight when the run stopped (resume verifies it): `{r.plan.in_progress}`")
        out.append("")
    else:
        out.append("In flight when the run stopped: none.")
        out.append("")
    out.append(f"Not started: {', '.join(r.plan.remaining) or 'none'}")
    out.append("")
    if r.plan.pruned:
        out.append("## Pruned for drift")
        out.append("")
        for pr in r.plan.pruned:
            out.append(f"- `{pr.id}` {pr.title} (score {pr.drift_score:.2f})")
        out.append("")
    out.append(f"## External effects ({len(r.effects)})")
    out.append("")
    for e in r.effects:
        answer = f" -> {e.get('detail')}" if e.get("detail") is not None else ""
        error = f" ({e.get('error')})" if e.get("error") else ""
        out.append(f"- **{e.get('state')}** `{e.get('tool')}` {e.get('args')}{answer}{error}")
        out.append(f"  - task `{e.get('task')}`, key `{e.get('key')}`")
    if not r.effects:
        out.append("- none")
    out.append("")
    out.append("## Drift history")
    out.append("")
    out.append(
        f"Above {DRIFT_PRUNE_ABOVE:g} the off-goal tasks are pruned; above {DRIFT_HALT_ABOVE:g} "
        "the run halts (DRIFT_DETECTED)."
    )
    out.append("")
    for d in r.drift:
        off = f"; off-goal: {', '.join(d.off_goal_task_ids)}" if d.off_goal_task_ids else ""
        out.append(
            f"- after {d.at_task_count} task(s): {d.score:.2f} ({d.action}), "
            f"at {fmt_seconds(d.seconds)}{off}"
        )
    if not r.drift:
        out.append("- no drift check ran")
    out.append("")
    out.append(f"## Lessons ({len(extras.lessons)})")
    out.append("")
    for lesson in extras.lessons:
        out.append(f"- {lesson}")
    if not extras.lessons:
        out.append("- none recorded")
    out.append("")
    out.append("## Work")
    out.append("")
    out.append(
        f"Branch `{r.branch.name}` from `{r.branch.base_commit[:12]}`, "
        f"worktree `{r.branch.worktree}`."
    )
    if r.branch.diff_stat:
        out.append("")
        out.append("```")
        out.append(r.branch.diff_stat.rstrip())
        out.append("```")
    out.append("")
    if r.predicate:
        state = "passed" if r.predicate.met else f"not passed (exit {r.predicate.exit_code})"
        out.append(f"Goal predicate `{r.predicate.command}`: {state}.")
        out.append("")
    out.append(sandbox_line(r))
    out.append("")
    out.append(
        f"Trace: `{r.trace_ref}`. Started {r.started_at}, ended {r.ended_at}, resumes: {r.resumes}."
    )
    return printable("\n".join(out)) + "\n"
