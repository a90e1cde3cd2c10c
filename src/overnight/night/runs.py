"""Starting and resuming runs: the run directory, the worktree, the lock, the signals."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from overnight.clock import SystemClock
from overnight.config.price_record import price_record
from overnight.config.spec import Spec
from overnight.core.budget import loosened
from overnight.core.endings import REOPENED_BY_REVIEW, Ending, Stop
from overnight.core.errors import CheckpointCorrupt, ConfigError, GoalMutated
from overnight.core.goal import Goal
from overnight.core.state import RunState
from overnight.effects.ledger import UNSETTLED
from overnight.night import worktree as ws
from overnight.night.compose import FleetShared, NightParts, compose, open_effects
from overnight.night.night import Night, NightRules
from overnight.night.outputs import load_outputs, save_outputs
from overnight.night.resolve import (
    ResolvedNight,
    check_spec_telemetry,
    prepared,
    sandbox_policy,
)
from overnight.night.signals import Signals
from overnight.night.startcheck import StartCheck, check_predicate
from overnight.night.workload_record import record_run_workload
from overnight.sandbox.policy import SandboxPolicy
from overnight.seams import Clock, ModelClient, TaskExecutor
from overnight.store.atomic import open_private, private_dir
from overnight.store.index import register
from overnight.store.journal import read_journal
from overnight.store.result import TerminalResult
from overnight.store.run_state import RunStateStore, check_formats, load_run_state
from overnight.store.rundir import (
    DISK_RESERVE_BYTES,
    RunDir,
    RunLock,
    read_json,
    write_json_atomic,
)
from overnight.store.versions import WRITTEN_BY
from overnight.telemetry.setup import listening, open_spans

if TYPE_CHECKING:
    from overnight.telemetry.spans import NightSpans


def _create_run_dir(
    path: Path, spec: Spec, run_id: str, goal: Goal, branch: str, model_source: str = "spec"
) -> RunDir:
    """Create the run directory complete or not at all: built beside, then renamed."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ConfigError(
            "--run-dir",
            f"{path} already exists and is not empty",
            "choose a new directory, or continue that run with `overnight resume`",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    # Unique even for a second try in the same process (a fleet worker's retried activity).
    staging = path.parent / f".{path.name}.creating-{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir(mode=0o700)
    os.chmod(staging, 0o700)
    try:
        manifest: dict[str, Any] = {
            "kind": "overnight-run",
            "run_id": run_id,
            "goal_sha256": goal.sha256,
            "branch": branch,
            "workspace": str(spec.workspace_path()),
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "written_by": WRITTEN_BY,
            "prices": price_record(spec),  # what its spend is re-priced at by `audit`
            "provider": spec.model.provider if spec.model is not None else None,
            "model_source": model_source,  # what `overnight estimate` may learn from
        }
        write_json_atomic(staging / "spec.json", spec.model_dump(mode="json"))
        write_json_atomic(staging / "run.json", manifest)
        if path.exists():
            path.rmdir()
        os.replace(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    register(run_id, path, manifest["workspace"], manifest["created_at"])
    return RunDir(path)


def _fresh_state(
    spec: Spec,
    run_dir: RunDir,
    run_id: str,
    goal: Goal,
    branch: str,
    start: StartCheck | None = None,
) -> RunState:
    base = ws.create_worktree(spec.workspace_path(), run_dir.worktree, branch)
    state = RunState(
        run_id=run_id,
        goal_text=goal.text,
        goal_sha=goal.sha256,
        branch=branch,
        base_commit=base,
        queue=spec.seed_tasks(),
        budget=spec.budget.model_dump(mode="json"),
    )
    if start is not None and start.commit == base:
        if start.base is not None:
            state.base_tests = {start.base.command: start.base}
        if start.predicate is not None:
            state.record_predicate(start.predicate)
            private_dir(run_dir.artifacts)
            with open_private(run_dir.artifacts / "predicate.log", "wb") as log:
                log.write(start.output.encode("utf-8", "replace"))
        state.start_notes = list(start.notes)
        if start.outputs:
            private_dir(run_dir.artifacts)
            save_outputs(run_dir, start.outputs)
    return state


def night_rules(spec: Spec) -> NightRules:
    """What the loop of a night of ``spec`` reads of it."""
    return NightRules(
        spec.run,
        spec.budget,
        sets_up=spec.predicate.setup is not None,
        tasks_given=bool(spec.tasks),
    )


def _drive(night: Night, spans: NightSpans | None = None) -> TerminalResult:
    result: TerminalResult | None = None
    try:
        stop = night.drive()
        result = night.finish(stop)
        return result
    finally:
        night.close()
        if result is not None:  # what `overnight estimate` learns from
            record_run_workload(night.run_dir.path)
        if spans is not None:  # after the result is written: the export can change nothing
            spans.close(result)


def _night_spans(spec: Spec, night: Night, parts: NightParts) -> NightSpans | None:
    s = night.state
    spans = open_spans(
        spec.telemetry,
        model=spec.model,
        run_id=s.run_id,
        branch=s.branch,
        resumes=s.resumes,
        goal=s.goal_text,
        tap=parts.content,
    )
    if spans is not None:
        night.attempts.trace_context = spans.tool_call_context
    return spans


def start_run(
    night: ResolvedNight | Spec,
    run_dir: Path | None = None,
    *,
    clock: Clock | None = None,
    signals: Signals | None = None,
    on_created: Callable[[RunDir], None] | None = None,
    listener: Callable[[dict[str, Any]], None] | None = None,
    model: ModelClient | None = None,
    executor: TaskExecutor | None = None,
    shared: FleetShared | None = None,
    notes: Sequence[str] = (),
) -> tuple[RunDir, TerminalResult]:
    """Start a night of a spec resolved once (``resolve``): its parts are the night's. A
    bare ``Spec`` must already have passed ``check_spec``: its parts are built here
    (``prepared``), with ``run_dir``, ``model`` and ``executor`` (when given, they replace
    the spec's targets: tests and embedders hand in theirs). ``notes``: what the checks
    before the night found worth saying, for the trace. What the resolution started (its
    MCP servers, its sandbox's uid) is released when the night ends."""
    if isinstance(night, Spec):
        night = prepared(night, run_dir, model=model, executor=executor)
    try:
        return _start(night, clock, signals, on_created, listener, shared, notes)
    finally:
        night.close()


def _start(
    night: ResolvedNight,
    clock: Clock | None,
    signals: Signals | None,
    on_created: Callable[[RunDir], None] | None,
    listener: Callable[[dict[str, Any]], None] | None,
    shared: FleetShared | None,
    notes: Sequence[str],
) -> tuple[RunDir, TerminalResult]:
    clock = clock or SystemClock()
    signals = signals or Signals()
    spec, run_id, target, policy = night.spec, night.run_id, night.run_dir, night.policy
    goal = Goal(spec.goal)
    branch = f"overnight/{run_id}"
    check_spec_telemetry(spec)  # refused here, before anything is written
    # likewise: a predicate that cannot run
    start = check_predicate(spec.predicate, spec.workspace_path(), policy, hours=spec.budget.hours)
    rd = _create_run_dir(target, spec, run_id, goal, branch, night.model_source)
    if on_created is not None:
        on_created(rd)
    lock = RunLock(rd)
    lock.acquire()
    try:
        rd.write_disk_reserve()
        state = _fresh_state(spec, rd, run_id, goal, branch, start)
        parts = compose(
            spec,
            rd,
            state,
            clock,
            signals,
            goal=goal,
            expected_goal_sha=goal.sha256,
            model=night.model,
            executor=night.executor,
            sandbox=policy,
            prices=night.prices,
            mcp_servers=night.mcp_servers,
            shared=shared,
        )
        driven = Night(night_rules(spec), rd, state, goal, signals, parts)
        spans = _night_spans(spec, driven, parts)
        driven.trace.listener = listening(listener, spans)
        for note in [*night.notes, *notes, *state.start_notes]:
            driven.trace.event("decision", decision="start_check", note=note)
        outputs = load_outputs(rd)
        if outputs:
            driven.trace.event(
                "decision", decision="suite_outputs", count=len(outputs), paths=outputs[:20]
            )
        driven.checkpoint()
        return rd, _drive(driven, spans)
    finally:
        lock.release()


BUDGET_RAISES = ("usd", "hours", "steps", "tokens")


def resume_run(
    path: Path,
    raises: dict[str, float] | None = None,
    *,
    clock: Clock | None = None,
    signals: Signals | None = None,
    listener: Callable[[dict[str, Any]], None] | None = None,
    model: ModelClient | None = None,
    executor: TaskExecutor | None = None,
    shared: FleetShared | None = None,
) -> tuple[RunDir, TerminalResult]:
    """Continue a run after a crash, a kill or a stop, optionally with raised budgets."""
    clock = clock or SystemClock()
    signals = signals or Signals()
    rd = RunDir(path)
    if not rd.is_run():
        raise ConfigError("RUN_DIR", f"{path} is not an overnight run directory", "pass a RUN_DIR")
    # Before the spec is read and the lock taken: a night a newer overnight wrote is left
    # byte for byte as it was, for that overnight to resume.
    check_formats(rd.checkpoint, rd.spend)
    read_before = rd.spec.read_bytes()
    on_disk = _load_run_spec(rd, {})
    policy = sandbox_policy(on_disk, rd.path.absolute())
    check_spec_telemetry(on_disk)
    lock = RunLock(rd)
    lock.acquire()
    try:
        # Read again under the lock (a resume that raised a budget may have written it
        # meanwhile); the same bytes with nothing raised are the spec already read.
        unchanged = not raises and rd.spec.read_bytes() == read_before
        spec = on_disk if unchanged else _load_run_spec(rd, raises or {})  # raises checked
        manifest: dict[str, Any] = read_json(rd.manifest)
        run_id, branch = str(manifest["run_id"]), str(manifest["branch"])
        goal = Goal(spec.goal)
        try:
            state = _load_state(rd)
            read_journal(rd.spend)  # a journal that cannot be read is no basis for a ledger
            if state is not None:
                _check_run_state(state, run_id, on_disk)
        except CheckpointCorrupt as exc:
            return rd, _refuse(
                on_disk,
                rd,
                run_id,
                goal,
                branch,
                clock,
                signals,
                exc.cause,
                str(exc),
                model,
                shared,
            )
        if state is None:
            state = _fresh_state(spec, rd, run_id, goal, branch)
        state.budget = spec.budget.model_dump(mode="json")
        if raises:
            # The checkpoint first: a crash between the two writes leaves spec.json the
            # stricter of the two, which the next resume accepts.
            RunStateStore(rd.checkpoint).compact(state)
            write_json_atomic(rd.spec, spec.model_dump(mode="json"))
        if state.stopped_reason is not None:
            _reopen(rd, state, _reviewed(spec, rd, state, shared))
        state.resumes += 1
        run_goal, expected_sha = Goal(state.goal_text), str(manifest["goal_sha256"])
        parts = compose(
            spec,
            rd,
            state,
            clock,
            signals,
            goal=run_goal,
            expected_goal_sha=expected_sha,
            model=model,
            executor=executor,
            sandbox=policy,
            shared=shared,
        )
        night = Night(night_rules(spec), rd, state, run_goal, signals, parts)
        try:
            night.goal.assert_intact(goal.sha256)
        except GoalMutated as exc:
            night.fatal = Stop(Ending.UNRECOVERABLE_ERROR, exc.cause, str(exc))
        spans = _night_spans(spec, night, parts)
        night.trace.listener = listening(listener, spans)
        if not rd.disk_reserve.exists() or rd.disk_reserve.stat().st_size != DISK_RESERVE_BYTES:
            rd.write_disk_reserve()  # missing, or cut short by a kill while it was written
        night.trace.event("decision", decision="resumed", raises=raises or {})
        return rd, _drive(night, spans)
    finally:
        lock.release()


def end_run(
    path: Path, stop: Stop, *, clock: Clock | None = None, shared: FleetShared | None = None
) -> TerminalResult:
    """End a run from outside its lap with ``stop`` (a fleet that will not deliver it again):
    result.json from the run's own state, nothing executed, no model call; the checkpoint
    records the stop. A task left in flight stays in the plan as it is."""
    clock = clock or SystemClock()
    rd = RunDir(path)
    check_formats(rd.checkpoint, rd.spend)
    lock = RunLock(rd)
    lock.acquire()
    try:
        spec = _load_run_spec(rd, {})
        manifest: dict[str, Any] = read_json(rd.manifest)
        run_id, branch = str(manifest["run_id"]), str(manifest["branch"])
        goal = Goal(spec.goal)
        state = _load_state(rd) or RunState(
            run_id=run_id, goal_text=goal.text, goal_sha=goal.sha256, branch=branch, base_commit=""
        )
        signals = Signals()
        policy = SandboxPolicy(spec.sandbox.mode, None)  # nothing runs
        parts = compose(
            spec,
            rd,
            state,
            clock,
            signals,
            goal=goal,
            expected_goal_sha=goal.sha256,
            sandbox=policy,
            shared=shared,
        )
        night = Night(night_rules(spec), rd, state, goal, signals, parts)
        _archive_result(rd)
        state.stopped_reason = None
        night.refuse(stop)
        night.persist = bool(state.base_commit)
        return _drive(night)
    finally:
        lock.release()


def _load_run_spec(rd: RunDir, raises: dict[str, float]) -> Spec:
    """The run's spec.json with ``raises`` applied (nothing written)."""
    data: dict[str, Any] = read_json(rd.spec)
    if raises:
        budget = dict(data["budget"])
        for key, value in raises.items():
            if key not in BUDGET_RAISES:
                raise ConfigError(f"--{key}", "not a budget", f"one of {BUDGET_RAISES}")
            budget[key] = value
        data["budget"] = budget
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError("budget", str(exc.errors()[0]["msg"]), "pass positive values") from None
    return spec


def _check_run_state(state: RunState, run_id: str, on_disk: Spec) -> None:
    """The checkpoint belongs to this run, and spec.json allows no more than the budget the
    run was started or explicitly resumed with."""
    if state.run_id != run_id:
        raise CheckpointCorrupt(
            f"the checkpoint belongs to run {state.run_id!r}, not to this run ({run_id!r})"
        )
    if state.budget is not None:
        looser = loosened(state.budget, on_disk.budget.model_dump(mode="json"))
        if looser:
            raise CheckpointCorrupt(
                "spec.json allows more than the budget this run was given "
                f"({', '.join(looser)}); raise a budget with `overnight resume --usd ...`, "
                "never by editing the run directory"
            )


def _load_state(rd: RunDir) -> RunState | None:
    return load_run_state(rd.checkpoint, to_continue=True)  # under the run's lock


def _reviewed(spec: Spec, rd: RunDir, state: RunState, shared: FleetShared | None) -> list[str]:
    """The held tasks whose effects of unknown outcome a person has all resolved."""
    held = [p for p in state.parked if p.held_for]
    if not held:
        return []
    ledger = shared.effects if shared is not None and shared.effects is not None else None
    store = ledger or open_effects(spec, rd.path)
    try:
        rows = {key: store.get(key) for p in held for key in p.held_for}
    finally:
        if ledger is None:
            store.close()
    return [
        p.task.id
        for p in held
        if all((r := rows[k]) is not None and r.state not in UNSETTLED for k in p.held_for)
    ]


def _reopen(rd: RunDir, state: RunState, reviewed: list[str] | None = None) -> None:
    """Resume a run that ended: only if its ending says resumable, or, when a task was held
    for a person's answer and the ending was for want of it, once a person has resolved what
    a held task waited for (``reviewed``): such a result says resumable, meaning after the
    review queue is resolved."""
    prior: dict[str, Any] = read_json(rd.result) if rd.result.exists() else {}
    ending = str(prior.get("stop_reason", "")).split(":", 1)[0]
    held = [p.task.id for p in state.parked if p.held_for]
    waits = bool(held) and ending in REOPENED_BY_REVIEW
    if prior and waits and not reviewed:
        raise ConfigError(
            "RUN_DIR",
            f"this run ended {prior.get('stop_reason')}, which is not resumable until the "
            f"review queue is resolved: {', '.join(held)} wait(s) for a person",
            f"resolve the effects {', '.join(held)} wait(s) for with `overnight review "
            "resolve effect:KEY --happened|--not-happened --note ...`, then resume",
        )
    if prior and not waits and not prior.get("resumable", False):
        raise ConfigError(
            "RUN_DIR",
            f"this run ended {prior.get('stop_reason')}, which is not resumable "
            "(the same inputs would end the same way)",
            "read its report, change the spec, and start a new run",
        )
    _archive_result(rd)
    state.stopped_reason = None


def _archive_result(rd: RunDir) -> None:
    """Move an earlier result.json to history/: a new ending will be written."""
    if rd.result.exists():
        private_dir(rd.history)
        n = len(list(rd.history.glob("result-*.json"))) + 1
        os.replace(rd.result, rd.history / f"result-{n}.json")


def _refuse(
    spec: Spec,
    rd: RunDir,
    run_id: str,
    goal: Goal,
    branch: str,
    clock: Clock,
    signals: Signals,
    cause: str,
    detail: str,
    model: ModelClient | None,
    shared: FleetShared | None = None,
) -> TerminalResult:
    """A checkpoint that cannot be trusted: end UNRECOVERABLE_ERROR, touch nothing else."""
    placeholder = RunState(
        run_id=run_id, goal_text=goal.text, goal_sha=goal.sha256, branch=branch, base_commit=""
    )
    parts = compose(
        spec,
        rd,
        placeholder,
        clock,
        signals,
        goal=goal,
        expected_goal_sha=goal.sha256,
        model=model,
        spend_readable=False,
        shared=shared,
    )
    night = Night(night_rules(spec), rd, placeholder, goal, signals, parts)
    _archive_result(rd)  # keep what an earlier process concluded
    night.refuse(Stop(Ending.UNRECOVERABLE_ERROR, cause, detail))
    return _drive(night)
