"""The run's state: everything a checkpoint carries, and the pure operations on it.

The spend journal is the record of money and tokens, so that a call whose answer was lost in a
crash is still counted (at its worst case); the checkpoint keeps the totals it had seen as a
floor, so a journal emptied or cut short never lowers them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.drift import DriftDecision, DriftVerdict
from overnight.core.resume import VerifyOutcome
from overnight.core.tasks import (
    CommandRun,
    CompletedTask,
    InFlight,
    ParkedTask,
    PrunedTask,
    Task,
)

STATE_KIND = "run_state"


class DriftRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["drift"] = "drift"
    at_task_count: int
    seconds: float
    score: float
    action: Literal["none", "prune", "halt"]
    off_goal_task_ids: list[str]
    reasoning: str


class PredicateRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["predicate"] = "predicate"
    met: bool
    exit_code: int | None
    seconds: float
    detail: str = ""
    timed_out: bool = False
    """Cut at its timeout (its own, or the night's clock when that was nearer)."""
    ran: bool = True
    """False when it was not started: no time was left before the night's time limit."""


class RunState(BaseModel):
    """The checkpoint body. Paths, never file contents."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["run_state"] = "run_state"
    run_id: str
    goal_text: str
    goal_sha: str
    branch: str
    base_commit: str
    queue: list[Task] = Field(default_factory=list)
    in_progress: InFlight | None = None
    completed: list[CompletedTask] = Field(default_factory=list)
    parked: list[ParkedTask] = Field(default_factory=list)
    pruned: list[PrunedTask] = Field(default_factory=list)
    planned: bool = False
    steps_used: int = 0
    seconds_used: float = 0.0
    tasks_finished: int = 0
    tasks_since_drift: int = 0
    no_progress_streak: int = 0
    drift_score: float = 0.0
    drift_history: list[DriftRecord] = Field(default_factory=list)
    goal_met: bool = False
    last_predicate: PredicateRecord | None = None
    laps: int = 0
    resumes: int = 0
    attempts: dict[str, int] = Field(default_factory=dict)
    """Executions of each task so far, across every process of the run: a resumed task goes
    on counting (and its retries with it) from where the process that died left off."""
    artifacts: list[str] = Field(default_factory=list)
    lessons: list[str] = Field(default_factory=list)
    refused_effects: list[dict[str, Any]] = Field(default_factory=list)
    """Effects the ledger refused (already attempted by another run), for the result."""
    agent_worked: bool = False
    """An agent task has worked in the worktree: from then on, in ``[sandbox] mode =
    "auto"``, every command of the night runs sandboxed."""
    sandboxed_commands: int = 0
    unsandboxed_commands: int = 0
    spent_usd: float = 0.0
    """Money spent when this checkpoint was written: a resume counts at least this much,
    whatever the spend journal then says (an emptied journal never resets spend)."""
    tokens_used: int = 0
    """Tokens billed when this checkpoint was written (the same floor for the token cap)."""
    budget: dict[str, Any] | None = None
    """The budget the run was started or explicitly resumed with; a ``spec.json`` that allows
    more than this is refused on resume."""
    stopped_reason: str | None = None

    # -- pure transitions -------------------------------------------------------------------

    def start_task(self, task: Task, rest: list[Task], attempt: int = 1) -> None:
        self.queue = rest
        self.in_progress = InFlight(task=task, attempt=attempt)

    def next_attempt(self, task_id: str) -> int:
        """Count one more execution of ``task_id`` and return its number (1 for the first)."""
        attempt = self.attempts.get(task_id, 0) + 1
        self.attempts[task_id] = attempt
        return attempt

    def finish_done(
        self,
        task: Task,
        commit: str | None,
        attempts: int,
        detail: str,
        via: str = "lap",
        command: CommandRun | None = None,
    ) -> None:
        self.completed.append(
            CompletedTask(
                task=task,
                commit=commit,
                attempts=attempts,
                verify_detail=detail,
                via="resume" if via == "resume" else "lap",
                command=command,
            )
        )
        self.in_progress = None
        self._count_finished(progress=True)

    def finish_parked(
        self,
        task: Task,
        reason: str,
        detail: str,
        patch: str | None,
        protected_changes: list[str] | None = None,
        command: CommandRun | None = None,
    ) -> None:
        self.parked.append(
            ParkedTask(
                task=task,
                reason=reason,
                detail=detail,
                patch=patch,
                protected_changes=protected_changes or [],
                command=command,
            )
        )
        self.in_progress = None
        self._count_finished(progress=False)

    def requeue_front(self, task: Task) -> None:
        self.queue = [task, *self.queue]
        self.in_progress = None

    def _count_finished(self, *, progress: bool) -> None:
        self.tasks_finished += 1
        self.tasks_since_drift += 1
        self.no_progress_streak = 0 if progress else self.no_progress_streak + 1

    def apply_drift(self, verdict: DriftVerdict, decision: DriftDecision, seconds: float) -> None:
        """The only place the drift score is assigned."""
        self.drift_score = verdict.drift_score
        self.tasks_since_drift = 0
        self.queue = decision.kept
        self.pruned += [
            PrunedTask(task=t, drift_score=verdict.drift_score, at_task_count=self.tasks_finished)
            for t in decision.pruned
        ]
        self.drift_history.append(
            DriftRecord(
                at_task_count=self.tasks_finished,
                seconds=seconds,
                score=verdict.drift_score,
                action=decision.action,
                off_goal_task_ids=list(verdict.off_goal_task_ids),
                reasoning=verdict.reasoning,
            )
        )

    def add_lessons(self, lessons: list[str]) -> None:
        for lesson in lessons:
            if lesson not in self.lessons:
                self.lessons.append(lesson)

    def add_tasks(self, tasks: list[Task]) -> list[Task]:
        """Append tasks whose ids are new to this run; return the ones added."""
        known = self.known_ids()
        added: list[Task] = []
        for task in tasks:
            if task.id in known:
                continue
            known.add(task.id)
            added.append(task)
        self.queue = self.queue + added
        return added

    def known_ids(self) -> set[str]:
        ids = {t.id for t in self.queue}
        ids |= {c.task.id for c in self.completed}
        ids |= {p.task.id for p in self.parked}
        ids |= {p.task.id for p in self.pruned}
        if self.in_progress is not None:
            ids.add(self.in_progress.task.id)
        return ids

    def route_resumed(
        self,
        outcome: VerifyOutcome,
        detail: str,
        commit: str | None,
        patch: str | None,
        cannot_run: str = "",
    ) -> None:
        """Route the task that was in flight when the previous process died. ``cannot_run``
        says why a verify could not run (``exit 127: command not found``)."""
        flight = self.in_progress
        if flight is None:
            return
        # A checkpoint written before attempts were counted knows the attempt only here.
        seen = self.attempts.get(flight.task.id, 0)
        self.attempts[flight.task.id] = max(seen, flight.attempt)
        if outcome is VerifyOutcome.DONE:
            self.finish_done(flight.task, commit, flight.attempt, detail, via="resume")
        elif outcome is VerifyOutcome.PARTIAL:
            self.finish_parked(
                flight.task,
                "resumed into a partially applied state; needs a human",
                detail,
                patch,
            )
        elif outcome is VerifyOutcome.CANNOT_RUN:
            self.finish_parked(flight.task, cannot_run_reason_text(cannot_run), detail, patch)
        else:
            self.requeue_front(flight.task)


def cannot_run_reason_text(why: str) -> str:
    """The reason a task is parked with when its verify could not run."""
    return f"the verify command could not run ({why or 'no verdict'})"
