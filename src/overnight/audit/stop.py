"""The stop reason and the budgets, recomputed from the raw files with the harness's own pure
rules (``overnight.core.endings.should_stop`` on ``StopFacts``, the lines of
``overnight.core.budget.reading``), and the records the stop check reads (the predicate, the
drift history, the queue and the plan) compared with what ``result.json`` reports of them.

What a run's state cannot hold is read from the trace of its last process: a refused call
(the ledger's ``refused_at``), the moment of the stop (the seconds used), and the two causes
that come from outside the state, a signal (``TIME_LIMIT:sigterm``) and an exception
(``UNRECOVERABLE_ERROR:<cause>``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from overnight.audit.findings import AuditCheck, check
from overnight.audit.inputs import RunFiles
from overnight.audit.money import Repriced, micro, usd
from overnight.core.budget import (
    MONEY,
    SECONDS,
    STEPS,
    TOKENS,
    BudgetReading,
    reading,
    to_nanos,
    to_usd,
)
from overnight.core.drift import DriftVerdict, drift_gate
from overnight.core.endings import (
    Ending,
    Stop,
    StopFacts,
    agrees_with_budgets,
    describe,
    should_stop,
)
from overnight.store.result import BudgetBlock

#: Seconds within which the trace's clock (milliseconds) and the result's agree.
SECONDS_SLACK = 0.05
#: A refused amount is traced to the cent ("would reach $4.61 of $4.60").
CENT = 0.005

SIGNAL_DETAILS = ("sigterm", "sigint")
_WOULD_REACH = re.compile(r"would reach \$?([0-9][0-9,]*(?:\.[0-9]+)?)")


def final_process(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace lines of the process that wrote the result (from its ``resumed`` line)."""
    start = 0
    for at, event in enumerate(trace):
        if event.get("kind") == "decision" and event.get("decision") == "resumed":
            start = at
    return trace[start:]


def _decisions(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("kind") == "decision" and e.get("decision") == name]


@dataclass
class TraceFacts:
    stop_reason: str | None = None
    """The reason the last stop decision traced."""
    stop_seconds: float | None = None
    refused: dict[str, float] = field(default_factory=dict)
    """What the last refused call of each budget would have reached (before the stop)."""
    exception: str | None = None
    """The classification of the last exception that ended a lap, if one did."""


def trace_facts(trace: list[dict[str, Any]]) -> TraceFacts:
    events = final_process(trace)
    facts = TraceFacts()
    stops = _decisions(events, "stop")
    before = events
    if stops:
        last = stops[-1]
        facts.stop_reason = str(last.get("reason"))
        t = last.get("t")
        facts.stop_seconds = float(t) if isinstance(t, int | float) else None
        before = events[: events.index(last)]
    for refusal in _decisions(before, "call_refused"):
        if refusal.get("purpose") == "summarize":
            continue  # the closing summary's own line, not a budget's
        found = _WOULD_REACH.search(str(refusal.get("detail", "")))
        if found is not None:
            facts.refused[str(refusal.get("budget"))] = float(found.group(1).replace(",", ""))
    for exc in _decisions(before, "exception"):
        if exc.get("classified") not in (None, "soft"):
            facts.exception = str(exc.get("classified"))
    return facts


def _to_the_cent(traced: float, claimed: float) -> float:
    """The claimed amount when the trace, which says it to the cent, agrees with it."""
    return claimed if abs(claimed - traced) <= CENT else traced


@dataclass(frozen=True)
class Recount:
    """The budgets as the audit recomputes them."""

    at_stop: dict[str, BudgetReading]
    used: dict[str, float]
    seconds_source: str


def recount(files: RunFiles, money: Repriced, tf: TraceFacts) -> Recount:
    b, f = files.spec.budget, files.spec.budget.fractions()
    s = files.state
    claimed = files.result.budgets.seconds
    if tf.stop_seconds is not None:
        seconds = tf.stop_seconds
        source = "the trace's stop decision"
        given = claimed.at_stop if claimed.at_stop is not None else claimed.used
        if abs(float(given) - seconds) <= SECONDS_SLACK:
            seconds = float(given)  # the same moment, to the microsecond rather than the ms
    else:
        seconds, source = s.seconds_used, "the checkpoint (the trace has no stop decision)"
    money_refused = tf.refused.get("money")
    tokens_refused = tf.refused.get("tokens")
    claimed_money = files.result.budgets.cost_usd.refused_at
    if money_refused is not None and claimed_money is not None:
        money_refused = _to_the_cent(money_refused, float(claimed_money))
    at_stop = {
        MONEY: reading(MONEY, to_usd(money.at_stop_nanos), b.usd, f, money_refused),
        TOKENS: reading(TOKENS, money.at_stop_tokens, b.tokens, f, tokens_refused),
        STEPS: reading(STEPS, s.steps_used, b.steps, f),
        SECONDS: reading(SECONDS, seconds, b.hours * 3600.0, f),
    }
    used = {
        MONEY: to_usd(max(money.total_nanos, money.at_stop_nanos)),
        TOKENS: float(max(money.tokens, money.at_stop_tokens)),
        STEPS: float(s.steps_used),
        SECONDS: max(s.seconds_used, seconds),
    }
    return Recount(at_stop, used, source)


def _same(name: str, ours: float | None, theirs: float | None, slack: float = 0.0) -> bool:
    if ours is None or theirs is None:
        return ours is None and theirs is None
    if name == MONEY:
        return micro(to_nanos(ours)) == micro(to_nanos(theirs))
    return abs(float(ours) - float(theirs)) <= slack


def _show(name: str, value: float | None) -> str:
    if value is None:
        return "none"
    if name == MONEY:
        return usd(to_nanos(value))
    if name == SECONDS:
        return f"{value:.3f} s"
    return f"{value:,.0f}"


def budget_check(
    name: str, ours: BudgetReading, used: float, block: BudgetBlock, checkpoint_seconds: float
) -> AuditCheck:
    claimed_at_stop = block.at_stop if block.at_stop is not None else block.used
    slack = SECONDS_SLACK if name == SECONDS else 0.0
    refused_slack = CENT if name == MONEY else 0.0
    fields: list[tuple[str, float | None, float | None, float]] = [
        ("at_stop", ours.used, claimed_at_stop, slack),
        ("limit", ours.limit, block.limit, 0.0),
        ("stop_at", ours.stop_at, block.stop_at, 0.0),
        ("enforced_at", ours.enforced_at, block.enforced_at, 0.0),
        ("refused_at", ours.refused_at, block.refused_at, refused_slack),
    ]
    differ = [
        f"{field} {_show(name, theirs)} (recomputed {_show(name, mine)})"
        for field, mine, theirs, tolerance in fields
        if not _same(name, mine, theirs, tolerance)
    ]
    if name == SECONDS:
        # `used` is read when the result is built, after the stop and before the final save.
        low, high = ours.used - SECONDS_SLACK, max(checkpoint_seconds, ours.used) + SECONDS_SLACK
        if not low <= float(block.used) <= high:
            differ.append(f"used {_show(name, block.used)} (recomputed {low:.3f}..{high:.3f} s)")
    elif not _same(name, used, block.used):
        differ.append(f"used {_show(name, block.used)} (recomputed {_show(name, used)})")
    state = "exhausted" if ours.exhausted else "not exhausted"
    limit = ", no limit"
    if ours.limit is not None:
        limit = f" of {_show(name, ours.limit)}, stop at {_show(name, ours.stop_at)}"
    if ours.refused_at is not None:
        limit += f", a call refused at {_show(name, ours.refused_at)}"
    detail = f"used {_show(name, used)}, at the stop {_show(name, ours.used)}{limit}: {state}"
    if differ:
        detail += "; result.json says " + ", ".join(differ)
    return check(f"budgets.{name}", "stop", not differ, detail)


def budget_checks(files: RunFiles, counted: Recount) -> list[AuditCheck]:
    blocks = files.result.budgets
    claimed = {
        MONEY: blocks.cost_usd,
        TOKENS: blocks.tokens,
        STEPS: blocks.steps,
        SECONDS: blocks.seconds,
    }
    # The final save, after the result, bounds its seconds; a run whose final save failed
    # (the trace says so) left an earlier one, which bounds nothing.
    saved = files.state.seconds_used if files.state.stopped_reason else float("inf")
    return [
        budget_check(name, counted.at_stop[name], counted.used[name], claimed[name], saved)
        for name in (MONEY, TOKENS, STEPS, SECONDS)
    ]


def _stop_of(reason: str) -> Stop | None:
    ending, _, detail = reason.partition(":")
    try:
        return Stop(Ending(ending), detail)
    except ValueError:
        return None


def recompute_stop(files: RunFiles, counted: Recount, tf: TraceFacts) -> tuple[Stop | None, str]:
    """The stop check on the raw facts, and the facts it read, in words."""
    s = files.state
    drift = s.drift_history[-1].score if s.drift_history else 0.0
    outside = _stop_of(tf.stop_reason) if tf.stop_reason else None
    fatal = (
        outside if outside is not None and outside.ending is Ending.UNRECOVERABLE_ERROR else None
    )
    signal = None
    if outside is not None and outside.ending is Ending.TIME_LIMIT:
        signal = outside.detail if outside.detail in SIGNAL_DETAILS else None
    facts = StopFacts(
        goal_met=s.goal_met,
        budgets=counted.at_stop,
        drift_score=drift,
        no_progress_streak=s.no_progress_streak,
        no_progress_limit=files.spec.run.no_progress_after,
        queue_length=len(s.queue),
        interrupted_by=signal,
        fatal=fatal,
    )
    exhausted = [n for n, r in counted.at_stop.items() if r.exhausted] or ["none"]
    words = (
        f"goal {'met' if s.goal_met else 'unmet'} (predicate record), budgets exhausted: "
        f"{', '.join(exhausted)}, drift {drift:.2f}, no-progress streak "
        f"{s.no_progress_streak}/{files.spec.run.no_progress_after}, queue {len(s.queue)}"
    )
    if signal is not None:
        words += f", signal {signal} (trace)"
    if fatal is not None:
        backed = "backed by" if tf.exception == fatal.reason else "no"
        words += f", {fatal.reason} (trace; {backed} exception line)"
    return should_stop(facts), words


def stop_checks(
    files: RunFiles, counted: Recount, tf: TraceFacts
) -> tuple[list[AuditCheck], str | None]:
    """``stop_reason`` and ``verdict``; returns the recomputed reason too."""
    r = files.result
    stop, words = recompute_stop(files, counted, tf)
    ours = stop.reason if stop is not None else None
    problems: list[str] = []
    if ours != r.stop_reason:
        problems.append(f"result.json says {r.stop_reason}")
    if files.state.stopped_reason not in (None, r.stop_reason):
        problems.append(f"the checkpoint recorded {files.state.stopped_reason}")
    if tf.stop_reason is not None and tf.stop_reason != r.stop_reason:
        problems.append(f"the trace's stop decision says {tf.stop_reason}")
    if not agrees_with_budgets(r.stop_reason, r.budgets.view()):
        problems.append("result.json's stop reason does not follow from its own budgets block")
    detail = f"recomputed {ours or 'no stop at all'} from {words}"
    checks = [check("stop_reason", "stop", not problems, "; ".join([detail, *problems]))]

    judged = stop or _stop_of(r.stop_reason)
    if judged is None:
        checks.append(check("verdict", "stop", False, f"{r.stop_reason!r} is not an ending"))
        return checks, ours
    v = describe(judged, held=any(p.held_for for p in r.plan.parked))
    pairs = [
        ("ending", v.stop.ending.value, r.ending),
        ("status", v.outcome.value, r.status),
        ("exit_code", v.exit_code, r.exit_code),
        ("resumable", v.resumable, r.resumable),
        ("alert", v.alert, r.alert),
    ]
    differ = [
        f"{k} {theirs!r} (the table: {mine!r})" for k, mine, theirs in pairs if mine != theirs
    ]
    detail = f"{judged.reason}: {v.outcome.value}, exit {v.exit_code}, resumable {v.resumable}"
    if differ:
        detail += "; result.json says " + ", ".join(differ)
    checks.append(check("verdict", "stop", not differ, detail))
    return checks, ours


def predicate_check(files: RunFiles) -> AuditCheck:
    s, claimed = files.state, files.result.predicate
    record = s.last_predicate
    problems: list[str] = []
    if record is None or claimed is None:
        if (record is None) != (claimed is None):
            problems.append(
                f"the checkpoint has {'no' if record is None else 'a'} predicate record, "
                f"result.json {'none' if claimed is None else 'one'}"
            )
        detail = "the predicate never ran"
    else:
        detail = (
            f"`{files.spec.predicate.command}` {'met' if record.met else 'not met'} "
            f"(exit {record.exit_code}{', timed out' if record.timed_out else ''}"
            f"{', not run' if not record.ran else ''})"
        )
        for name, mine, theirs in (
            ("met", record.met, claimed.met),
            ("exit_code", record.exit_code, claimed.exit_code),
            ("timed_out", record.timed_out, claimed.timed_out),
            ("ran", record.ran, claimed.ran),
            ("evidence", record.evidence, claimed.evidence),
            ("verdict", record.verdict, claimed.verdict),
            ("command", files.spec.predicate.command, claimed.command),
        ):
            if mine != theirs:
                problems.append(f"result.json says {name} {theirs!r}")
    if record is not None and record.met != s.goal_met:
        problems.append("the checkpoint's goal flag disagrees with its predicate record")
    return check("predicate", "stop", not problems, "; ".join([detail, *problems]))


def drift_check(files: RunFiles) -> AuditCheck:
    history, claimed = files.state.drift_history, files.result.drift
    problems: list[str] = []
    for d in history:
        gate = drift_gate([], DriftVerdict(reasoning="", off_goal_task_ids=[], drift_score=d.score))
        if gate.action != d.action:
            problems.append(
                f"score {d.score} at task {d.at_task_count} means {gate.action}, not {d.action}"
            )
    ours = [(d.at_task_count, d.score, d.action, list(d.off_goal_task_ids)) for d in history]
    theirs = [(d.at_task_count, d.score, d.action, list(d.off_goal_task_ids)) for d in claimed]
    if ours != theirs:
        problems.append(f"result.json reports {theirs}, the checkpoint {ours}")
    last = history[-1].score if history else 0.0
    if files.state.drift_score != last:
        problems.append(
            f"the checkpoint's drift score {files.state.drift_score} is not its last verdict's"
        )
    scores = ", ".join(f"{d.score:g} ({d.action})" for d in history) or "no drift check"
    return check("drift", "stop", not problems, "; ".join([scores, *problems]))


def plan_check(files: RunFiles) -> AuditCheck:
    s, plan = files.state, files.result.plan
    ours: dict[str, Any] = {
        "done": [c.task.id for c in s.completed],
        "remaining": [t.id for t in s.queue],
        "in_progress": s.in_progress.task.id if s.in_progress else None,
        "parked": [(p.task.id, p.reason) for p in s.parked],
        "pruned": [p.task.id for p in s.pruned],
    }
    theirs: dict[str, Any] = {
        "done": plan.done,
        "remaining": plan.remaining,
        "in_progress": plan.in_progress,
        "parked": [(p.id, p.reason) for p in plan.parked],
        "pruned": [p.id for p in plan.pruned],
    }
    differ = [f"{k} {theirs[k]} (checkpoint: {ours[k]})" for k in ours if ours[k] != theirs[k]]
    detail = (
        f"{len(ours['done'])} done, {len(ours['remaining'])} remaining, "
        f"{len(ours['parked'])} parked, {len(ours['pruned'])} pruned"
        + (f", {ours['in_progress']} in flight" if ours["in_progress"] else "")
    )
    if differ:
        detail += "; result.json says " + "; ".join(differ)
    return check("plan", "stop", not differ, detail)
