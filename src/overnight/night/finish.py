"""The end of a run: the closing summary (paid from the wrap-up reserve, with a structured
fallback), the terminal result built from a snapshot of the night's facts (``ClosingFacts``),
and ``result.json`` written even on a full disk.

Each budget block reports two figures: ``used``, everything used once the run is over (the
closing summary included), and ``at_stop``, what was used when the stop was decided, which is
the figure the stop reason is recomputed from. The lines and ``refused_at`` are those of the
stop decision."""

from __future__ import annotations

from dataclasses import dataclass, field
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from overnight.config.alerts import AlertsSpec
from overnight.config.sandbox import SandboxSpec
from overnight.config.spec import ModelSpec
from overnight.core.budget import (
    FLEET_MONEY,
    MONEY,
    SECONDS,
    STEPS,
    TOKENS,
    BudgetReading,
    Ledger,
    clean_amount,
    to_nanos,
    to_usd,
)
from overnight.core.endings import Ending, Stop, describe
from overnight.core.errors import CheckpointCorrupt, DiskFull
from overnight.core.goal import Goal
from overnight.core.state import RunState
from overnight.core.tasks import ParkedTask
from overnight.core.text import clip
from overnight.messages.types import estimate_input_tokens
from overnight.models.gateway import EventSink, ModelGateway
from overnight.night.alerts import send_alert
from overnight.night.harness_requests import summary_request
from overnight.sandbox.identity import Identity
from overnight.secrecy import secret_values
from overnight.store.journal import read_intact_records, read_journal
from overnight.store.result import (
    Branch,
    BudgetBlock,
    Budgets,
    CliAttempt,
    DriftPoint,
    ExecutorBlock,
    GateBlock,
    GoalBlock,
    ParkedEntry,
    Plan,
    PredicateBlock,
    PrunedEntry,
    ResultWarning,
    SandboxBlock,
    Spend,
    SpendPoint,
    TerminalResult,
    VerifiedTask,
    Wrapup,
)
from overnight.store.rundir import RunDir, write_json_atomic
from overnight.store.spend import SpendTotals, spend_totals
from overnight.store.trace import redact

DEFAULT_MESSAGES: dict[Ending, str] = {
    Ending.GOAL_MET: "the goal predicate passed",
    Ending.BUDGET_EXHAUSTED: "a budget reached its line",
    Ending.TIME_LIMIT: "the wall clock ran out",
    Ending.DRIFT_DETECTED: "the queue drifted away from the goal",
    Ending.NO_PROGRESS: "recent tasks changed nothing verifiable",
    Ending.QUEUE_EMPTY_GOAL_UNMET: "the queue drained with the goal unmet",
    Ending.UNRECOVERABLE_ERROR: "an unrecoverable error",
}

MIN_SUMMARY_TOKENS = 256


@dataclass(frozen=True)
class ClosingFacts:
    """The night as it stands once the closing summary is paid for: what the terminal result
    is built from, read once."""

    predicate_command: str
    """``[predicate] command``, as the result reports it."""
    sandbox: SandboxSpec
    """The ``[sandbox]`` section: its mode, network and process limit, as the result reports
    them."""
    state: RunState
    goal: Goal
    budgets_at_stop: dict[str, BudgetReading]
    """The budgets as the stop decision read them."""
    budgets_end: dict[str, BudgetReading]
    spent_nanos: int
    tokens_used: int
    spend_path: Path
    head: str | None
    """The branch's head, None when git could not say."""
    diff_stat: str
    worktree: Path
    trace_ref: Path
    started_at: str
    ended_at: str
    trace_lines_dropped: int
    effects: list[dict[str, Any]]
    sandbox_identity: Identity | None = None
    """Who sandboxed commands ran as; None: the night had no sandbox."""
    commit_sizes: dict[str, CommitSize] = field(default_factory=dict)
    """Each landed commit's size and dependency changes, by its hash."""
    gates: list[GateBlock] = field(default_factory=list)
    """Per gate, its findings on the base commit and on what landed."""


@dataclass(frozen=True)
class CommitSize:
    """What one landed commit changes: files, lines (added plus deleted), and one sentence
    per dependency manifest or lockfile whose change changes the dependencies."""

    files: int
    lines: int
    dependencies: list[str]


def _block(name: str, at_stop: BudgetReading, used: float) -> BudgetBlock:
    """A budget's block: ``used`` at the end, everything else as the stop decision read it."""
    return BudgetBlock(
        used=clean_amount(name, max(used, at_stop.used)),
        limit=at_stop.limit,
        stop_at=at_stop.stop_at,
        enforced_at=at_stop.enforced_at,
        refused_at=at_stop.refused_at,
        at_stop=at_stop.used,
    )


def _warnings(found: list[dict[str, Any]]) -> list[ResultWarning]:
    """The journal's money warnings as the result reports them (a record this version cannot
    read is left out rather than let it stop the result from being written)."""
    keys = ResultWarning.model_fields.keys()
    out: list[ResultWarning] = []
    for w in found:
        try:
            out.append(ResultWarning.model_validate({k: v for k, v in w.items() if k in keys}))
        except ValidationError:
            continue
    return out


#: Characters of a parked task's detail and of the goal check's output kept in the result.
DETAIL_KEPT = 1500


def detail_pointer(task_id: str, p: ParkedTask, artifacts: Path, attempt: int = 0) -> str:
    """Where the whole of a parked task's detail is: the path of its last verify's log."""
    if p.protected_changes:
        return "every path: protected_changes"
    if p.automation_changes:
        return "every path: automation_changes"
    escaped = glob_escape(task_id)
    logs = list(artifacts.glob(f"{escaped}.{attempt}.verify*.log"))
    logs = logs or list(artifacts.glob(f"{escaped}.*.verify*.log"))
    if not logs:
        return "the whole output: the run's artifacts"
    return f"the whole output: {max(logs, key=lambda log: log.stat().st_mtime)}"


def structured_summary(state: RunState, stop: Stop, spent_usd: float, cap_usd: float) -> str:
    """The summary rendered from state alone: less readable, every fact that matters."""
    s = state
    lines = [f"Run {s.run_id} stopped: {stop.reason}. {stop.message}".strip()]
    if s.completed:
        done = ", ".join(f"{c.task.id} ({(c.commit or 'no commit')[:10]})" for c in s.completed)
        lines.append(f"Verified and committed: {done}.")
    else:
        lines.append("No task was verified.")
    if s.parked:
        lines.append("Parked: " + "; ".join(f"{p.task.id}: {p.reason}" for p in s.parked) + ".")
    if s.in_progress is not None:
        lines.append(f"Left in flight (resume verifies it): {s.in_progress.task.id}.")
    if s.queue:
        lines.append("Not started: " + ", ".join(t.id for t in s.queue) + ".")
    if s.pruned:
        lines.append("Pruned for drift: " + ", ".join(p.task.id for p in s.pruned) + ".")
    money = (
        f"Spent ${spent_usd:.4f} of ${cap_usd:.2f} when this summary was written"
        if cap_usd > 0 or spent_usd > 0
        else "No model, no money spent"
    )
    lines.append(f"{money}; goal predicate {'passed' if s.goal_met else 'not passed'}.")
    return "\n".join(lines)


def _summary_facts(
    state: RunState, goal: Goal, stop: Stop, spent_usd: float, cap_usd: float
) -> dict[str, Any]:
    s = state
    return {
        "goal": goal.text,
        "stop_reason": stop.reason,
        "why": stop.message,
        "verified": [{"id": c.task.id, "title": c.task.title} for c in s.completed],
        "parked": [{"id": p.task.id, "reason": p.reason} for p in s.parked],
        "in_flight": s.in_progress.task.id if s.in_progress else None,
        "not_started": [t.id for t in s.queue],
        "pruned": [p.task.id for p in s.pruned],
        "spent_usd": round(spent_usd, 4),
        "cap_usd": cap_usd,
    }


def closing_summary(
    gateway: ModelGateway | None,
    ledger: Ledger,
    model: ModelSpec | None,
    cap: float,
    state: RunState,
    goal: Goal,
    stop: Stop,
) -> tuple[str, Wrapup]:
    """One call with no tools, from the reserve, to ``model`` (None: none is made); on any
    failure, the structured rendering. ``cap``: the money cap (``[budget] usd``) it names."""
    before = ledger.spent_nanos

    def structured() -> str:
        return structured_summary(state, stop, ledger.spent_usd, cap)

    if gateway is None or model is None:
        return structured(), Wrapup(source="structured", cost_usd=0.0)
    try:
        facts = _summary_facts(state, goal, stop, ledger.spent_usd, cap)
        request = summary_request(model.name, model.summary_max_tokens, facts)
        # Fit max_tokens to what the reserve can pay for, rather than be refused outright.
        affordable = ledger.max_output_tokens(
            model.name, estimate_input_tokens(request), request.cache_ttl, line="reserve"
        )
        if affordable < request.max_tokens:
            request = request.model_copy(update={"max_tokens": max(MIN_SUMMARY_TOKENS, affordable)})
        response = gateway.call(request, line="reserve")
        text = response.text().strip()
        if not text:
            raise ValueError("the summary call returned no text")
        cost = to_usd(ledger.spent_nanos - before)
        return text, Wrapup(source="model", cost_usd=cost)
    except Exception as exc:
        cost = to_usd(ledger.spent_nanos - before)
        return structured(), Wrapup(source="structured", cost_usd=cost, error=repr(exc)[:500])


def _size_fields(size: CommitSize | None) -> dict[str, Any]:
    if size is None:
        return {}
    return {
        "files_changed": size.files,
        "lines_changed": size.lines,
        "dependency_changes": size.dependencies,
    }


def build_result(f: ClosingFacts, stop: Stop, partial: str, wrapup: Wrapup) -> TerminalResult:
    s = f.state
    verdict = describe(stop, held=any(p.held_for for p in s.parked))
    end = f.budgets_end
    b = f.budgets_at_stop
    try:
        totals = spend_totals(read_journal(f.spend_path))
    except CheckpointCorrupt:
        totals = SpendTotals(nanos=f.spent_nanos, tokens=f.tokens_used)
    # The ledger starts from the checkpoint's figure when the journal says less.
    total_usd = to_usd(max(totals.total_nanos, f.spent_nanos))
    verified = [
        VerifiedTask(
            id=c.task.id,
            title=c.task.title,
            commit=c.commit,
            attempts=c.attempts,
            via=c.via,
            command_exit_code=c.command.exit_code if c.command else None,
            command_timed_out=bool(c.command and c.command.timed_out),
            evidence=c.evidence,
            touches_runner=c.touches_runner,
            automation=c.automation,
            excluded=c.excluded,
            dropped=c.dropped,
            **_size_fields(f.commit_sizes.get(c.commit or "")),
        )
        for c in s.completed
    ]
    return TerminalResult(
        run_id=s.run_id,
        status=verdict.outcome.value,
        stop_reason=stop.reason,
        ending=stop.ending.value,
        exit_code=verdict.exit_code,
        resumable=verdict.resumable,
        alert=verdict.alert,
        message=stop.message or DEFAULT_MESSAGES[stop.ending],
        goal=GoalBlock(text=f.goal.text, sha256=f.goal.sha256),
        budgets=Budgets(
            steps=_block(STEPS, b[STEPS], end[STEPS].used),
            tokens=_block(TOKENS, b[TOKENS], end[TOKENS].used),
            seconds=_block(SECONDS, b[SECONDS], end[SECONDS].used),
            cost_usd=_block(MONEY, b[MONEY], total_usd),
            fleet_money=(
                _block(FLEET_MONEY, b[FLEET_MONEY], end[FLEET_MONEY].used)
                if FLEET_MONEY in b
                else None
            ),
        ),
        plan=Plan(
            done=[c.task.id for c in s.completed],
            remaining=[t.id for t in s.queue],
            in_progress=s.in_progress.task.id if s.in_progress else None,
            parked=[
                ParkedEntry(
                    id=p.task.id,
                    title=p.task.title,
                    reason=p.reason,
                    detail=clip(
                        p.detail,
                        DETAIL_KEPT,
                        more=detail_pointer(
                            p.task.id,
                            p,
                            f.spend_path.parent / "artifacts",
                            s.attempts.get(p.task.id, 0),
                        ),
                    ),
                    patch=p.patch,
                    protected_changes=p.protected_changes,
                    automation_changes=p.automation_changes,
                    held_for=p.held_for,
                    excluded=p.excluded,
                    dropped=p.dropped,
                )
                for p in s.parked
            ],
            pruned=[
                PrunedEntry(
                    id=p.task.id,
                    title=p.task.title,
                    drift_score=p.drift_score,
                    at_task_count=p.at_task_count,
                )
                for p in s.pruned
            ],
        ),
        verified=verified,
        drift=[
            DriftPoint(
                at_task_count=d.at_task_count,
                seconds=d.seconds,
                score=d.score,
                action=d.action,
                off_goal_task_ids=d.off_goal_task_ids,
                automation_shown=d.automation_shown,
            )
            for d in s.drift_history
        ],
        spend=Spend(
            total_usd=total_usd,
            by_purpose=totals.by_purpose,
            curve=[SpendPoint(seconds=round(t, 3), cost_usd=u) for t, u in totals.curve],
            cost_per_verified_task=(
                to_usd(to_nanos(total_usd) // len(verified)) if verified else None
            ),
            model_calls=totals.calls,
        ),
        warnings=_warnings(totals.warnings),
        predicate=(
            PredicateBlock(
                command=f.predicate_command,
                met=s.last_predicate.met,
                exit_code=s.last_predicate.exit_code,
                detail=clip(s.last_predicate.detail, DETAIL_KEPT, more="the whole output: trace"),
                timed_out=s.last_predicate.timed_out,
                ran=s.last_predicate.ran,
                evidence=s.last_predicate.evidence,
                verdict=s.last_predicate.verdict,
                allowed=s.last_predicate.allowed,
                stayed_skipped=s.last_predicate.stayed_skipped,
                at_start=s.start_notes,
            )
            if s.last_predicate
            else None
        ),
        branch=Branch(
            name=s.branch,
            base_commit=s.base_commit,
            head=f.head,
            worktree=str(f.worktree),
            diff_stat=f.diff_stat,
        ),
        partial_output=partial,
        wrapup=wrapup,
        trace_ref=str(f.trace_ref),
        started_at=f.started_at,
        ended_at=f.ended_at,
        resumes=s.resumes,
        trace_lines_dropped=f.trace_lines_dropped,
        effects=f.effects,
        gates=list(f.gates),
        sandbox=SandboxBlock(
            mode=f.sandbox.mode,
            network=f.sandbox.network,
            sandboxed_commands=s.sandboxed_commands,
            unsandboxed_commands=s.unsandboxed_commands,
            uid=None if f.sandbox_identity is None else f.sandbox_identity.uid,
            ran_as_root=f.sandbox_identity is not None and f.sandbox_identity.as_root,
            root_reason="" if f.sandbox_identity is None else f.sandbox_identity.note,
            process_limit=(
                ""
                if f.sandbox_identity is None
                else f.sandbox_identity.process_limit(f.sandbox.processes)
            ),
        ),
        executor=cli_account(f.trace_ref),
    )


def cli_account(trace: Path) -> ExecutorBlock | None:
    """The CLI agent's attempts, read from its ``cli_event`` records in the trace (every
    process of the run); None when no CLI ran."""
    started: dict[str, Any] | None = None
    attempts: list[CliAttempt] = []
    for e in read_intact_records(trace):
        if e.get("kind") != "cli_event":
            continue
        if e.get("event") == "start" and started is None:
            started = e
        elif e.get("event") == "end":
            own = e.get("cli_reported_cost_usd")
            said = e.get("cli_success")
            attempts.append(
                CliAttempt(
                    task=str(e.get("task", "")),
                    status=str(e.get("status", "")),
                    calls=int(e.get("calls") or 0),
                    booked_usd=float(e.get("harness_usd") or 0.0),
                    cli_success=said if isinstance(said, bool) else None,
                    cli_reported_usd=float(own) if isinstance(own, int | float) else None,
                    log=str(e.get("log", "")),
                )
            )
    if started is None:
        return None
    return ExecutorBlock(
        kind=str(started.get("cli", "")),
        program=str(started.get("program", "")),
        version=str(started.get("version", "")),
        attempts=attempts,
    )


def finish_result(f: ClosingFacts, stop: Stop, partial: str, wrapup: Wrapup) -> TerminalResult:
    """The terminal result, every secret value redacted."""
    result = build_result(f, stop, partial, wrapup)
    return TerminalResult.model_validate(redact(result.model_dump(), secret_values()))


def _write(run_dir: RunDir, result: TerminalResult) -> None:
    """Write result.json; on a full disk, free the space reserved at the start and retry."""
    data = result.model_dump(mode="json")
    try:
        write_json_atomic(run_dir.result, data)
    except DiskFull:
        if not run_dir.free_disk_reserve():
            raise
        write_json_atomic(run_dir.result, data)


def write_result(
    run_dir: RunDir, result: TerminalResult, alerts: AlertsSpec, trace: EventSink
) -> TerminalResult:
    """Write result.json, then send the alert its ending calls for and record what was sent
    in it (a failed alert changes nothing else). Returns the result as written."""
    _write(run_dir, result)
    sent = send_alert(alerts, result.model_dump(mode="json"))
    if sent is not None:
        result = result.model_copy(update={"alerts": [sent]})
        trace.event("decision", decision="alert", **sent)
        _write(run_dir, result)
    trace.event(
        "decision",
        decision="result_written",
        stop_reason=result.stop_reason,
        exit_code=result.exit_code,
    )
    return result
