"""The tool seam. A tool never raises at the model: every refusal or failure comes back as a
``ToolOutcome`` with ``is_error`` set and a message that says what was wrong and what to do."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from overnight.process import Confinement


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
    effects: Any = None
    """The effects ledger (an ``EffectStore``) for mutating external tools; None: no ledger."""
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
    name: str
    description: str
    input_schema: Mapping[str, Any]
    mutating: bool
    """Changes the worktree (reversible through git) or the world."""

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome: ...
