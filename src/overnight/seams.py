"""Every seam between the harness and the outside world, declared together.

A night talks to the kinds of thing it does not own: the model (``ModelClient``), the work of
an agent task (``TaskExecutor``), the tools an agent is handed (``Tool``), the ledger of
external effects (``EffectStore``), time (``Clock``) and, in a fleet, the money cap it shares
with other nights (``SharedCap``). Each is a ``typing.Protocol``: the
harness depends on these shapes only, and ``overnight.night.compose`` is the one place that
names the concrete classes behind them. Test doubles for each ship in ``overnight.testing``
(and ``overnight.clock.FakeClock``).

What an executor or a tool reports about itself is recorded, never trusted: the harness runs
the task's verify and the goal predicate itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from overnight.core.budget import Band
from overnight.core.tasks import CommandRun, Task
from overnight.messages.types import ModelRequest, ModelResponse, ToolSpec
from overnight.process import Confinement

# -- time ------------------------------------------------------------------------------------


@runtime_checkable
class Clock(Protocol):
    """The harness reads and spends time only through a clock."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; never goes backwards."""
        ...

    def now_iso(self) -> str:
        """The wall-clock time, ISO 8601 in UTC, for reports."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a retry's backoff); ``monotonic`` moves on by at least that."""
        ...


# -- the model -------------------------------------------------------------------------------


@runtime_checkable
class ModelClient(Protocol):
    """Anything that answers a ``ModelRequest``. The gateway reserves, prices and records
    each call; an answer that cannot be read is raised as ``UnreadableAnswer``."""

    def complete(self, request: ModelRequest) -> ModelResponse: ...


# -- money shared with other nights ----------------------------------------------------------


@runtime_checkable
class SharedCap(Protocol):
    """A money cap this night shares with others (a fleet's daily cap). Every attempt at a
    model call holds its worst case against it before it is made, in one atomic step that no
    other night can interleave with; after the attempt the hold becomes what was booked (or is
    let go). A hold that would cross the cap is refused: the night ends
    ``BUDGET_EXHAUSTED:fleet_money``. A cap that cannot be reached raises
    ``DependencyUnavailable``."""

    limit_usd: float

    def hold(self, call_id: str, worst_nanos: int) -> float | None:
        """Hold ``worst_nanos`` for the attempt ``call_id``: ``None`` when held, else the
        dollars the shared total would have reached (refused, nothing held)."""
        ...

    def book(self, call_id: str, nanos: int) -> None:
        """The attempt cost ``nanos``: its hold becomes that spend."""
        ...

    def release(self, call_id: str) -> None:
        """The attempt was not billed: its hold is let go."""
        ...

    def spent_usd(self) -> float:
        """The shared total (spent and held) as this night last read it."""
        ...


class FenceLost(BaseException):
    """This process no longer owns the run it drives (a fleet worker whose lease on the night
    expired or was taken over): it must write nothing more. A ``BaseException`` so that no
    handler inside the night absorbs it and goes on writing."""


@runtime_checkable
class Fence(Protocol):
    """Whether this process still owns its run, asked before every write that matters: a
    checkpoint, a commit to the branch, result.json, a spend record. On one machine it never
    fails; a fleet's raises ``FenceLost`` once its lease is gone."""

    def check(self, what: str) -> None:
        """Raise ``FenceLost`` unless this process may still write ``what``."""
        ...


class NoFence:
    """One machine: the run lock is all the ownership there is."""

    def check(self, what: str) -> None:
        return None


# -- tools -----------------------------------------------------------------------------------


class ToolError(Exception):
    """Raised inside a tool; the toolbox turns it into an error outcome the model sees."""


@dataclass(frozen=True)
class ToolContext:
    root: Path
    """The worktree: every path a tool touches resolves inside it (symlinks included)."""
    artifacts: Path
    """Where full outputs are kept when what the model sees is cut short."""
    call_id: str
    """Unique per call within the run (used to name artifacts)."""
    seconds_left: Callable[[], float] = field(default=lambda: float("inf"))
    stop_requested: Callable[[], str | None] = field(default=lambda: None)
    run_id: str = ""
    task_id: str = ""
    effects: EffectStore | None = None
    """The effects ledger for mutating external tools; None: no ledger."""
    effect_key: Callable[[str, Mapping[str, Any]], str] = field(default=lambda _t, _a: "")
    """The run-step key of a call (tool, arguments) in this task: the same on every execution
    of the task, so that a resume reproduces it exactly."""
    on_refused: Callable[[dict[str, Any]], None] = field(default=lambda _refusal: None)
    """Told of an effect the ledger refused (a second delivery), so the run can report it."""
    protected: Callable[[str], str | None] = field(default=lambda _rel: None)
    """Why a worktree path (relative, ``/``) is protected (part of what judges the work),
    or None; the file tools refuse protected paths."""
    confine: Callable[[], Confinement | None] = field(default=lambda: None)
    """The sandbox a command of ``run_command`` runs in; None: unconfined (``[sandbox] mode =
    "off"``, or a test that builds a context by hand)."""
    trace_context: Callable[[str], dict[str, str]] = field(default=lambda _tool: {})
    """The W3C trace context (``traceparent``, maybe ``tracestate``) of the span this call of
    the named tool becomes, for a tool whose server may join the night's trace; empty when the
    night exports no spans."""


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool = False
    artifact: str | None = None
    """Path of the full output when ``content`` was shortened."""
    repeat_key: str | None = None
    """What makes two results the same for the agent's loop detection, when ``content`` also
    carries what differs between identical runs (a duration, a log path); None: ``content``."""


@runtime_checkable
class Tool(Protocol):
    """One tool an agent may call. A tool never raises at the model: every refusal or failure
    comes back as a ``ToolOutcome`` with ``is_error`` set, saying what was wrong and what to do."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    mutating: bool
    """Changes the worktree (reversible through git) or the world."""

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome: ...


@runtime_checkable
class ToolSet(Protocol):
    """The tools one agent task is handed, by name (the spec's allowlist)."""

    def specs(self) -> list[ToolSpec]:
        """What a model request lists: one entry per tool, in a stable order."""
        ...

    def mutating(self, name: str) -> bool:
        """Whether the tool called ``name`` changes the worktree or the world."""
        ...

    def dispatch(self, name: str, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Run one call; an unknown name, bad arguments, a refusal or a crash come back as an
        error outcome the model sees."""
        ...


# -- the effects ledger ----------------------------------------------------------------------

EffectState = Literal["intended", "confirmed", "failed", "unknown"]


@dataclass(frozen=True)
class EffectRow:
    run_id: str
    task_id: str
    step_key: str
    task_key: str | None
    tool: str
    args: dict[str, Any]
    state: EffectState
    result: Any
    error: str | None
    created_at: str
    updated_at: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "key": self.step_key,
            "task_key": self.task_key,
            "task": self.task_id,
            "run_id": self.run_id,
            "state": self.state,
            "args": self.args,
            "detail": self.result,
            "error": self.error,
        }


class DuplicateEffect(Exception):
    """The task-scoped key is already in the ledger: this effect was attempted before."""

    def __init__(self, existing: EffectRow) -> None:
        self.existing = existing
        super().__init__(
            f"{existing.tool} with key {existing.task_key} was already recorded by run "
            f"{existing.run_id} ({existing.state})"
        )


@runtime_checkable
class EffectStore(Protocol):
    """Where every external effect is written down before it is attempted. The run-step key
    is unique (a resume finds its row); a task key, when set, is unique among rows that did
    not fail (a second delivery collides with the first: ``DuplicateEffect``)."""

    def get(self, step_key: str) -> EffectRow | None: ...

    def intend(
        self,
        run_id: str,
        task_id: str,
        step_key: str,
        task_key: str | None,
        tool: str,
        args: dict[str, Any],
    ) -> EffectRow: ...

    def settle(
        self, step_key: str, state: EffectState, result: Any = None, error: str | None = None
    ) -> EffectRow: ...

    def for_run(self, run_id: str) -> list[EffectRow]: ...

    def for_task(self, run_id: str, task_id: str) -> list[EffectRow]: ...

    def resolve(self, item: str, note: str) -> None: ...

    def resolutions(self) -> dict[str, str]: ...

    def close(self) -> None: ...


# -- the work of an agent task ----------------------------------------------------------------


@dataclass(frozen=True)
class ModelAccess:
    """A CLI agent's way to its model for one task: the harness's metering proxy, listening on
    a unix socket on this machine, and a one-time token it admits. The provider's key never
    leaves the harness; every call through the proxy is held against the budgets before it is
    forwarded and booked after."""

    socket: Path
    """The proxy's unix socket (bind it into the sandbox; a bridge there serves TCP)."""
    token: str
    """What the CLI presents as its API key; admitted until ``revoke``."""
    api: str
    """The API the proxy serves to this token: ``anthropic``, ``openai-chat``,
    ``openai-responses``."""
    model: str
    """The model the CLI is to ask for."""
    revoke: Callable[[], None]
    """End the token: every later request with it is refused unforwarded."""
    refused: Callable[[], str | None]
    """Why the proxy refused a call of this token (the budget), once it has; None before."""
    calls: Callable[[], int]
    """Requests forwarded for this token so far."""
    booked_usd: Callable[[], float] = field(default=lambda: 0.0)
    """What the night booked for this token's requests so far (the harness's figure)."""


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
    sleep: Callable[[float], None] = field(default=lambda _s: None)
    """Wait on the run's clock (a fake clock moves; the system clock really waits)."""
    note: Callable[[str, dict[str, Any]], None] = field(default=lambda _kind, _fields: None)
    """Write an event to the run's trace."""
    lessons: list[str] = field(default_factory=list)
    """Lessons kept from earlier tasks of this run."""
    earlier: str = ""
    """What an earlier attempt of this task already did (for a resumed task)."""
    run_id: str = ""
    on_refused: Callable[[dict[str, Any]], None] = field(default=lambda _refusal: None)
    """Where a refused effect (a second delivery) is reported."""
    effects: EffectStore | None = None
    """The run's effects ledger, for mutating external tools."""
    tokens_affordable: Callable[[str], int] = field(default=lambda _model: 0)
    """The money left before the enforcement line, in output tokens of the given model."""
    protected: Callable[[str], str | None] = field(default=lambda _rel: None)
    """Why a worktree path is part of what judges the work (the file tools refuse it)."""
    confine: Callable[[], Confinement | None] = field(default=lambda: None)
    """The sandbox for a command the executor runs in the worktree."""
    trace_context: Callable[[str], dict[str, str]] = field(default=lambda _tool: {})
    """What a tool call's context carries as ``trace_context`` (see ``ToolContext``)."""
    model_access: Callable[[str], ModelAccess] | None = None
    """For a CLI agent: a grant of the metering proxy for this task, serving the named API
    (revoke it when the task's run ends); None when the night has no proxy."""
    task_log: Path | None = None
    """Where the executor keeps what the task's run printed (an artifact, by path)."""
    run_shell: Callable[[str, float, str], CommandRun] | None = None
    """Run a shell command in the worktree, sandboxed as the night's commands are, within a
    timeout, its whole output kept in a log named from the stem (command, timeout_s,
    log_stem); None where the night gives none."""


@dataclass(frozen=True)
class ExecResult:
    status: Literal["finished", "limit_reached", "looping", "gave_up"]
    summary: str = ""
    artifacts: list[str] = field(default_factory=list)
    lessons: list[str] = field(default_factory=list)
    """Specific, falsifiable one-line lessons for later tasks."""
    command: CommandRun | None = None
    """What the command of a command task did (``run_shell``'s record)."""


@runtime_checkable
class TaskExecutor(Protocol):
    """Carries out one agent task's brief in the worktree, calling the model through the
    context. What it returns is recorded, never trusted: the harness runs the task's verify."""

    def execute(self, task: Task, ctx: ExecContext) -> ExecResult: ...


__all__ = [
    "Clock",
    "DuplicateEffect",
    "EffectRow",
    "EffectState",
    "EffectStore",
    "ExecContext",
    "ExecResult",
    "ModelAccess",
    "ModelClient",
    "TaskExecutor",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "ToolSet",
]
