"""The executor seam: how an agent task's brief becomes work in the worktree.

The harness hands the executor a task and a context; the executor may call the model (through
the context, so every call is reserved, priced and traced) and edit files in the worktree.
What it reports about itself is recorded, never trusted: the harness runs the task's verify.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from overnight.core.budget import Band
from overnight.core.errors import ConfigError
from overnight.core.tasks import Task
from overnight.models.types import ModelRequest, ModelResponse

if TYPE_CHECKING:
    from overnight.process import Confinement


@dataclass(frozen=True)
class ExecContext:
    workdir: Path
    """The run's worktree: the only directory the executor may change."""
    artifacts: Path
    """Where the executor may keep large outputs (by path, never in the checkpoint)."""
    model: str
    """The model name to put in requests."""
    attempt: int
    call_model: Callable[[ModelRequest], ModelResponse]
    """Reserve, call, price and trace one model call. Raises ``BudgetRefused`` when refused."""
    stop_requested: Callable[[], str | None]
    """A signal name once the run must drain; the executor should return promptly."""
    budget_band: Callable[[], Band]
    seconds_left: Callable[[], float] = field(default=lambda: float("inf"))
    """Seconds until the wall-clock enforcement line; an executor must stop before it."""
    now: Callable[[], float] = field(default=lambda: 0.0)
    """The run's clock (seconds used so far), for measuring gaps between calls."""
    note: Callable[[str, dict[str, Any]], None] = field(default=lambda _kind, _fields: None)
    """Write an event to the run's trace."""
    lessons: list[str] = field(default_factory=list)
    """Lessons kept from earlier tasks of this run."""
    earlier: str = ""
    """What an earlier attempt of this task already did (for a resumed task)."""
    run_id: str = ""
    on_refused: Callable[[dict[str, Any]], None] = field(default=lambda _refusal: None)
    """Where a refused effect (a second delivery) is reported."""
    effects: Any = None
    """The run's effects ledger (an ``EffectStore``), for mutating external tools."""
    tokens_affordable: Callable[[str], int] = field(default=lambda _model: 0)
    """The money left before the enforcement line, in output tokens of the given model."""
    advance_clock: Callable[[float], None] = field(default=lambda _s: None)
    """Only fake clocks move; scripted executors use this to simulate slow work."""
    protected: Callable[[str], str | None] = field(default=lambda _rel: None)
    """Why a worktree path is part of what judges the work (the file tools refuse it)."""
    confine: Callable[[], Confinement | None] = field(default=lambda: None)
    """The sandbox for a command the executor runs in the worktree."""


@dataclass(frozen=True)
class ExecResult:
    status: Literal["finished", "limit_reached", "looping", "gave_up"]
    summary: str = ""
    artifacts: list[str] = field(default_factory=list)
    lessons: list[str] = field(default_factory=list)
    """Specific, falsifiable one-line lessons for later tasks."""


@runtime_checkable
class TaskExecutor(Protocol):
    def execute(self, task: Task, ctx: ExecContext) -> ExecResult: ...


def load_executor(target: str) -> TaskExecutor:
    from overnight.models.seam import resolve_target

    obj = resolve_target(target, "executor.target")
    if isinstance(obj, type):
        try:
            obj = obj()
        except Exception as exc:
            raise ConfigError("executor.target", f"cannot construct {target}: {exc}") from exc
    if not isinstance(obj, TaskExecutor):
        raise ConfigError(
            "executor.target",
            f"{target!r} has no execute(task, context) method",
            "point it at an object (or class) implementing the executor seam",
        )
    return obj
