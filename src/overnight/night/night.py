"""The lap, and the loop around it: the imperative shell around ``core``.

``Night.drive`` is the only loop. Its one exit is a ``Stop`` returned by ``should_stop`` at the
top of a lap; everything raised inside a lap is classified by ``classify_exception`` and lands
back at that check. ``start_run`` and ``resume_run`` (in ``overnight.night.runs``) build a
``Night``.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from overnight.config.spec import Spec
from overnight.core.budget import (
    FLEET_MONEY,
    MONEY,
    SECONDS,
    STEPS,
    TOKENS,
    BudgetReading,
    reading,
)
from overnight.core.candidate import park_reason
from overnight.core.endings import Stop, StopFacts, classify_exception, should_stop
from overnight.core.errors import Interrupted
from overnight.core.goal import Goal
from overnight.core.resume import VerifyOutcome
from overnight.core.routing import Route, route_verdict
from overnight.core.state import RunState
from overnight.core.tasks import CommandRun, Task
from overnight.core.text import clip
from overnight.effects.ledger import UNSETTLED, render_done, render_unknown
from overnight.models.types import ModelRequest, ModelResponse
from overnight.night.candidate import Candidate
from overnight.night.checkouts import Checkouts, NoTimeLeft, SetupFailed
from overnight.night.commands import NightCommands
from overnight.night.compose import NightParts
from overnight.night.finish import (
    ClosingFacts,
    closing_summary,
    finish_result,
    write_result,
)
from overnight.night.planner import Planner
from overnight.night.signals import Signals
from overnight.night.verdict import Screen, Verdict, Verdicts, predicate_fields
from overnight.night.worktree import remove_worktree
from overnight.report.result import TerminalResult
from overnight.seams import EffectRow, ExecContext
from overnight.store.atomic import private_dir
from overnight.store.run_state import RunStateStore
from overnight.store.rundir import RunDir


def _no_model(request: ModelRequest) -> ModelResponse:
    raise RuntimeError("this night has no model: a command task cannot call one")


@dataclass(frozen=True)
class Judged:
    """A task's candidate as judged: what it is made of, what it changes, what its verify
    said (None: parked before any verify ran)."""

    made: Candidate
    screened: Screen
    verdict: Verdict | None
    settled: bool = False
    """Parked or held already: nothing is left to route."""


def task_marker(task_id: str) -> str:
    return f"(overnight task {task_id})"


class Night:
    """One run being driven by this process, given its parts (``overnight.night.compose``)."""

    def __init__(
        self,
        spec: Spec,
        run_dir: RunDir,
        state: RunState,
        goal: Goal,
        expected_goal_sha: str,
        signals: Signals,
        parts: NightParts,
    ) -> None:
        self.spec = spec
        self.run_dir = run_dir
        self.state = state
        self.goal = goal
        self.expected_goal_sha = expected_goal_sha
        self.signals = signals
        self.timer = parts.timer
        self.clock = parts.timer.clock
        self.started_at = self.clock.now_iso()
        self.fractions = spec.budget.fractions()
        self.ledger = parts.ledger
        self.spend_journal = parts.spend
        self.trace = parts.trace
        self.gateway = parts.gateway
        self.executors = parts.executors
        self.proxy = parts.proxy
        self.effects = parts.effects
        self.worktree = parts.worktree
        self.fence = parts.fence
        self.sandbox = parts.sandbox
        self.commands = NightCommands(
            spec, run_dir, state, self.sandbox, signals, self.trace, self.seconds_left
        )
        self.planner: Planner | None = None
        if self.gateway is not None:
            self.planner = Planner(
                spec, state, goal, expected_goal_sha, self.gateway, self.trace, self.seconds_used
            )
        self.checkouts = Checkouts(
            spec,
            self.worktree,
            self.trace,
            self.commands.run,
            self.commands.confinement,
            self.commands.log_name,
        )
        self.verdicts = Verdicts(
            spec,
            state,
            self.worktree,
            self.checkouts.clean,
            self.trace,
            self.commands.run,
            self.commands.confinement,
            self.commands.log_name,
            self.seconds_left,
        )
        self.fatal: Stop | None = None
        self.prepared = False
        self.persist = True
        self.budgets_at_stop: dict[str, BudgetReading] = {}
        self.last_command: CommandRun | None = None
        self.trace_context: Callable[[str], dict[str, str]] = lambda _tool: {}
        """The W3C trace context of a tool call's span to come (``NightSpans``), if exported."""

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
        b, f, led = self.spec.budget, self.fractions, self.ledger
        budgets = {
            MONEY: reading(MONEY, led.spent_usd, b.usd, f, led.refused_at.get(MONEY)),
            TOKENS: reading(TOKENS, led.tokens_used, b.tokens, f, led.refused_at.get(TOKENS)),
            STEPS: reading(STEPS, self.state.steps_used, b.steps, f),
            SECONDS: reading(SECONDS, self.seconds_used(), b.hours * 3600.0, f),
        }
        cap = self.gateway.cap if self.gateway is not None else None
        if cap is not None:
            refused = led.refused_at.get(FLEET_MONEY)
            budgets[FLEET_MONEY] = reading(FLEET_MONEY, cap.spent_usd(), cap.limit_usd, f, refused)
        return budgets

    def facts(self) -> StopFacts:
        s = self.state
        return StopFacts(
            goal_met=s.goal_met,
            budgets=self.budgets(),
            drift_score=s.drift_score,
            no_progress_streak=s.no_progress_streak,
            no_progress_limit=self.spec.run.no_progress_after,
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
        self.release_reviewed()
        if self.spec.predicate.setup is not None and self.seconds_left() > 0:
            self.set_up_worktree()
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
        if not self.state.goal_met and not self.state.planned and not self.spec.tasks:
            if self.signals.requested:  # planning is new work: none starts after a signal
                raise Interrupted(self.signals.requested)
            self.plan()
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
        parked = s.parked[parked_before:]
        self.trace.event(
            "decision",
            decision="task_finished",
            task=task.id,
            outcome=outcome.value,
            **self.command_fields(),
            **(
                {"parked": parked[-1].reason, "detail": clip(parked[-1].detail, 300)}
                if parked
                else {}
            ),
        )
        self.checkpoint()
        # The predicate first: a drift check refused for money (or failing) must not hide a
        # goal this task reached, and a met goal needs no drift verdict.
        self.run_predicate()
        self.checkpoint()
        if (
            self.gateway is not None
            and s.queue
            and s.tasks_since_drift >= self.spec.run.drift_every
            and should_stop(self.facts()) is None  # no verdict changes an ending already due
        ):
            self.drift_check()
        if self.should_replan() and should_stop(self.facts()) is None:
            self.replan()
            self.checkpoint()

    def work_on(self, task: Task) -> VerifyOutcome:
        """Execute and judge ``task`` until it is done, parked, or out of retries; return the
        last verdict. Attempts are counted across the run's processes (``state.attempts``).
        Raises ``NoTimeLeft`` (the task left IN_PROGRESS) when its verify cannot be given the
        time to answer."""
        s = self.state
        retries = task.retries if task.retries is not None else self.spec.run.retries
        earlier = ""
        while True:
            attempt = s.start_task(task)
            self.checkpoint()  # IN_PROGRESS is on disk before anything happens
            self.trace.event("task", event="started", task=task.id, attempt=attempt)
            status = self.execute(task, attempt, earlier)
            ran = self.last_command
            judged = self.judge_candidate(task, attempt, ran, lap=True)
            verdict = judged.verdict
            if judged.settled or verdict is None:  # parked for what it changed, or held
                return verdict.outcome if verdict is not None else VerifyOutcome.NOT_DONE
            made, screened = judged.made, judged.screened
            candidate, detail = made.commit, verdict.detail
            routed = route_verdict(
                verdict.outcome,
                cannot_run=verdict.cannot_run,
                looping=status == "looping",
                attempt=attempt,
                retries=retries,
                steps_exhausted=self.steps_exhausted(),
            )
            if routed.route is Route.LAND:
                touches = self.verdicts.touches_runner(task, candidate)
                s.finish_done(
                    task,
                    self.land(candidate, task, screened),
                    attempt,
                    detail,
                    command=ran,
                    evidence=verdict.evidence,
                    touches_runner=touches,
                    excluded=made.notes.listed_excluded(),
                    dropped=made.notes.listed_dropped(),
                    automation=screened.landed_automation,
                )
                return verdict.outcome
            if routed.route is Route.PARK:
                patch = self.discard(task, attempt, candidate)
                s.finish_parked(
                    task,
                    routed.reason,
                    detail,
                    patch,
                    command=ran,
                    excluded=made.notes.listed_excluded(),
                    dropped=made.notes.listed_dropped(),
                )
                return verdict.outcome
            earlier = (
                f"Attempt {attempt} of this task did not pass the check `{task.verify}`; "
                f"its edits are still in the worktree. The check said:\n{detail[-1500:]}"
            )

    def judge_candidate(
        self, task: Task, attempt: int, ran: CommandRun | None = None, *, lap: bool = False
    ) -> Judged:
        """Judge what the worktree holds for ``task``, for a lap and for the task a resume
        finds in flight alike: its candidate commit, screened for what no candidate may
        change (parked, no verdict), verified on a clean checkout, held when an effect of
        unknown outcome must be settled first (``settled``: parked or held, nothing more to
        route)."""
        made = self.candidate(task)
        candidate = made.commit
        screened = self.verdicts.screen(task, candidate)
        if self.park_if_judged(task, attempt, made, screened):
            return Judged(made, screened, None, settled=True)
        verdict = self.verdicts.verify(task, candidate, attempt)
        if lap:
            self.trace.event("task", event="verified", task=task.id, outcome=verdict.outcome.value)
        unsettled = self.unsettled_effects(task)
        if unsettled:  # whatever the verify says: a person settles the effect first
            self.hold(task, attempt, unsettled, verdict.detail, ran, candidate)
            return Judged(made, screened, verdict, settled=True)
        return Judged(made, screened, verdict)

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

    # -- the steps of a lap ----------------------------------------------------------------

    def execute(self, task: Task, attempt: int, earlier: str = "") -> str:
        """Carry the task out with its executor (``TaskExecutors``); return what the executor
        reported. A command task's command is kept in ``last_command``."""
        self.last_command = None
        executor = self.executors.for_task(task)
        if executor is None:
            self.trace.event("decision", decision="no_executor", task=task.id)
            return "gave_up"
        outcome = executor.execute(task, self.exec_context(task, attempt, earlier))
        if outcome.command is not None:
            self.last_command = outcome.command
            return outcome.status
        self.trace.event(
            "tool_call",
            tool="executor",
            task=task.id,
            status=outcome.status,
            summary=outcome.summary[:500],
        )
        self.state.add_lessons(outcome.lessons)
        if self.signals.requested:
            raise Interrupted(self.signals.requested)
        refused = self.ledger.refusal()
        if refused is not None:
            # A call of the executor's was refused at a budget line (a CLI's, through the
            # proxy): the lap ends as when the built-in agent's call is refused, the task in
            # flight for a resume with a raised budget to judge.
            raise refused
        return outcome.status

    def exec_context(self, task: Task, attempt: int, earlier: str) -> ExecContext:
        """What an executor is given for one attempt at ``task``."""
        gateway = self.gateway
        return ExecContext(
            workdir=self.run_dir.worktree,
            artifacts=self.run_dir.artifacts,
            model=self.spec.model.name if self.spec.model else "",
            attempt=attempt,
            call_model=gateway.call if gateway is not None else _no_model,
            stop_requested=self.signals.check,
            budget_band=gateway.band if gateway is not None else lambda: "free",
            seconds_left=self.seconds_left,
            now=self.seconds_used,
            note=lambda kind, fields: self.trace.event(kind, **{"task": task.id, **fields}),
            lessons=list(self.state.lessons),
            earlier="\n\n".join(x for x in (self.effects_done(task), earlier) if x),
            run_id=self.state.run_id,
            effects=self.effects,
            on_refused=self.state.refused_effects.append,
            tokens_affordable=self.tokens_affordable,
            sleep=self.clock.sleep,
            protected=self.verdicts.protection.rule_for,
            confine=self.commands.tool_confinement,
            trace_context=self.trace_context,
            model_access=None if self.proxy is None else self.proxy.access_for(task.id),
            task_log=self.run_dir.artifacts / self.commands.log_name(f"{task.id}.{attempt}.agent"),
            run_shell=lambda command, timeout_s, stem: self.commands.run_shell(
                task.id, command, timeout_s, stem
            ),
        )

    def tokens_affordable(self, model: str) -> int:
        """Money left before the enforcement line, in output tokens of ``model``."""
        return self.ledger.max_output_tokens(model, 0)

    # -- what judges the work ----------------------------------------------------------------

    def candidate(self, task: Task) -> Candidate:
        """The task's changes as a commit on top of the branch (not on it yet; None when it
        changed nothing that would be committed), with what was left out of it."""
        title = task.title or (task.command or task.brief or "").splitlines()[0][:60]
        message = (
            f"{task.id}: {title}\n\nVerified by: {task.verify}\n"
            f"Run: {self.state.run_id} {task_marker(task.id)}\n"
        )
        return self.worktree.candidate(message)

    def park_if_judged(self, task: Task, attempt: int, made: Candidate, screened: Screen) -> bool:
        """Park the task when its candidate holds what no candidate may (a nested repository,
        a file over the size limit), changes what judges the work, or changes what runs by
        itself beyond what the spec allows; True when parked."""
        forged, automation = screened.judged, screened.blocked
        refused = made.notes.refused
        if not forged and not refused and not automation:
            return False
        reason, lines = park_reason(refused, [sentence for _path, sentence in forged], automation)
        self.trace.event(
            "decision", decision="candidate_refused", task=task.id, reason=reason, paths=lines
        )
        self.state.finish_parked(
            task,
            reason,
            "\n".join(lines),
            self.discard(task, attempt, made.commit),
            protected_changes=[r.path for r in refused if r.judges] + [p for p, _s in forged],
            excluded=made.notes.listed_excluded(),
            dropped=made.notes.listed_dropped(),
            automation_changes=[a.path for a in automation],
        )
        return True

    def land(
        self, candidate: str | None, task: Task | None = None, screened: Screen | None = None
    ) -> str | None:
        """Put a verified candidate on the branch; a task that changed nothing lands no
        commit. What it changes of what runs by itself, the spec allowing it, is traced."""
        self.fence.check("a commit to the branch")
        if task is not None and screened is not None and screened.allowed:
            paths = screened.landed_automation
            self.trace.event("decision", decision="automation_landed", task=task.id, paths=paths)
        return self.worktree.land(candidate)

    def run_predicate(self) -> None:
        """The goal predicate, judged by the verdict (``overnight.night.verdict``). The start
        check's verdict on the base commit stands for the night's first run."""
        s = self.state
        first = s.last_predicate
        if first is not None and first.at_start and self.worktree.head() == s.base_commit:
            s.record_predicate(first.model_copy(update={"at_start": False}))
            self.commands.confinement()  # counted as its policy ran it, sandboxed or not
            self.trace.event("tool_call", **predicate_fields(first), from_start_check=True)
            return
        s.record_predicate(self.verdicts.predicate())

    def discard(self, task: Task, attempt: int, candidate: str | None) -> str | None:
        """Save ``candidate``'s change as a patch in the artifacts and write the worktree
        afresh from the branch; the patch's path, or None when there was no change."""
        patch = self.run_dir.artifacts / self.commands.log_name(f"{task.id}.{attempt}", ".patch")
        private_dir(self.run_dir.artifacts)
        saved = self.worktree.discard(patch, candidate)
        self.set_up_worktree()
        return str(patch) if saved else None

    def set_up_worktree(self) -> None:
        """The spec's set-up command in the agent's worktree; a failure is the trace's to say
        (the checks run it again in their own checkouts, and say it there)."""
        try:
            self.checkouts.set_up(self.run_dir.worktree, "worktree")
        except SetupFailed as exc:
            self.trace.event("decision", decision="worktree_setup_failed", detail=str(exc)[:500])

    def steps_exhausted(self) -> bool:
        return self.budgets()[STEPS].exhausted

    def effects_done(self, task: Task) -> str:
        return render_done(self.effects.for_task(self.state.run_id, task.id))

    def unsettled_effects(self, task: Task) -> list[EffectRow]:
        """Effects of ``task`` whose outcome nobody knows: intended with no answer (the process
        died in the call) are marked unknown here."""
        rows = self.effects.for_task(self.state.run_id, task.id)
        unsettled: list[EffectRow] = []
        for r in rows:
            if r.state == "intended":
                r = self.effects.settle(
                    r.step_key, "unknown", error="no answer was recorded (the process ended)"
                )
            if r.state in UNSETTLED:
                unsettled.append(r)
        return unsettled

    def hold(
        self,
        task: Task,
        attempt: int,
        unsettled: list[EffectRow],
        detail: str,
        command: CommandRun | None = None,
        candidate: str | None = None,
    ) -> None:
        """Park ``task`` until a person resolves its effects of unknown outcome: its work
        (``candidate``) is kept as a patch, never landed, whatever its verify said."""
        keys = [r.step_key for r in unsettled]
        self.trace.event("decision", decision="held_for_review", task=task.id, effects=keys)
        self.state.hold(
            task,
            render_unknown(unsettled),
            detail,
            self.discard(task, attempt, candidate),
            keys,
            command=command,
        )

    def release_reviewed(self) -> None:
        """Tasks held for effects a person has since resolved go back on the queue, to run
        again: the ledger replays an effect resolved as happened, and lets one resolved as not
        happened be made (once)."""
        settled = {
            key
            for p in self.state.parked
            for key in p.held_for
            if (row := self.effects.get(key)) is not None and row.state not in UNSETTLED
        }
        for task in self.state.release_held(settled):
            self.trace.event("decision", decision="released_after_review", task=task.id)

    def verify_in_flight(self) -> None:
        """Resume: the task in flight is verified, never executed again."""
        flight = self.state.in_progress
        assert flight is not None
        self.worktree.clear_stale_locks()
        judged = self.judge_candidate(flight.task, flight.attempt)
        verdict = judged.verdict
        if judged.settled or verdict is None:  # parked, or held: neither landed nor re-run
            self.checkpoint()
            return
        made, screened = judged.made, judged.screened
        candidate, outcome, detail = made.commit, verdict.outcome, verdict.detail
        commit: str | None = None
        patch: str | None = None
        touches: list[str] = []
        if outcome is VerifyOutcome.DONE:
            touches = self.verdicts.touches_runner(flight.task, candidate)
            commit = self.land(candidate, flight.task, screened)
            if commit is None:  # landed by the process that died, or nothing to land
                base = self.state.base_commit
                commit = self.worktree.find_commit(base, task_marker(flight.task.id))
                if commit is not None:  # what it changed is on the branch: report all of it
                    landed = self.verdicts.screen(flight.task, commit, parent=f"{commit}^")
                    screened = Screen(allowed=landed.allowed + landed.blocked)
        else:
            patch = self.discard(flight.task, flight.attempt, candidate)
        parked_before = len(self.state.parked)
        self.state.route_resumed(
            outcome,
            detail,
            commit,
            patch,
            verdict.cannot_run,
            verdict.evidence,
            touches,
            screened.landed_automation,
        )
        self.state.note_candidate(
            flight.task.id,
            excluded=made.notes.listed_excluded(),
            dropped=made.notes.listed_dropped(),
        )
        parked = self.state.parked[parked_before:]
        self.trace.event(
            "decision",
            decision="resume_verified",
            task=flight.task.id,
            outcome=outcome.value,
            **(
                {"parked": parked[-1].reason, "detail": clip(parked[-1].detail, 300)}
                if parked
                else {}
            ),
        )
        self.checkpoint()

    # -- the harness's own model calls ------------------------------------------------------

    def plan(self) -> None:
        assert self.planner is not None
        self.planner.plan()

    def drift_check(self) -> None:
        assert self.planner is not None
        self.planner.drift_check()
        self.checkpoint()

    def should_replan(self) -> bool:
        has_agent = self.executors.agent is not None
        return self.planner is not None and self.planner.should_replan(has_agent)

    def replan(self) -> None:
        assert self.planner is not None
        self.planner.replan()

    # -- the end -----------------------------------------------------------------------------

    def closing_facts(self) -> ClosingFacts:
        """Everything the terminal result is built from, read once, after the closing call."""
        try:
            head: str | None = self.worktree.head()
            diff_stat = self.worktree.diff_stat(self.state.base_commit)
        except Exception:
            head, diff_stat = None, ""
        return ClosingFacts(
            spec=self.spec,
            state=self.state,
            goal=self.goal,
            budgets_at_stop=self.budgets_at_stop or self.budgets(),
            budgets_end=self.budgets(),
            spent_nanos=self.ledger.spent_nanos,
            tokens_used=self.ledger.tokens_used,
            spend_path=self.run_dir.spend,
            head=head,
            diff_stat=diff_stat,
            worktree=self.run_dir.worktree,
            trace_ref=self.run_dir.trace,
            started_at=self.started_at,
            ended_at=self.clock.now_iso(),
            trace_lines_dropped=self.trace.dropped,
            effects=[r.as_dict() for r in self.effects.for_run(self.state.run_id)]
            + self.state.refused_effects,
            sandbox_identity=(
                None if self.sandbox.sandbox is None else self.sandbox.sandbox.identity
            ),
        )

    def finish(self, stop: Stop) -> TerminalResult:
        """The closing summary (from the wrap-up reserve), result.json, the alert, and the
        final checkpoint recording the stop."""
        partial, wrapup = closing_summary(
            self.gateway, self.ledger, self.spec, self.state, self.goal, stop
        )
        result = finish_result(self.closing_facts(), stop, partial, wrapup)
        if self.persist:
            self.fence.check("result.json")
        result = write_result(self.run_dir, result, self.spec.alerts, self.trace)
        if self.persist:
            self.worktree.drop_checkout()
            # A task held for a person's answer runs again on a resume once its effects are
            # resolved, whatever the ending: such a night keeps its worktree.
            if not result.resumable and not any(p.held_for for p in self.state.parked):
                self.remove_worktree()
            self.state.close(stop.reason)
            try:
                self.checkpoint()
            except Exception as exc:  # the result is already on disk; say so in the trace
                self.trace.event("decision", decision="final_checkpoint_failed", error=repr(exc))
        return result

    def remove_worktree(self) -> None:
        """A night that cannot be resumed needs its worktree no more: remove it from the
        user's repository (the branch stays). Best effort: ``overnight clean`` does it later."""
        try:
            removed = remove_worktree(self.run_dir.worktree)
        except Exception as exc:
            self.trace.event("decision", decision="worktree_kept", error=repr(exc))
            return
        if removed:
            self.trace.event(
                "decision", decision="worktree_removed", path=str(self.run_dir.worktree)
            )

    # -- persistence -----------------------------------------------------------------------

    def checkpoint(self) -> None:
        if not self.persist:
            return
        self.fence.check("a checkpoint")
        self.state.note_totals(self.seconds_used(), self.ledger.spent_usd, self.ledger.tokens_used)
        if self.state.stopped_reason is None:
            self.checkpoints.save(self.state)
        else:  # the run is closing: the snapshot alone then holds the whole state
            self.checkpoints.compact(self.state)

    @cached_property
    def checkpoints(self) -> RunStateStore:
        return RunStateStore(self.run_dir.checkpoint)

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.close()
        self.sandbox.close()  # its uid, for another night of the machine
        self.trace.close()
        self.spend_journal.close()
        self.effects.close()
