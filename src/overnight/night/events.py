"""What a night tells its caller while it runs: one typed event per line of its trace.

Every event has the ``kind`` of its trace line, ``t`` (seconds into the night) and ``at`` (the
wall-clock time); the fields each kind always carries are typed, and whatever else the line
holds is kept as extra fields. An embedder reads them through ``on_event``; the trace file
holds the same records as JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class TraceEvent(BaseModel):
    """A trace line of a kind no narrower class describes."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: str
    t: float = 0.0
    at: str = ""

    def field(self, name: str, default: Any = None) -> Any:
        """A field of the line, typed or extra."""
        extra = self.model_extra or {}
        return getattr(self, name) if name in type(self).model_fields else extra.get(name, default)


class RunCreated(TraceEvent):
    """The run directory, branch and worktree exist; nothing has run yet."""

    kind: Literal["run_created"] = "run_created"
    run_id: str
    run_dir: Path
    branch: str


class TaskEvent(TraceEvent):
    """A task attempt started, or its verify gave a verdict."""

    kind: Literal["task"] = "task"
    event: str
    task: str
    attempt: int | None = None
    outcome: str | None = None


class Decision(TraceEvent):
    """Something the harness decided: a stop, a task finished or parked, a refused call, a
    drift verdict acted on, a resume."""

    kind: Literal["decision"] = "decision"
    decision: str
    task: str | None = None
    reason: str | None = None


class ToolCall(TraceEvent):
    """A command, verify or predicate the harness ran, or a tool the agent called."""

    kind: Literal["tool_call"] = "tool_call"
    tool: str
    task: str | None = None
    exit_code: int | None = None


class ModelCall(TraceEvent):
    """One attempt at a model call, with what it was booked."""

    kind: Literal["model_call"] = "model_call"
    purpose: str
    model: str
    attempt: int = 1
    cost_usd: float | None = None
    reserved_usd: float | None = None


class ModelRetry(TraceEvent):
    """A provider failure that will be tried again after ``wait_s``."""

    kind: Literal["model_retry"] = "model_retry"
    error: str
    status: int | None = None
    wait_s: float = 0.0


Event = RunCreated | TaskEvent | Decision | ToolCall | ModelCall | ModelRetry | TraceEvent
"""Every event a night reports."""

_BY_KIND: dict[str, type[TraceEvent]] = {
    cls.model_fields["kind"].default: cls
    for cls in (RunCreated, TaskEvent, Decision, ToolCall, ModelCall, ModelRetry)
}


def event_of(record: dict[str, Any]) -> Event:
    """The typed event for one trace record; a record whose fields do not fit its kind's
    class (a line written by another version) is kept whole as a ``TraceEvent``."""
    cls = _BY_KIND.get(str(record.get("kind")), TraceEvent)
    try:
        return cls.model_validate(record)
    except ValueError:
        return TraceEvent.model_validate(record)
