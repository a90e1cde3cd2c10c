"""Tasks, the queue, and the records a finished task leaves behind."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Task(BaseModel):
    """One unit of work. A command task runs a shell command; an agent task hands its brief to
    the executor. Either way the harness, never the model, runs ``verify``: exit 0 done, 1 not
    done, a check that could not run (126, 127; pytest's 4 and 5) parked as such, anything
    else partially applied (``overnight.core.resume``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["task"] = "task"
    id: str = Field(min_length=1, max_length=120, pattern=r"^[A-Za-z0-9_.:-]+$")
    title: str = ""
    command: str | None = None
    brief: str | None = None
    verify: str = Field(min_length=1)
    value: float = 0.0
    retries: int | None = Field(default=None, ge=0, le=20)
    timeout_s: float = Field(default=600.0, gt=0)
    mechanical: bool = False
    origin: Literal["spec", "plan", "replan", "resume"] = "spec"

    @model_validator(mode="after")
    def _one_body(self) -> Task:
        if (self.command is None) == (self.brief is None):
            raise ValueError("a task has exactly one of `command` (a shell command) or `brief`")
        return self

    @property
    def is_command(self) -> bool:
        return self.command is not None

    @property
    def model_written(self) -> bool:
        """Planned or replanned by a model: its verify is a model's text."""
        return self.origin in ("plan", "replan")

    def label(self) -> str:
        return f"{self.id} {self.title}".strip() if self.title else self.id


class CommandRun(BaseModel):
    """How a command task's command ended on the attempt that decided the task's fate. Its
    verify decides whether the task is done; this says what the command itself did, so that a
    command that timed out or failed is never shown as a clean success."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["command_run"] = "command_run"
    exit_code: int | None
    """None when the harness ended it (``timed_out``) or a stop interrupted it."""
    timed_out: bool = False
    timeout_s: float | None = None
    """The timeout it ran under (its own ``timeout_s``, or less when the night's clock was
    nearer)."""
    seconds: float = 0.0
    log: str | None = None
    """Path of its full output."""


class CompletedTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["completed"] = "completed"
    task: Task
    commit: str | None
    attempts: int
    verify_detail: str = ""
    via: Literal["lap", "resume"] = "lap"
    command: CommandRun | None = None
    excluded: list[str] = Field(default_factory=list)
    """Untracked generated paths the candidate left out (the built-in excludes and ``[run]
    exclude``; a directory ends with ``/``)."""
    dropped: list[str] = Field(default_factory=list)
    """Tracked generated files whose change the candidate dropped (the base version stays)."""
    """A command task's command on its last attempt; None for an agent task, and for a task
    verified on resume (the process that ran the command died before it could say)."""
    evidence: Literal["tests", "exit_code_only"] = "exit_code_only"
    """What its verify was judged on: ``tests`` (each test reported passed, pytest) or
    ``exit_code_only``."""
    touches_runner: list[str] = Field(default_factory=list)
    """Files of an agent task's commit that reach into the test runner or the process's end
    (``pytest``, ``atexit``, ``os._exit``, ...): for a person to read."""
    automation: list[str] = Field(default_factory=list)
    """Automation paths its commit changed (CI, hooks, editor or agent configuration), each
    allowed by ``[predicate] allow_automation``: shown on the report's first screen."""


class ParkedTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["parked"] = "parked"
    task: Task
    reason: str
    detail: str = ""
    patch: str | None = None
    protected_changes: list[str] = Field(default_factory=list)
    """What the task changed of what judges the work (``[predicate] protect``)."""
    automation_changes: list[str] = Field(default_factory=list)
    """The automation paths it changed that the spec does not allow (``overnight.core.
    automation``): what runs by itself on a person's machine or in CI."""
    command: CommandRun | None = None
    """A command task's command on its last attempt (as for ``CompletedTask``)."""
    held_for: list[str] = Field(default_factory=list)
    """The run-step keys of the effects of unknown outcome the task is held for: it does not
    land, whatever its verify said, and a resume runs it again only once a person has
    resolved every one of them (``overnight review resolve``)."""
    excluded: list[str] = Field(default_factory=list)
    """Untracked generated paths the candidate left out (the built-in excludes and ``[run]
    exclude``; a directory ends with ``/``)."""
    dropped: list[str] = Field(default_factory=list)
    """Tracked generated files whose change the candidate dropped (the base version stays)."""


class PrunedTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["pruned"] = "pruned"
    task: Task
    drift_score: float
    at_task_count: int


class InFlight(BaseModel):
    """The task between its IN_PROGRESS checkpoint and its outcome."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["in_progress"] = "in_progress"
    task: Task
    attempt: int = 1


def _position(ordered: Sequence[float], item: float) -> int:
    """The first position in the ascending ``ordered`` whose item is not below ``item``."""
    lo, hi = 0, len(ordered)
    while lo < hi:
        mid = (lo + hi) // 2
        if ordered[mid] < item:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _priority(task: Task) -> float:
    # NaN orders below everything, so that it cannot scramble the order of the others.
    return task.value if task.value == task.value else float("-inf")


class QueueIndex:
    """Finds the task of highest value in the queue, the earliest among equals, without
    looking at every task: a lap takes one task off a queue that may hold thousands.

    Each queued task has a rank, ascending along the queue; the ranks of each value wait in
    order in that value's line, and the values are kept sorted. The index follows the list it
    was built on through ``take``, ``appended`` and ``prepended``, and is told to ``forget``
    it after any other change the state makes; a queue changed outside the state (another
    list assigned, or its length changed) is indexed again from scratch on the next ``take``.
    """

    def __init__(self) -> None:
        self._queue: list[Task] | None = None
        self._length = 0
        self._ranks: list[int] = []
        self._lines: dict[float, deque[int]] = {}
        self._values: list[float] = []

    def follows(self, queue: list[Task]) -> bool:
        return queue is self._queue and len(queue) == self._length

    def forget(self) -> None:
        """The queue changed in a way the index does not follow: build it again when next
        needed."""
        self._queue = None

    def rebuild(self, queue: list[Task]) -> None:
        self._queue, self._length = queue, len(queue)
        self._ranks = list(range(len(queue)))
        self._lines = {}
        for rank, task in enumerate(queue):
            self._lines.setdefault(_priority(task), deque()).append(rank)
        self._values = sorted(self._lines)

    def take(self, queue: list[Task]) -> tuple[int, Task]:
        """Remove the task of highest value (the earliest among equals) from ``queue``;
        return where it was and the task."""
        if not queue:
            raise IndexError("take from an empty queue")
        if not self.follows(queue):
            self.rebuild(queue)
        value = self._values[-1]
        line = self._lines[value]
        rank = line.popleft()
        if not line:
            del self._lines[value]
            self._values.pop()
        at = _position(self._ranks, rank)
        del self._ranks[at]
        task = queue.pop(at)
        self._length -= 1
        return at, task

    def appended(self, queue: list[Task], tasks: list[Task]) -> None:
        """``tasks`` were appended to ``queue``."""
        if not self.follows_before(queue, len(tasks)):
            self.forget()
            return
        last = self._ranks[-1] if self._ranks else -1
        for offset, task in enumerate(tasks, start=1):
            self._ranks.append(last + offset)
            self._line(task).append(last + offset)
        self._length += len(tasks)

    def prepended(self, queue: list[Task], task: Task) -> None:
        """``task`` was put at the front of ``queue``."""
        if not self.follows_before(queue, 1):
            self.forget()
            return
        first = self._ranks[0] - 1 if self._ranks else 0
        self._ranks.insert(0, first)
        self._line(task).appendleft(first)
        self._length += 1

    def follows_before(self, queue: list[Task], added: int) -> bool:
        """Whether the index followed ``queue`` until ``added`` tasks were added to it."""
        return queue is self._queue and len(queue) == self._length + added

    def _line(self, task: Task) -> deque[int]:
        value = _priority(task)
        line = self._lines.get(value)
        if line is None:
            line = self._lines[value] = deque()
            self._values.insert(_position(self._values, value), value)
        return line
