"""The lap, and the loop around it: the imperative shell around ``core``.

``Night.drive`` is the only loop. Its one exit is a ``Stop`` returned by ``should_stop`` at the
top of a lap; everything raised inside a lap is classified by ``classify_exception`` and lands
back at that check. ``start_run`` and ``resume_run`` (in ``overnight.night.runs``) build a
``Night``.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from functools import cached_property

from overnight.config.spec import BudgetSpec, RunSpec
from overnight.core.budget import STEPS, BudgetReading, budget_readings
from overnight.core.endings import Stop, StopFacts, classify_exception, should_stop
from overnight.core.errors import Interrupted
from overnight.core.goal import Goal
from overnight.core.resume import VerifyOutcome
from overnight.core.routing import Route, Routed, route_verdict
from overnight.core.state import RunState
from overnight.core.tasks import CommandRun, Task
from overnight.night.attempts import retry_brief
from overnight.night.checkouts import NoTimeLeft
from overnight.night.compose import NightParts
from overnight.night.judging import Judged, parked_fields
from overnight.night.planner import Planner
from overnight.night.signals import Signals
from overnight.night.verdict import Verdict
from overnight.store.result import TerminalResult
from overnight.store.run_state import RunStateStore
from overnight.store.rundir import RunDir


@dataclass(frozen=True)
class NightRules:
    """What the loop of a night reads of its spec."""

    run: RunSpec
    """``[run]``: a task's retries, the no-progress limit, how often drift is checked."""
    budget: BudgetSpec
    """``[budget]``: the steps and hours limits the budgets are read against."""
    sets_up: bool
    """``[predicate] setup`` names a command: the worktree is set up when the night starts."""
    tasks_given: bool
    """The spec lists ``[[tasks]]``: the night does not plan its queue."""


class Night:
    """One run being driven by this process, given its parts (``overnight.night.compose``)."""

    def __init__(
        self,
        rules: NightRules,
        run_dir: RunDir,
        state: RunState,
        goal: Goal,
        signals: Signals,
        parts: NightParts,
    ) -> None:
        self.rules = rules
        self.run_dir = run_dir
        self.state = state
        self.goal = goal
        self.signals = signals
        self.timer = parts.timer
        self.ledger = parts.ledger
        self.trace = parts.trace
        self.gateway = parts.gateway
        self.executors = parts.executors
        self.worktree = parts.worktree
        self.parts = parts
        hands = parts.hands
        self.commands = hands.commands
        self.attempts = hands.attempts
        self.verdicts = hands.verdicts
        self.judge = hands.judge
        self.holds = hands.holds
        self.planner = hands.planner
        self.ending = hands.ending
        self.fatal: Stop | None = None
        self.prepared = False
        self.persist = True
        self.budgets_at_stop: dict[str, BudgetReading] = {}
        self.last_command: CommandRun | None = None

    def refuse(self, stop: Stop) -> None:
        """End at once with ``stop``, touching nothing of the run (its checkpoint cannot be
        trusted): no lap, no checkpoint, and no closing model call, whose ledger would start
        from zero and could spend the wrap-up reserve again on every refused resume."""
        self.persist = False
        self.prepared = True
        self.gateway = None
        self.planner = None
        self.fatal = stop

    # -- facts -----------------------------------------------------------------------------

    def seconds_used(self) -> float:
        return self.timer.seconds_used()

    def seconds_left(self) -> float:
        """Seconds until the wall-clock enforcement line."""
        return self.timer.seconds_left()

    def budgets(self) -> dict[str, BudgetReading]:
        """Every budget's reading now. Money and tokens are the ledger's, its limits the
        spec's."""
        cap = self.gateway.cap if self.gateway is not None else None
        return budget_readings(
            self.ledger,
            self.timer.fractions,
            steps=(self.state.steps_used, self.rules.budget.steps),
            seconds=(self.seconds_used(), self.rules.budget.hours * 3600.0),
            fleet=None if cap is None else (cap.spent_usd(), cap.limit_usd),
        )

    def facts(self) -> StopFacts:
        s = self.state
        return StopFacts(
            goal_met=s.goal_met,
            budgets=self.budgets(),
            drift_score=s.drift_score,
            no_progress_streak=s.no_progress_streak,
            no_progress_limit=self.rules.run.no_progress_after,
            queue_length=len(s.queue),
            interrupted_by=self.signals.requested,
            fatal=self.fatal,
        )

    # -- the loop --------------------------------------------------------------------------

    def drive(self) -> Stop:
        """``while True`` with one exit: the stop check. Nothing else leaves this loop."""
        while True:
            try:
                if not self.prepared and self.fatal is None:
                    self.prepared = True
                    self.prepare()
                stop = should_stop(self.facts())
                if stop is not None:
                    self.budgets_at_stop = self.budgets()
                    self.trace.event("decision", decision="stop", reason=stop.reason)
                    return stop
                self.lap()
            except KeyboardInterrupt:
                self.signals.request("sigint")
            except SystemExit as exc:  # user code (an executor, a model) asked to exit
                self.absorb(RuntimeError(f"user code tried to end the process: {exc!r}"))
            except Exception as exc:
                self.absorb(exc)

    def absorb(self, exc: Exception) -> None:
        stop = classify_exception(exc)
        if isinstance(exc, Interrupted):
            self.signals.request(exc.signal_name)
        self.trace.event(
            "decision",
            decision="exception",
            error=repr(exc),
            classified=stop.reason if stop else "soft",
            traceback=traceback.format_exc(limit=8),
        )
        if stop is not None:
            self.fatal = stop

    def prepare(self) -> None:
        """Once per process: verify a task left in flight, run the predicate, plan if needed.
        With no time left none of it starts: the stop check ends the night at once."""
        self.commands.end_leftover_command()
        self.holds.release_reviewed()
        if self.rules.sets_up and self.seconds_left() > 0:
            self.judge.set_up_worktree()
        flight = self.state.in_progress
        if flight is not None:
            try:
                self.verify_in_flight()
            except NoTimeLeft as exc:
                self.out_of_time(flight.task, str(exc))
                return
        self.run_predicate()
        if self.seconds_left() <= 0:
            self.checkpoint()
            return
        if not self.state.goal_met and not self.state.planned and not self.rules.tasks_given:
            if self.signals.requested:  # planning is new work: none starts after a signal
                raise Interrupted(self.signals.requested)
            self.planner_of().plan()
        self.checkpoint()

    def lap(self) -> None:
        """Pop, mark IN_PROGRESS, execute, judge (protected paths, then verify on a clean
        checkout of the candidate, retrying), land or park, checkpoint, drift, predicate."""
        s = self.state
        task = s.start_lap()
        parked_before = len(s.parked)
        try:
            outcome = self.work_on(task)
        except NoTimeLeft as exc:
            self.out_of_time(task, str(exc))
            return
        self.trace.event(
            "decision",
            decision="task_finished",
            task=task.id,
            outcome=outcome.value,
            **self.command_fields(),
            **parked_fields(s.parked[parked_before:]),
        )
        self.checkpoint()
        # The predicate first: a drift check refused for money (or failing) must not hide a
        # goal this task reached, and a met goal needs no drift verdict.
        self.run_predicate()
        self.checkpoint()
        if (
            self.gateway is not None
            and s.queue
            and s.tasks_since_drift >= self.rules.run.drift_every
            and should_stop(self.facts()) is None  # no verdict changes an ending already due
        ):
            self.planner_of().drift_check()
            self.checkpoint()
        planner, has_agent = self.planner, self.executors.agent is not None
        if (
            planner is not None
            and planner.should_replan(has_agent)
            and should_stop(self.facts()) is None
        ):
            planner.replan()
            self.checkpoint()

    def work_on(self, task: Task) -> VerifyOutcome:
        """Execute and judge ``task`` until it is done, parked, or out of retries; return the
        last verdict. Attempts are counted across the run's processes (``state.attempts``).
        Raises ``NoTimeLeft`` (the task left IN_PROGRESS) when its verify cannot be given the
        time to answer."""
        retries = task.retries if task.retries is not None else self.rules.run.retries
        earlier = ""
        while True:
            attempt = self.state.start_task(task)
            self.checkpoint()  # IN_PROGRESS is on disk before anything happens
            self.trace.event("task", event="started", task=task.id, attempt=attempt)
            self.last_command = None
            attempted = self.attempts.execute(task, attempt, earlier)
            ran = self.last_command = attempted.command
            judged = self.judge_candidate(task, attempt, ran, lap=True)
            verdict = judged.verdict
            if judged.settled or verdict is None:  # parked for what it changed, or held
                return verdict.outcome if verdict is not None else VerifyOutcome.NOT_DONE
            routed = route_verdict(
                verdict.outcome,
                cannot_run=verdict.cannot_run,
                looping=attempted.status == "looping",
                attempt=attempt,
                retries=retries,
                steps_exhausted=self.budgets()[STEPS].exhausted,
            )
            if routed.route is not Route.RETRY:
                self.conclude(task, attempt, judged, verdict, routed, ran)
                return verdict.outcome
            earlier = retry_brief(task, attempt, verdict)

    def conclude(
        self,
        task: Task,
        attempt: int,
        judged: Judged,
        verdict: Verdict,
        routed: Routed,
        ran: CommandRun | None,
    ) -> None:
        """Land a lap's verified task on the branch, or park it for the reason routed."""
        made, screened = judged.made, judged.screened
        if routed.route is Route.LAND:
            touches = self.verdicts.touches_runner(task, made.commit)
            self.state.finish_done(
                task,
                self.judge.land(made.commit, task, screened),
                attempt,
                verdict.detail,
                command=ran,
                evidence=verdict.evidence,
                touches_runner=touches,
                excluded=made.notes.listed_excluded(),
                dropped=made.notes.listed_dropped(),
                automation=screened.landed_automation,
            )
            return
        reason = routed.reason
        if verdict.gates is not None and not verdict.gates.passed:
            reason = verdict.gates.park_reason(reason)
        self.state.finish_parked(
            task,
            self.attempts.park_reason(task, reason),
            verdict.detail,
            self.judge.discard(task, attempt, made.commit),
            command=ran,
            excluded=made.notes.listed_excluded(),
            dropped=made.notes.listed_dropped(),
        )

    def judge_candidate(
        self, task: Task, attempt: int, ran: CommandRun | None = None, *, lap: bool = False
    ) -> Judged:
        """Judge what the worktree holds for ``task``, for a lap and for the task a resume
        finds in flight alike: its candidate commit, screened for what no candidate may
        change (parked, no verdict), verified on a clean checkout, held when an effect of
        unknown outcome must be settled first (``settled``: parked or held, nothing more to
        route)."""
        return self.judge.judge(task, attempt, ran, lap=lap)

    def out_of_time(self, task: Task, why: str) -> None:
        """No time to judge ``task``: it stays IN_PROGRESS for a resume to verify."""
        self.trace.event("decision", decision="out_of_time", task=task.id, detail=why)
        self.checkpoint()

    def command_fields(self) -> dict[str, object]:
        """What the last command task's command did, for the trace."""
        ran = self.last_command
        if ran is None:
            return {}
        return {"command_exit_code": ran.exit_code, "command_timed_out": ran.timed_out}

    def run_predicate(self) -> None:
        """The goal predicate, judged by the verdict (``Verdicts.night_predicate``)."""
        self.state.record_predicate(self.verdicts.night_predicate())

    def verify_in_flight(self) -> None:
        """Resume: the task in flight is verified, never executed again."""
        flight = self.state.in_progress
        assert flight is not None
        self.worktree.clear_stale_locks()
        judged = self.judge_candidate(flight.task, flight.attempt)
        if not judged.settled:  # parked, or held: neither landed nor re-run
            self.judge.route_resumed(flight.task, flight.attempt, judged)
        self.checkpoint()

    def planner_of(self) -> Planner:
        """The night's planner: only a night with a model plans or checks drift."""
        assert self.planner is not None
        return self.planner

    def finish(self, stop: Stop) -> TerminalResult:
        """The closing summary (from the wrap-up reserve), result.json, the alert, and the
        final checkpoint recording the stop (``overnight.night.ending``)."""
        checkpoint = self.checkpoint if self.persist else None
        ending = self.ending.finish
        already = stop.reason == "GOAL_MET" and self.did_nothing()
        return ending(
            stop, self.gateway, self.budgets_at_stop, self.budgets, checkpoint, already_met=already
        )

    def did_nothing(self) -> bool:
        """No task was started and the branch is the base commit: a goal met now was met
        before the night began."""
        s = self.state
        if s.attempts or s.completed or s.parked or s.in_progress is not None:
            return False
        try:
            return self.worktree.head() == s.base_commit
        except Exception:
            return False

    # -- persistence -----------------------------------------------------------------------

    def checkpoint(self) -> None:
        if not self.persist:
            return
        self.parts.fence.check("a checkpoint")
        self.state.note_totals(self.seconds_used(), self.ledger.spent_usd, self.ledger.tokens_used)
        if self.state.stopped_reason is None:
            self.checkpoints.save(self.state)
        else:  # the run is closing: the snapshot alone then holds the whole state
            self.checkpoints.compact(self.state)

    @cached_property
    def checkpoints(self) -> RunStateStore:
        store = RunStateStore(self.run_dir.checkpoint)
        store.continue_loaded(self.state)  # a resume appends to the journal it read
        return store

    def close(self) -> None:
        parts = self.parts
        if parts.proxy is not None:
            parts.proxy.close()
        parts.sandbox.close()  # its uid, for another night of the machine
        parts.trace.close()
        parts.spend.close()
        parts.effects.close()
