"""The run's state: everything a checkpoint carries, and the pure operations on it.

The spend journal is the record of money and tokens, so that a call whose answer was lost in a
crash is still counted (at its worst case); the checkpoint keeps the totals it had seen as a
floor, so a journal emptied or cut short never lowers them.

A save writes only what changed since the last one (``RunState.take_delta``): the fields that
hold one value each, the new items of the lists that only grow, the operations on the queue,
the attempts counted. ``apply_delta`` replays such a change on the JSON of the state before it.
The bookkeeping this needs is pure and lives beside the state; the files are ``store``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Self, cast

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter

from overnight.core.drift import DriftDecision, DriftVerdict
from overnight.core.evidence import BaseTests, Evidence
from overnight.core.resume import VerifyOutcome
from overnight.core.routing import Route, route_verdict
from overnight.core.tasks import (
    CommandRun,
    CompletedTask,
    InFlight,
    ParkedTask,
    PrunedTask,
    QueueIndex,
    Task,
)

STATE_KIND = "run_state"


#: The lists that only grow during a run: a save writes their new items. An item once added
#: is never changed (a list assigned anew, or cut, is written whole).
GROWING = (
    "completed",
    "parked",
    "pruned",
    "drift_history",
    "lessons",
    "artifacts",
    "refused_effects",
)


class QueueOp(BaseModel):
    """One change of the queue: ``take`` the task at ``at`` (whose id is ``task_id``),
    ``append`` or ``prepend`` ``tasks``, ``drop`` the tasks ``ids``, ``replace`` it whole."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["queue_op"] = "queue_op"
    op: Literal["take", "append", "prepend", "drop", "replace"]
    at: int | None = None
    task_id: str | None = None
    tasks: list[dict[str, Any]] = Field(default_factory=list)
    """As JSON, as they are in the saved state."""
    ids: list[str] = Field(default_factory=list)


class StateDelta(BaseModel):
    """What changed in a run state between two saves, as JSON."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["state_delta"] = "state_delta"
    values: dict[str, Any] = Field(default_factory=dict)
    """Fields written whole: those holding one value, and any other one that could not be
    followed change by change."""
    appended: dict[str, list[Any]] = Field(default_factory=dict)
    """New items at the end of the ``GROWING`` lists."""
    queue: list[QueueOp] = Field(default_factory=list)
    attempts: dict[str, int] = Field(default_factory=dict)
    """The attempt counts that changed."""

    def is_empty(self) -> bool:
        return not (self.values or self.appended or self.queue or self.attempts)


@dataclass
class _Saved:
    """The state as the last save left it: the values of its one-value fields, and the
    identity and length of everything that grows."""

    values: dict[str, Any]
    lengths: dict[str, int]
    lists: dict[str, list[Any]]
    lasts: dict[str, object]
    attempts: dict[str, int]
    attempts_length: int


@dataclass
class _QueueLog:
    """The queue operations since the last save, and the list they were made on."""

    queue: list[Task] | None = None
    length: int = 0
    ops: list[QueueOp] = field(default_factory=list)
    lost: bool = True
    """The queue changed in a way the log could not follow: the next save writes it whole."""


class StateBooks:
    """A run state's bookkeeping: the queue index and what changed since the last save.

    It is not part of the state: two states are equal whatever their books say, and a deep
    copy of a state starts with empty books (its first save is then whole)."""

    def __init__(self) -> None:
        self.index = QueueIndex()
        self.saved: _Saved | None = None
        self.queue_log = _QueueLog()
        self.attempt_ids: set[str] = set()
        self.new_attempt_ids = 0
        self.saved_as = 0
        """The number of the save that last wrote (or read) the state; 0 before any."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StateBooks)

    __hash__ = None  # type: ignore[assignment]

    def __copy__(self) -> Self:
        return type(self)()

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return type(self)()

    def note_queue(self, queue: list[Task], op: QueueOp, change: int) -> None:
        """``op`` changed ``queue``'s length by ``change``."""
        log = self.queue_log
        if self.saved is None or log.lost:
            return
        if queue is log.queue and len(queue) == log.length + change:
            log.ops.append(op)
            log.length += change
        else:
            log.lost = True

    def note_attempt(self, task_id: str, new: bool) -> None:
        if self.saved is not None:
            self.attempt_ids.add(task_id)
            self.new_attempt_ids += int(new)


class DriftRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["drift"] = "drift"
    at_task_count: int
    seconds: float
    score: float
    action: Literal["none", "prune", "halt"]
    off_goal_task_ids: list[str]
    reasoning: str
    automation_shown: list[str] = Field(default_factory=list)
    """What the judge was shown of the automation paths the night's tasks changed."""


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
    evidence: Evidence = "exit_code_only"
    """``tests``: judged per test on the harness's reporter (pytest); ``exit_code_only``:
    on the exit code alone."""
    verdict: str = ""
    """For ``tests``: the judgement in one line (``met: 3 passed``, ``not met: ...``)."""
    allowed: list[str] = Field(default_factory=list)
    """Tests that stayed skipped as they were on the base commit, each with where and why."""
    stayed_skipped: list[str] = Field(default_factory=list)
    """The same, grouped by reason with counts (``33: numpy is not installed``)."""
    at_start: bool = False
    """Judged by the start check, on the base commit, from the run that is also the base
    record: the night's first predicate run is that one."""


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
    """Changed through the methods below, or by assigning another list: a save then writes
    the operations (or the new list), never the queue as it stands."""
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
    base_tests: dict[str, BaseTests] = Field(default_factory=dict)
    """Per pytest check command: what it collected on the base commit (each must pass) and
    which tests may stay skipped; the predicate's is recorded before the night starts."""
    start_notes: list[str] = Field(default_factory=list)
    """What the check before the night found worth saying (the predicate's outcome differs
    in the user's checkout)."""
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

    _books: StateBooks = PrivateAttr(default_factory=StateBooks)

    # -- pure transitions -------------------------------------------------------------------

    def start_lap(self) -> Task:
        """Count a lap and take the task of highest value (the earliest among equals) off the
        queue; raises ``IndexError`` when the queue is empty."""
        at, task = self._books.index.take(self.queue)
        self.laps += 1
        self._books.note_queue(self.queue, QueueOp(op="take", at=at, task_id=task.id), -1)
        return task

    def start_task(self, task: Task) -> int:
        """Mark ``task`` IN_PROGRESS for its next attempt (attempts count across the run's
        processes) and count the step; return the attempt's number."""
        attempt = self.next_attempt(task.id)
        self.in_progress = InFlight(task=task, attempt=attempt)
        self.steps_used += 1
        if task.brief is not None:
            self.agent_worked = True  # from here, auto mode sandboxes every command
        return attempt

    def next_attempt(self, task_id: str) -> int:
        """Count one more execution of ``task_id`` and return its number (1 for the first)."""
        attempt = self.attempts.get(task_id, 0) + 1
        self._set_attempts(task_id, attempt)
        return attempt

    def _set_attempts(self, task_id: str, count: int) -> None:
        self._books.note_attempt(task_id, new=task_id not in self.attempts)
        self.attempts[task_id] = count

    def finish_done(
        self,
        task: Task,
        commit: str | None,
        attempts: int,
        detail: str,
        via: str = "lap",
        command: CommandRun | None = None,
        evidence: Evidence = "exit_code_only",
        touches_runner: list[str] | None = None,
        excluded: list[str] | None = None,
        dropped: list[str] | None = None,
        automation: list[str] | None = None,
    ) -> None:
        self.completed.append(
            CompletedTask(
                task=task,
                commit=commit,
                attempts=attempts,
                verify_detail=detail,
                via="resume" if via == "resume" else "lap",
                command=command,
                evidence=evidence,
                touches_runner=list(touches_runner or []),
                automation=list(automation or []),
                excluded=excluded or [],
                dropped=dropped or [],
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
        held_for: list[str] | None = None,
        excluded: list[str] | None = None,
        dropped: list[str] | None = None,
        automation_changes: list[str] | None = None,
    ) -> None:
        self.parked.append(
            ParkedTask(
                task=task,
                reason=reason,
                detail=detail,
                patch=patch,
                protected_changes=protected_changes or [],
                automation_changes=list(automation_changes or []),
                command=command,
                held_for=list(held_for or []),
                excluded=excluded or [],
                dropped=dropped or [],
            )
        )
        self.in_progress = None
        self._count_finished(progress=False)

    def hold(
        self,
        task: Task,
        reason: str,
        detail: str,
        patch: str | None,
        held_for: list[str],
        command: CommandRun | None = None,
    ) -> None:
        """Park ``task`` until a person resolves the effects ``held_for`` (run-step keys)."""
        self.finish_parked(task, reason, detail, patch, command=command, held_for=held_for)

    def release_held(self, settled: set[str]) -> list[Task]:
        """Put back at the front of the queue every task held only for effects now in
        ``settled`` (resolved by a person): it runs again. A person's answer is new input, so
        the no-progress count starts again."""
        released = [p for p in self.parked if p.held_for and set(p.held_for) <= settled]
        if not released:
            return []
        self.parked = [p for p in self.parked if all(p is not r for r in released)]
        for p in reversed(released):
            self.requeue_front(p.task)
        self.no_progress_streak = 0
        return [p.task for p in released]

    def note_candidate(self, task_id: str, excluded: list[str], dropped: list[str]) -> None:
        """Record on ``task_id``'s newest record what its candidate left out."""
        records: list[CompletedTask | ParkedTask] = [*self.completed, *self.parked]
        for record in reversed(records):
            if record.task.id == task_id:
                record.excluded, record.dropped = list(excluded), list(dropped)
                return

    def requeue_front(self, task: Task) -> None:
        self.queue.insert(0, task)
        self._books.index.prepended(self.queue, task)
        op = QueueOp(op="prepend", tasks=[task.model_dump(mode="json")])
        self._books.note_queue(self.queue, op, 1)
        self.in_progress = None

    def _count_finished(self, *, progress: bool) -> None:
        self.tasks_finished += 1
        self.tasks_since_drift += 1
        self.no_progress_streak = 0 if progress else self.no_progress_streak + 1

    def apply_drift(
        self,
        verdict: DriftVerdict,
        decision: DriftDecision,
        seconds: float,
        automation_shown: list[str] | None = None,
    ) -> None:
        """The only place the drift score is assigned."""
        self.drift_score = verdict.drift_score
        self.tasks_since_drift = 0
        self._keep_in_queue(decision.kept, decision.pruned)
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
                automation_shown=list(automation_shown or []),
            )
        )

    def automation_touched(self) -> list[dict[str, Any]]:
        """The night's tasks that changed what runs by itself, for the drift judge: landed
        (the spec allowing it) or parked, with the paths."""
        rows: list[dict[str, Any]] = [
            {"id": c.task.id, "title": c.task.title, "paths": c.automation, "outcome": "landed"}
            for c in self.completed
            if c.automation
        ]
        rows += [
            {
                "id": p.task.id,
                "title": p.task.title,
                "paths": p.automation_changes,
                "outcome": "parked",
            }
            for p in self.parked
            if p.automation_changes
        ]
        return rows

    def _keep_in_queue(self, kept: list[Task], pruned: list[Task]) -> None:
        """The queue becomes ``kept``: what it was without ``pruned``, when that is so."""
        if not pruned and kept == self.queue:
            return  # nothing pruned: the queue stays as it is
        ids = [t.id for t in pruned]
        gone = set(ids)
        dropped = len(kept) + len(pruned) == len(self.queue) and len(gone) == len(ids)
        op = QueueOp(op="drop", ids=ids)
        if not dropped or any(t.id in gone for t in kept):
            op = QueueOp(op="replace", tasks=[t.model_dump(mode="json") for t in kept])
        before = len(self.queue)
        self.queue[:] = kept
        self._books.index.forget()
        self._books.note_queue(self.queue, op, len(kept) - before)

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
        if added:
            self.queue.extend(added)
            self._books.index.appended(self.queue, added)
            op = QueueOp(op="append", tasks=[t.model_dump(mode="json") for t in added])
            self._books.note_queue(self.queue, op, len(added))
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
        evidence: Evidence = "exit_code_only",
        touches_runner: list[str] | None = None,
        automation: list[str] | None = None,
    ) -> None:
        """Route the task that was in flight when the previous process died. ``cannot_run``
        says why a verify could not run (``exit 127: command not found``)."""
        flight = self.in_progress
        if flight is None:
            return
        # A checkpoint written before attempts were counted knows the attempt only here.
        seen = self.attempts.get(flight.task.id, 0)
        self._set_attempts(flight.task.id, max(seen, flight.attempt))
        routed = route_verdict(outcome, cannot_run=cannot_run, resumed=True)
        if routed.route is Route.LAND:
            self.finish_done(
                flight.task,
                commit,
                flight.attempt,
                detail,
                via="resume",
                evidence=evidence,
                touches_runner=touches_runner,
                automation=automation,
            )
        elif routed.route is Route.PARK:
            self.finish_parked(flight.task, routed.reason, detail, patch)
        else:
            self.requeue_front(flight.task)

    def record_predicate(self, record: PredicateRecord) -> None:
        """The goal predicate ran (or could not): the only place ``goal_met`` is assigned."""
        self.goal_met = record.met
        self.last_predicate = record

    def count_command(self, *, sandboxed: bool) -> None:
        if sandboxed:
            self.sandboxed_commands += 1
        else:
            self.unsandboxed_commands += 1

    def note_totals(self, seconds_used: float, spent_usd: float, tokens_used: int) -> None:
        """What the clock and the ledger say, kept as floors for the next process."""
        self.seconds_used = seconds_used
        self.spent_usd = spent_usd
        self.tokens_used = tokens_used

    def close(self, stop_reason: str) -> None:
        self.stopped_reason = stop_reason

    # -- what a save writes -----------------------------------------------------------------

    def saved_as(self) -> int:
        """The number of the save that last wrote this state or that it was read at (saves
        are numbered along the run); 0 before any."""
        return self._books.saved_as

    def note_saved_as(self, seq: int) -> None:
        self._books.saved_as = seq

    def mark_loaded(self, seq: int) -> None:
        """The state was just read as of save ``seq``: its next save writes it whole."""
        self._books.saved = None
        self._books.saved_as = seq

    def take_delta(self) -> StateDelta | None:
        """What changed since the last save (or ``mark_saved``), and from now on the state as
        it is counts as saved. ``None`` when there was no save to compare with: the state must
        then be written whole."""
        books = self._books
        saved = books.saved
        values = self.model_dump(mode="json", include=set(SINGLE_VALUED))
        if saved is None:
            books.saved = self._saved_now(values)
            return None
        delta = StateDelta()
        delta.values = {k: v for k, v in values.items() if saved.values.get(k, _UNSET) != v}
        for name in GROWING:
            items: list[Any] = getattr(self, name)
            length = saved.lengths[name]
            grew = (
                items is saved.lists[name]
                and len(items) >= length
                and (length == 0 or items[length - 1] is saved.lasts[name])
            )
            if not grew:
                delta.values[name] = _LISTS[name].dump_python(items, mode="json")
            elif len(items) > length:
                delta.appended[name] = _LISTS[name].dump_python(items[length:], mode="json")
        log = books.queue_log
        if log.lost or self.queue is not log.queue or len(self.queue) != log.length:
            tasks = [t.model_dump(mode="json") for t in self.queue]
            delta.queue = [QueueOp(op="replace", tasks=tasks)]
        else:
            delta.queue = list(log.ops)
        counted = len(saved.attempts) == saved.attempts_length + books.new_attempt_ids
        if self.attempts is saved.attempts and counted:
            delta.attempts = {k: self.attempts[k] for k in books.attempt_ids}
        else:
            delta.values["attempts"] = dict(self.attempts)
        books.saved = self._saved_now(values)
        return delta

    def mark_saved(self, body: dict[str, Any] | None = None) -> None:
        """The state as it is was just written whole (``body``: its JSON, when at hand)."""
        if body is None:
            values = self.model_dump(mode="json", include=set(SINGLE_VALUED))
        else:
            values = {k: body[k] for k in SINGLE_VALUED}
        self._books.saved = self._saved_now(values)

    def _saved_now(self, values: dict[str, Any]) -> _Saved:
        books = self._books
        books.queue_log = _QueueLog(queue=self.queue, length=len(self.queue), lost=False)
        books.attempt_ids = set()
        books.new_attempt_ids = 0
        lists = {name: getattr(self, name) for name in GROWING}
        return _Saved(
            values=values,
            lengths={name: len(items) for name, items in lists.items()},
            lists=lists,
            lasts={name: items[-1] if items else _UNSET for name, items in lists.items()},
            attempts=self.attempts,
            attempts_length=len(self.attempts),
        )


_UNSET = object()

#: The fields holding one value each (scalars, the task in flight, the last predicate, the
#: budget): a save writes those that changed, whole.
SINGLE_VALUED = tuple(
    name for name in RunState.model_fields if name not in (*GROWING, "queue", "attempts")
)

_LISTS: dict[str, TypeAdapter[list[Any]]] = {
    name: TypeAdapter[list[Any]](cast("type[list[Any]]", RunState.model_fields[name].annotation))
    for name in GROWING
}


def apply_delta(body: dict[str, Any], delta: StateDelta) -> None:
    """Replay ``delta`` on ``body``, the JSON of the state it was taken from. Raises
    ``ValueError`` when it does not fit (a field the state lacks, a queue operation on a task
    that is not where it says): the two do not belong together."""
    for name, value in delta.values.items():
        if name not in RunState.model_fields:
            raise ValueError(f"the run state has no field {name!r}")
        body[name] = value
    for name, items in delta.appended.items():
        if name not in GROWING or not isinstance(body.get(name), list):
            raise ValueError(f"cannot append to {name!r}")
        body[name].extend(items)
    queue = body.get("queue")
    if delta.queue and not isinstance(queue, list):
        raise ValueError("the state has no queue list")
    for op in delta.queue:
        assert isinstance(queue, list)
        queue = _apply_queue_op(queue, op)
        body["queue"] = queue
    if delta.attempts:
        attempts = body.get("attempts")
        if not isinstance(attempts, dict):
            raise ValueError("the state has no attempts map")
        attempts.update(delta.attempts)


def _apply_queue_op(queue: list[Any], op: QueueOp) -> list[Any]:
    if op.op == "take":
        at = op.at
        if at is None or not 0 <= at < len(queue):
            raise ValueError(f"take at {at} from a queue of {len(queue)}")
        found = queue[at].get("id") if isinstance(queue[at], dict) else None
        if found != op.task_id:
            raise ValueError(f"take {op.task_id!r} at {at} found {found!r}")
        del queue[at]
    elif op.op == "append":
        queue.extend(op.tasks)
    elif op.op == "prepend":
        queue[:0] = op.tasks
    elif op.op == "drop":
        gone = set(op.ids)
        kept = [t for t in queue if not (isinstance(t, dict) and t.get("id") in gone)]
        if len(queue) - len(kept) != len(op.ids):
            raise ValueError(f"drop {op.ids} from a queue that does not hold them once each")
        queue[:] = kept
    else:
        return list(op.tasks)
    return queue
