"""The facts a report shows, derived once from ``result.json`` and what lies beside it.

``report_facts`` builds the view model (``overnight.report.view``) both renderings lay out.
Two things live outside the terminal result: the lessons the run learned (in its checkpoint)
and where the budget bands sit (in its spec). Both are read leniently: a report of a run whose
checkpoint or spec cannot be read is still a report, without them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from overnight.core.budget import BudgetFractions
from overnight.core.drift import DRIFT_PRUNE_ABOVE
from overnight.core.endings import DRIFT_HALT_ABOVE
from overnight.core.text import clip
from overnight.report.view import (
    AutomationLanded,
    BillingWarning,
    BudgetMark,
    BudgetRow,
    CurvePoint,
    DriftFacts,
    DriftRow,
    EffectRow,
    GateRow,
    GoalFacts,
    Headline,
    MarkKind,
    MoneyLineFacts,
    Pair,
    ParkedRow,
    PredicateFacts,
    PrunedRow,
    ReportFacts,
    RunRecord,
    SpendFacts,
    SummaryFacts,
    TaskFacts,
    VerifiedRow,
    WorkFacts,
)
from overnight.store.result import (
    BudgetBlock,
    GateBlock,
    PredicateBlock,
    ResultWarning,
    TerminalResult,
    VerifiedTask,
)
from overnight.store.run_state import load_run_state


@dataclass(frozen=True)
class ReportExtras:
    lessons: list[str] = field(default_factory=list)
    """The run's lessons, oldest first; empty when the checkpoint cannot be read."""
    fractions: BudgetFractions = field(default_factory=BudgetFractions)
    """Where the bands sit, from the run's spec; the defaults when it cannot be read."""


def read_lessons(run_dir: Path) -> list[str]:
    try:
        state = load_run_state(run_dir / "checkpoint.json")
    except Exception:  # a corrupt or unreadable checkpoint: the report goes on without lessons
        return []
    return list(state.lessons) if state else []


def read_fractions(run_dir: Path) -> BudgetFractions:
    try:
        budget = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))["budget"]
        return BudgetFractions(
            notice_at=float(budget["notice_at"]),
            finish_at=float(budget["finish_at"]),
            enforce_at=float(budget["enforce_at"]),
        )
    except Exception:  # no spec, or one from another version: the default bands
        return BudgetFractions()


def read_extras(run_dir: Path) -> ReportExtras:
    return ReportExtras(lessons=read_lessons(run_dir), fractions=read_fractions(run_dir))


@dataclass(frozen=True)
class MoneyLine:
    """One horizontal line of the money budget and when the spend first reached it."""

    name: str
    """``notice`` (the agent is told), ``finish`` (no new task), ``limit`` (crossed by nothing)."""
    fraction: float
    usd: float
    reached_at: float | None
    """Seconds into the run of the first call whose cumulative spend reached the line."""


def money_lines(r: TerminalResult, fractions: BudgetFractions) -> list[MoneyLine]:
    """The 70/90/100% lines (as the run's spec placed them); none without a positive limit."""
    money = r.budgets.cost_usd
    limit = money.limit
    if limit is None or limit <= 0:
        return []
    finish = money.stop_at if money.stop_at is not None else limit * fractions.finish_at
    placed = (
        ("notice", fractions.notice_at, limit * fractions.notice_at),
        ("finish", finish / limit, finish),
        ("limit", 1.0, limit),
    )
    lines: list[MoneyLine] = []
    for name, fraction, usd in placed:
        reached = next((p.seconds for p in r.spend.curve if p.cost_usd >= usd - 1e-12), None)
        lines.append(MoneyLine(name, fraction, usd, reached))
    return lines


def fmt_usd(value: float) -> str:
    """Cents when they say it all, four decimals when the amount is small or finer."""
    if abs(value - round(value, 2)) < 1e-9:
        return f"${value:,.2f}"
    return f"${value:,.4f}"


def fmt_seconds(value: float) -> str:
    if value < 60:
        return f"{value:.1f}s"
    whole = round(value)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def fmt_amount(name: str, value: float) -> str:
    """A budget amount in its own unit: dollars, tokens, steps or wall-clock time."""
    if name in ("cost_usd", "fleet_money"):
        return fmt_usd(value)
    if name == "seconds":
        return fmt_seconds(value)
    return f"{value:,.0f}"


def sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text.endswith((".", "!", "?")) else f"{text}."


UNSANDBOXED_BANNER = (
    'Unsandboxed night: [sandbox] mode = "off". Commands the model wrote or influenced ran '
    "with your user's access to this machine, its files and its network; the verdict is only "
    "as good as the model's restraint."
)


def sandbox_banner(r: TerminalResult) -> str | None:
    """The warning a report opens with when the night ran without its sandbox."""
    return UNSANDBOXED_BANNER if r.sandbox is not None and r.sandbox.mode == "off" else None


def executor_lines(r: TerminalResult) -> list[str]:
    """The CLI agent that carried out agent tasks, each attempt's cost as the night booked it
    beside what the CLI said of itself (its word, never counted); none for other nights."""
    ex = r.executor
    if ex is None:
        return []
    out = [f"Executor: {ex.kind} {ex.version} ({ex.program}); its calls metered by the harness."]
    for a in ex.attempts:
        own = []
        if a.cli_success is not None:
            own.append("success" if a.cli_success else "failure")
        if a.cli_reported_usd is not None:
            own.append(f"${a.cli_reported_usd:.4f}")
        said = f"; it says {', '.join(own)} (its own word, not counted)" if own else ""
        out.append(
            f"Task {a.task}: {a.status}, {a.calls} call(s) booked ${a.booked_usd:.4f}{said}; "
            f"its output: {a.log}"
        )
    return out


def sandbox_line(r: TerminalResult) -> str:
    """One sentence on how the night's commands were confined."""
    sb = r.sandbox
    if sb is None:
        return "Sandbox: not recorded (a result from before the sandbox existed)."
    network = "with the network" if sb.network else "without network"
    line = (
        f'Sandbox: mode "{sb.mode}", {network}; {sb.sandboxed_commands} command(s) ran '
        f"sandboxed, {sb.unsandboxed_commands} outside it (as the mode allows)."
    )
    if sb.ran_as_root:
        why = f" ({' '.join(sb.root_reason.split())[:300]})" if sb.root_reason else ""
        line += (
            f" The sandbox ran as root{why}: the process limit, file permissions and "
            "capabilities did not bind as for a normal user."
        )
    elif sb.uid is not None:
        line += f" Sandboxed commands ran as uid {sb.uid}, not root."
    if sb.process_limit:
        line += f" Process limit: {' '.join(sb.process_limit.split())[:300]}."
    return line


def command_note(v: VerifiedTask) -> str:
    """What a verified command task's own command did, when it did not simply exit 0, how
    its verify was judged when that was from its exit code only, and what of the test runner
    its files reach into; empty when there is nothing to say."""
    done = []
    if v.command_timed_out:
        done.append("its command timed out")
    elif v.command_exit_code not in (None, 0):
        done.append(f"its command exited {v.command_exit_code}")
    if v.evidence == "exit_code_only":
        done.append("its verify passed, judged from its exit code only")
    elif done:
        done.append("its verify passed")
    if v.touches_runner:
        done.append(f"touches the test runner ({', '.join(v.touches_runner[:5])}): read its diff")
    if v.automation:
        done.append(f"changes what runs by itself, as the spec allows ({', '.join(v.automation)})")
    return "; ".join(done)


AUTOMATION_LANDED = (
    "Landed changes to what runs by itself (CI, git, shell, editor or agent configuration, "
    "commit or install hooks), allowed by [predicate] allow_automation: they run once the "
    "branch is pushed or checked out, so read them first."
)


def automation_landed(r: TerminalResult) -> list[AutomationLanded]:
    """Each verified task's landed automation paths, for the report's first screen."""
    return [AutomationLanded(v.id, list(v.automation)) for v in r.verified if v.automation]


GATES_SAID = (
    "The gates, the repository's own checks, ran on the base commit and on each change "
    "before it landed; a change that adds a finding does not land."
)

#: New findings of a gate listed on the report's first screen (result.json keeps them all).
#: What landed has none; a longer list would push the verdict off the screen.
GATE_NEW_LISTED = 10


def gate_said(g: GateBlock, landed: bool) -> str:
    """A gate's counts in one line, ``landed`` saying whether any commit landed (without one,
    the count after the night's commits is the base's again and says nothing)."""
    if g.unreadable.strip():
        return "judged nothing: its output on the base commit could not be read"
    unit = "file(s) not formatted" if g.kind == "format" else "finding(s)"
    on_base = f"{g.base} {unit} on the base commit"
    if not landed and not g.new and g.landed == g.base:
        return f"{on_base}; no commit landed"
    return f"{on_base}, {g.landed} after the night's commits, {len(g.new)} new, {g.removed} removed"


def gate_rows(r: TerminalResult) -> list[GateRow]:
    """Each gate's counts and new findings, for the report's first screen. Texts from the
    run are one line each, so that none can add a row or a heading to the report."""
    landed = any(v.commit for v in r.verified)
    rows = []
    for g in r.gates:
        new = [line for line in (" ".join(t.split()) for t in g.new) if line]
        rows.append(
            GateRow(
                name=g.name,
                kind=g.kind,
                said=gate_said(g, landed),
                unreadable=" ".join(g.unreadable.split()),
                new=new[:GATE_NEW_LISTED],
                new_unlisted=max(0, len(new) - GATE_NEW_LISTED),
                base=g.base,
                landed=g.landed,
                removed=g.removed,
            )
        )
    return rows


def predicate_state(p: PredicateBlock) -> str:
    """``passed`` or ``not passed (...)``, with what it was judged on."""
    if p.evidence == "tests":
        said = p.verdict or (f"exit {p.exit_code}" if not p.met else "")
        state = f"passed ({said})" if p.met else f"not passed ({said})"
    else:
        state = "passed" if p.met else f"not passed (exit {p.exit_code})"
        state += ", from the exit code only"
    if p.stayed_skipped and "as on the base commit" not in p.verdict:
        state += "; " + "; ".join(p.stayed_skipped[:10])
        if len(p.stayed_skipped) > 10:
            state += f"; and {len(p.stayed_skipped) - 10} more reasons"
    elif p.allowed:  # a result written before skips were grouped
        state += "; allowed to stay skipped as on the base commit: " + ", ".join(p.allowed[:10])
    for note in p.at_start:
        state += f"; before the night: {note}"
    return state


#: How a task was verified, in words.
VIA_SAID = {
    "lap": "verified right after it ran",
    "resume": "found in flight by a resumed run and verified there, without running it again",
}


def alert_sentence(route: str, sent: list[dict[str, Any]]) -> str:
    """What became of the alert this ending calls for, in one sentence without a label (the
    renderings put theirs before it: ``Alert:``, a definition list's ``alert``)."""
    if not sent:
        if route == "none":
            return "none (this ending calls for no alert)."
        return f'this ending calls for the "{route}" route; nothing was sent.'
    said = []
    for a in sent:
        how = f" ({a['via']})" if a.get("via") else ""
        verb = "was sent" if a.get("ok") else "failed"
        detail = str(a.get("detail") or "")
        tail = f": {detail}" if detail and detail != "sent" else ""
        said.append(f'the "{a.get("action", route)}" route{how} {verb}{tail}')
    return f"{'; '.join(said)}."


def fmt_share(fraction: float) -> str:
    return f"{100 * fraction:.0f}%"


def as_text(value: Any) -> str:
    """A value from the run as text: a string as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


#: Characters of a parked task's detail shown beside its reason (the page shows it whole).
SAID_SHOWN = 300


# -- the view model ----------------------------------------------------------------------------


def report_facts(r: TerminalResult, extras: ReportExtras | None = None) -> ReportFacts:
    """Every fact of the report; ``extras`` adds the lessons and places the notice band."""
    extras = extras or ReportExtras()
    return ReportFacts(
        headline=_headline(r),
        goal=_goal(r),
        summary=SummaryFacts(
            source=r.wrapup.source,
            written_by="written by the model"
            if r.wrapup.source == "model"
            else "rendered from state",
            text=r.partial_output,
            error=r.wrapup.error or None,
        ),
        budgets=[
            _budget("cost_usd", "money", r.budgets.cost_usd, extras.fractions),
            _budget("tokens", "tokens", r.budgets.tokens, extras.fractions),
            _budget("steps", "steps", r.budgets.steps, extras.fractions),
            _budget("seconds", "seconds", r.budgets.seconds, extras.fractions),
            *(
                [_budget("fleet_money", "fleet money", r.budgets.fleet_money, extras.fractions)]
                if r.budgets.fleet_money is not None
                else []
            ),
        ],
        spend=_spend(r, extras.fractions),
        tasks=_tasks(r),
        effects=[_effect(fx) for fx in r.effects],
        drift=DriftFacts(
            rule=f"Above {DRIFT_PRUNE_ABOVE:g} the off-goal tasks are pruned; above "
            f"{DRIFT_HALT_ABOVE:g} the run halts (DRIFT_DETECTED).",
            prune_above=DRIFT_PRUNE_ABOVE,
            halt_above=DRIFT_HALT_ABOVE,
            checks=[
                DriftRow(
                    after_tasks=d.at_task_count,
                    at=fmt_seconds(d.seconds),
                    score=f"{d.score:.2f}",
                    action=d.action,
                    off_goal=", ".join(d.off_goal_task_ids),
                    value=d.score,
                    automation_shown="; ".join(d.automation_shown),
                )
                for d in r.drift
            ],
        ),
        lessons=list(extras.lessons),
        work=_work(r),
        record=RunRecord(
            trace_ref=r.trace_ref,
            started_at=r.started_at,
            ended_at=r.ended_at,
            resumes=r.resumes,
            trace_gap=(
                f"{r.trace_lines_dropped} trace line(s) could not be written; the trace is "
                "incomplete."
                if r.trace_lines_dropped
                else None
            ),
            schema=f"{r.kind} v{r.schema_version}",
        ),
    )


def _headline(r: TerminalResult) -> Headline:
    return Headline(
        run_id=r.run_id,
        ending=r.ending,
        stop_reason=r.stop_reason,
        status=r.status,
        exit_code=r.exit_code,
        resumable=r.resumable,
        why=sentence(r.message),
        alert=r.alert,
        alert_said=alert_sentence(r.alert, r.alerts),
        alerts_sent=[[Pair(str(k), as_text(v)) for k, v in sent.items()] for sent in r.alerts],
        banner=sandbox_banner(r),
        automation=automation_landed(r),
        automation_said=AUTOMATION_LANDED if automation_landed(r) else "",
        gates=gate_rows(r),
        gates_said=GATES_SAID if r.gates else "",
    )


def _goal(r: TerminalResult) -> GoalFacts:
    p = r.predicate
    predicate = (
        None
        if p is None
        else PredicateFacts(
            command=p.command,
            state=predicate_state(p),
            output=p.detail if p.detail.strip() else "",
        )
    )
    return GoalFacts(text=r.goal.text, sha256=r.goal.sha256[:16], predicate=predicate)


def _budget(key: str, name: str, b: BudgetBlock, fractions: BudgetFractions) -> BudgetRow:
    limit = b.limit
    gauge = limit if limit is not None and limit > 0 else None  # shares are taken of it
    # The figure the stop was decided on; the closing summary is paid on top of it.
    used = b.at_stop if b.at_stop is not None else b.used

    def mark(kind: MarkKind, value: float | None) -> BudgetMark | None:
        if value is None:
            return None
        share = None if gauge is None else fmt_share(value / gauge)
        return BudgetMark(kind, fmt_amount(key, value), share, float(value))

    notice = gauge * fractions.notice_at if key == "cost_usd" and gauge is not None else None
    marks = (
        mark("notice", notice),
        mark("stop", b.stop_at),
        mark("enforced", b.enforced_at),
        mark("refused", b.refused_at),
    )
    state: Literal["ok", "near", "over"] = "ok"
    if (b.stop_at is not None and used >= b.stop_at) or b.refused_at is not None:
        state = "over"
    elif notice is not None and used >= notice:
        state = "near"
    return BudgetRow(
        key=key,
        name=name,
        used=fmt_amount(key, used),
        limit=None if limit is None else fmt_amount(key, limit),
        share=None if gauge is None else fmt_share(used / gauge),
        no_model=key == "cost_usd" and limit is not None and gauge is None,
        state=state,
        used_value=float(used),
        limit_value=None if limit is None else float(limit),
        marks=[m for m in marks if m is not None],
    )


def without_model(r: TerminalResult) -> bool:
    """A night that had no money to spend: no money limit and no model call."""
    limit = r.budgets.cost_usd.limit
    return (limit is None or limit <= 0) and r.spend.model_calls == 0 and r.spend.total_usd == 0


def spent_sentence(r: TerminalResult) -> str:
    """The night's one total, with the closing summary's share of it named."""
    if without_model(r):
        return "none (a night without a model spends no money)"
    total, wrapup = r.spend.total_usd, r.wrapup.cost_usd
    before = max(0.0, total - wrapup)
    # One precision for the three figures, so that they visibly add up.
    fine = any(fmt_usd(v) != f"${v:,.2f}" for v in (total, wrapup, before))

    def usd(value: float) -> str:
        return f"${value:,.4f}" if fine else fmt_usd(value)

    text = f"{usd(total)} in total in {r.spend.model_calls} model call(s)"
    if r.wrapup.source == "model":  # a summary the model wrote, whatever it cost ($0 too)
        text += f", the closing summary's {usd(wrapup)} included (before it: {usd(before)})"
    elif wrapup > 0:
        text += f", a closing summary call that failed included ({usd(wrapup)})"
    else:
        text += ", no closing summary call among them"
    return text


def _spend(r: TerminalResult, fractions: BudgetFractions) -> SpendFacts:
    s = r.spend
    cpv = s.cost_per_verified_task
    return SpendFacts(
        total=fmt_usd(s.total_usd),
        model_calls=s.model_calls,
        wrapup=fmt_usd(r.wrapup.cost_usd),
        per_verified_task="n/a (nothing verified)" if cpv is None else fmt_usd(cpv),
        said=spent_sentence(r),
        no_model=without_model(r),
        by_purpose=[
            Pair(k, fmt_usd(v)) for k, v in sorted(s.by_purpose.items(), key=lambda kv: -kv[1])
        ],
        lines=[
            MoneyLineFacts(
                name=line.name,
                amount=fmt_usd(line.usd),
                share=fmt_share(line.fraction),
                reached="not reached"
                if line.reached_at is None
                else f"reached at {fmt_seconds(line.reached_at)}",
                fraction=line.fraction,
                usd=line.usd,
            )
            for line in money_lines(r, fractions)
        ],
        curve=[
            CurvePoint(fmt_seconds(p.seconds), fmt_usd(p.cost_usd), p.seconds, p.cost_usd)
            for p in s.curve
        ],
        limit=r.budgets.cost_usd.limit,
        warnings=[_billing_warning(w) for w in r.warnings],
    )


def _billing_warning(w: ResultWarning) -> BillingWarning:
    call = w.purpose or "a call"
    if w.attempt is not None:
        call += f" attempt {w.attempt}"
    # One line: an error text carried into a message (a provider's body) cannot add
    # headings or rows to the report.
    return BillingWarning(kind=w.kind, call=call, message=" ".join(w.message.split()))


def left_out(excluded: list[str], dropped: list[str]) -> str:
    """What a candidate left out, in one line: nothing disappears silently."""
    parts = []
    if excluded:
        parts.append("excluded " + ", ".join(excluded))
    if dropped:
        parts.append("dropped " + ", ".join(dropped) + " (tracked; the base version stays)")
    return "; ".join(parts)


def _tasks(r: TerminalResult) -> TaskFacts:
    parked = []
    for p in r.plan.parked:
        said = " ".join(clip(p.detail, SAID_SHOWN).split())
        parked.append(
            ParkedRow(
                id=p.id,
                title=p.title,
                reason=p.reason,
                verifier_said=said,
                verifier_output=p.detail if said else "",
                patch=p.patch or None,
                protected_changes=list(p.protected_changes),
                left_out=left_out(p.excluded, p.dropped),
                automation_changes=list(p.automation_changes),
            )
        )
    return TaskFacts(
        verified=[
            VerifiedRow(
                id=v.id,
                title=v.title,
                commit=v.commit or "",
                short_commit=(v.commit or "-")[:12],
                attempts=v.attempts,
                via=v.via,
                via_said=VIA_SAID[v.via],
                note=command_note(v),
                left_out=left_out(v.excluded, v.dropped),
            )
            for v in r.verified
        ],
        parked=parked,
        pruned=[
            PrunedRow(p.id, p.title, f"{p.drift_score:.2f}", p.at_task_count) for p in r.plan.pruned
        ],
        in_flight=r.plan.in_progress or None,
        not_started=list(r.plan.remaining),
    )


def _effect(fx: dict[str, Any]) -> EffectRow:
    answer, error = fx.get("detail"), fx.get("error")
    return EffectRow(
        state=str(fx.get("state")),
        tool=str(fx.get("tool")),
        task=str(fx.get("task")),
        key=str(fx.get("key")),
        args=as_text(fx.get("args")),
        answer=None if answer is None else as_text(answer),
        error=str(error) if error else None,
    )


def _work(r: TerminalResult) -> WorkFacts:
    b = r.branch
    return WorkFacts(
        branch=b.name,
        base_commit=b.base_commit[:12],
        head=b.head[:12] if b.head else None,
        worktree=b.worktree,
        worktree_kept="kept for a resume"
        if r.resumable or any(p.held_for for p in r.plan.parked)
        else "removed when the night ended, as it cannot be resumed; the branch stays",
        diff_stat=b.diff_stat.rstrip() if b.diff_stat.strip() else "",
        sandbox=sandbox_line(r),
        executor=executor_lines(r),
    )
