"""The terminal result as Markdown, for a person reading it in the morning.

It lays out the report's facts (``overnight.report.view``) as text; it derives none of its own.
"""

from __future__ import annotations

from overnight.core.text import md_code, md_escape, md_fence, printable
from overnight.report.facts import ReportExtras, report_facts
from overnight.report.view import BudgetRow, GateRow, ReportFacts, SpendFacts
from overnight.store.result import TerminalResult

#: Up to this many model calls, the spend curve is listed point by point.
CURVE_POINTS_LISTED = 30


def gate_lines(gates: list[GateRow]) -> list[str]:
    """One list item per gate, its new findings (if any) under it; the pull request's body
    lists them the same way."""
    out = []
    for g in gates:
        if g.unreadable:
            out.append(f"- {md_code(g.name)}: {g.said}: {md_code(g.unreadable)}")
            continue
        out.append(f"- {md_code(g.name)}: {g.said}.")
        out.extend(f"  - new: {md_code(found)}" for found in g.new)
        if g.new_unlisted:
            out.append(f"  - and {g.new_unlisted} more new (result.json lists them all)")
    return out


def _budget_row(row: BudgetRow) -> str:
    if row.no_model:
        return f"| {row.name} | {row.used} | none (no model) | - | - | - |"
    stop, enforced, refused = row.mark("stop"), row.mark("enforced"), row.mark("refused")
    note = f" (a call that would reach {refused.amount} was refused)" if refused else ""
    return (
        f"| {row.name} | {row.used} | {row.limit or '-'} | {row.share or '-'} "
        f"| {stop.amount if stop else '-'} | {enforced.amount if enforced else '-'} |{note}"
    )


def _money_lines(f: ReportFacts) -> str:
    if not f.spend.lines:
        return "Money lines: none (no money limit)."
    parts = [f"{line.name} {line.amount} ({line.share}, {line.reached})" for line in f.spend.lines]
    text = "Money lines: " + "; ".join(parts) + "."
    enforced = f.money.mark("enforced")
    if enforced is not None and enforced.share is not None:
        text += (
            f" Enforced at {enforced.amount} ({enforced.share}): no ordinary call may cross it; "
            "above it lies the wrap-up reserve."
        )
    return text


def _spend_curve(s: SpendFacts) -> str:
    curve = s.curve
    if not curve:
        return "Spend curve: no model call was made."
    if len(curve) <= CURVE_POINTS_LISTED:
        points = ", ".join(f"{p.at} {p.spent}" for p in curve)
        return f"Spend curve (time, cumulative), one point per model call: {points}."
    first, last = curve[0], curve[-1]
    return (
        f"Spend curve: {len(curve)} model calls, the first at {first.at} ({first.spent}), "
        f"the last at {last.at} ({last.spent})."
    )


def render_markdown_facts(f: ReportFacts) -> str:
    """The report of these facts."""
    h, s, t = f.headline, f.spend, f.tasks
    out: list[str] = []
    out.append(f"# overnight run {h.run_id}")
    out.append("")
    if h.banner:
        out.append(f"> **{h.banner}**")
        out.append("")
    out.append(
        f"**{h.stop_reason}** ({h.status}, exit {h.exit_code}, "
        f"{'resumable' if h.resumable else 'not resumable'}): {md_escape(h.why)}"
    )
    out.append("")
    alert = f"{'Alerted' if h.alerts_sent else 'Alert'}: {md_escape(h.alert_said)}"
    if h.alerts_sent:
        sent = "; ".join(
            ", ".join(f"{md_escape(p.name)}: {md_code(p.value)}" for p in a) for a in h.alerts_sent
        )
        alert += f" Sent: {sent}."
    out.append(alert)
    out.append("")
    if h.automation:
        out.append(f"> **{h.automation_said}**")
        out.extend(
            f"> - {md_code(a.task)}: {', '.join(md_code(p) for p in a.paths)}" for a in h.automation
        )
        out.append("")
    out.append(f"Goal: {md_escape(f.goal.text)}")
    out.append("")
    if h.gates:
        out.append(h.gates_said)
        out.append("")
        out.extend(gate_lines(h.gates))
        out.append("")
    out.append("## Summary")
    out.append("")
    money_note = (
        "; money figures in it are from before its own call"
        if f.summary.source == "model" and not s.no_model
        else ""
    )
    out.append(f"_{f.summary.written_by}{money_note}_")
    out.append("")
    if f.summary.error:
        out.append(f"The summary call failed: {md_code(f.summary.error)}")
        out.append("")
    out.append(md_fence(f.summary.text))
    out.append("")
    out.append("## Budgets (at the stop decision)")
    out.append("")
    out.append("| budget | used | limit | share | stop at | enforced at |")
    out.append("|---|---|---|---|---|---|")
    out.extend(_budget_row(row) for row in f.budgets if not (s.no_model and row.key == "cost_usd"))
    out.append("")
    if s.no_model:
        out.append(f"Money: {s.said}.")
        out.append("")
    else:
        out.append(_money_lines(f))
        out.append("")
        out.append(f"Spent {s.said}; per verified task: {s.per_verified_task}.")
        out.append("")
    if s.by_purpose:
        out.append("By purpose: " + ", ".join(f"{p.name} {p.value}" for p in s.by_purpose) + ".")
        out.append("")
    if s.warnings:
        out.append(f"Billing warnings ({len(s.warnings)}):")
        out.extend(
            f"- {md_code(w.kind)} {md_escape(w.call)}: {md_escape(w.message)}" for w in s.warnings
        )
        out.append("")
    if not s.no_model:
        out.append(_spend_curve(s))
        out.append("")
    out.append(f"## Verified tasks ({len(t.verified)})")
    out.append("")
    for v in t.verified:
        landed = f"commit `{v.short_commit}`" if v.commit else "verified, nothing to commit"
        note = f" ({v.note})" if v.note else ""
        out.append(
            f"- {md_code(v.id)} {md_code(v.title)} - {landed}, {v.attempts} attempt(s), "
            f"{v.via_said}{note}"
        )
        if v.left_out:
            out.append(f"  - generated files left out of the candidate: {v.left_out}")
    if not t.verified:
        out.append("- none")
    out.append("")
    out.append(f"## Parked tasks ({len(t.parked)})")
    out.append("")
    for p in t.parked:
        patch = f" (patch: {md_code(p.patch)})" if p.patch else ""
        out.append(f"- {md_code(p.id)} {md_code(p.title)}: {md_code(p.reason)}{patch}")
        if p.protected_changes:
            changed = ", ".join(md_code(path) for path in p.protected_changes)
            out.append(f"  - protected paths it changed (not committed): {changed}")
        if p.automation_changes:
            changed = ", ".join(md_code(path) for path in p.automation_changes)
            out.append(f"  - automation paths it changed (not committed): {changed}")
        if p.left_out:
            out.append(f"  - generated files left out of the candidate: {p.left_out}")
        if p.verifier_said:
            screened = p.protected_changes or p.automation_changes
            who = "the protection check" if screened else "verifier"
            out.append(f"  - {who} said: {md_code(p.verifier_said)}")
    if not t.parked:
        out.append("- none")
    out.append("")
    if t.in_flight:
        out.append(f"In flight when the run stopped (resume verifies it): {md_code(t.in_flight)}")
    else:
        out.append("In flight when the run stopped: none.")
    out.append("")
    out.append(f"Not started: {', '.join(md_code(i) for i in t.not_started) or 'none'}")
    out.append("")
    if t.pruned:
        out.append("## Pruned for drift")
        out.append("")
        for pr in t.pruned:
            out.append(f"- {md_code(pr.id)} {md_code(pr.title)} (score {pr.score})")
        out.append("")
    out.append(f"## External effects ({len(f.effects)})")
    out.append("")
    for fx in f.effects:
        answer = f" -> {md_code(fx.answer)}" if fx.answer is not None else ""
        error = f" ({md_code(fx.error)})" if fx.error else ""
        out.append(
            f"- **{md_escape(fx.state)}** {md_code(fx.tool)} {md_code(fx.args)}{answer}{error}"
        )
        out.append(f"  - task {md_code(fx.task)}, key {md_code(fx.key)}")
    if not f.effects:
        out.append("- none")
    out.append("")
    out.append("## Drift history")
    out.append("")
    out.append(f.drift.rule)
    out.append("")
    for d in f.drift.checks:
        off = f"; off-goal: {md_code(d.off_goal)}" if d.off_goal else ""
        if d.automation_shown:
            off += f"; shown the automation paths tasks changed: {md_code(d.automation_shown)}"
        out.append(f"- after {d.after_tasks} task(s): {d.score} ({d.action}), at {d.at}{off}")
    if not f.drift.checks:
        out.append("- no drift check ran")
    out.append("")
    out.append(f"## Lessons ({len(f.lessons)})")
    out.append("")
    out.extend(f"- {md_code(lesson)}" for lesson in f.lessons)
    if not f.lessons:
        out.append("- none recorded")
    out.append("")
    w = f.work
    out.append("## Work")
    out.append("")
    out.append(
        f"Branch {md_code(w.branch)} from {md_code(w.base_commit)}, "
        f"worktree {md_code(w.worktree)} ({w.worktree_kept})."
    )
    if w.diff_stat:
        out.append("")
        out.append(md_fence(w.diff_stat, info=""))
    out.append("")
    predicate = f.goal.predicate
    if predicate is not None:
        out.append(f"Goal predicate {md_code(predicate.command)}: {predicate.state}.")
        out.append("")
    out.append(w.sandbox)
    out.append("")
    for line in w.executor:
        out.append(f"- {line}" if line.startswith("Task ") else line)
    if w.executor:
        out.append("")
    rec = f.record
    gap = f" **{rec.trace_gap}**" if rec.trace_gap else ""
    out.append(
        f"Trace: {md_code(rec.trace_ref)}. Started {rec.started_at}, ended {rec.ended_at}, "
        f"resumes: {rec.resumes}.{gap}"
    )
    return printable("\n".join(out)) + "\n"


def render_markdown(r: TerminalResult, extras: ReportExtras | None = None) -> str:
    """The report; ``extras`` adds the lessons and places the notice band."""
    return render_markdown_facts(report_facts(r, extras))
