"""Tasks, the queue, and the records a finished task leaves behind."""

from __future__ import annotations

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
    """A command task's command on its last attempt; None for an agent task, and for a task
    verified on resume (the process that ran the command died before it could say)."""


class ParkedTask(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["parked"] = "parked"
    task: Task
    reason: str
    detail: str = ""
    patch: str | None = None
    protected_changes: list[str] = Field(default_factory=list)
    """What the task changed of what judges the work (``[predicate] protect``)."""
    command: CommandRun | None = None
    """A command task's command on its last attempt (as for ``CompletedTask``)."""


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


def pop_highest(queue: list[Task]) -> tuple[Task, list[Task]]:
    """The task of highest value, the earliest among equals; and the queue without it."""
    if not queue:
        raise IndexError("pop from an empty queue")
    best = max(range(len(queue)), key=lambda i: (queue[i].value, -i))
    return queue[best], queue[:best] + queue[best + 1 :]
