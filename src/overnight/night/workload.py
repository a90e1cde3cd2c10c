"""A run's workload, as the estimate learns from it: what each task's model calls were.

``workload_facts`` folds a run's trace (every model call with its exact usage and start time,
every task start, tool seconds) and its terminal result into a ``WorkloadFacts``: small,
versioned, written into the run index at every ending and rebuilt from the trace of an older
run. Pure: the caller reads the files.

Each model call belongs to the task that last started before it; a call before any task
(the plan) or after the stop (the closing summary) belongs to the night. So a task carries
its own execute and compaction calls and the drift check and replan that follow it, and a
night of N tasks is, for the estimate, its night calls plus N tasks' calls.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from statistics import fmean
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from overnight.core.budget import Usage, to_nanos, to_usd

FACTS_VERSION = 1

#: Who answered a run's model calls (``run.json``'s ``model_source``).
ModelSource = Literal["spec", "caller", "replay", ""]

#: The harness's own calls, as opposed to the agent's (``execute``).
HARNESS_PURPOSES = ("plan", "replan", "drift", "compact", "verify", "summarize")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class CallFacts(_Strict):
    """One booked model call."""

    purpose: str
    """plan, execute, verify, drift, replan, compact or summarize."""
    model: str
    """The model the call was made to and billed for."""
    input: int = 0
    """Uncached input tokens."""
    output: int = 0
    """Output tokens, reasoning included."""
    cache_read: int = 0
    """Input tokens read from the prompt cache."""
    cache_write_5m: int = 0
    """Input tokens written to the cache with the 5-minute TTL."""
    cache_write_1h: int = 0
    """Input tokens written to the cache with the 1-hour TTL."""
    usd: float = 0.0
    """What the call was booked at."""
    usage_known: bool = True
    """False when the call was booked at its worst case with no usage: its tokens are zero
    here and only ``usd`` is known."""
    at: float = 0.0
    """The night's seconds when the call started."""

    @property
    def usage(self) -> Usage:
        return Usage(
            self.input, self.output, self.cache_read, self.cache_write_5m, self.cache_write_1h
        )

    @property
    def input_tokens(self) -> int:
        return self.usage.input_tokens


class TaskFacts(_Strict):
    """One task's model calls and tool seconds."""

    id: str
    outcome: Literal["verified", "parked", "unfinished"]
    """Verified and committed, parked for a human, or neither when the night stopped."""
    attempts: int = 1
    """Times the task was started."""
    calls: tuple[CallFacts, ...] = ()
    """Every call while the task was the latest started: its execute and compaction calls,
    and the drift check and replan that followed it, in order."""
    command_seconds: float = 0.0
    """Seconds in the agent's commands (``run_command``)."""
    verify_seconds: float = 0.0
    """Seconds in the task's verify command."""

    @property
    def usd(self) -> float:
        return to_usd(sum(to_nanos(c.usd) for c in self.calls))

    @property
    def agent_calls(self) -> tuple[CallFacts, ...]:
        return tuple(c for c in self.calls if c.purpose == "execute")


class Workspace(_Strict):
    """Which repository a run worked on."""

    path: str
    """The workspace directory."""
    remote: str | None = None
    """Its ``origin`` remote, if any."""
    root_tree: str | None = None
    """The tree of its first commit: the same for every copy or clone of one repository."""

    def same_as(self, other: Workspace) -> bool:
        if self.path == other.path:
            return True
        if self.remote is not None and self.remote == other.remote:
            return True
        return self.root_tree is not None and self.root_tree == other.root_tree


class Summary(_Strict):
    """The figures a reader asks of a workload first, derived from its calls."""

    calls_per_task: tuple[int, ...]
    """Agent (execute) calls of each task, in task order."""
    input_by_call_index: tuple[float, ...]
    """Mean input tokens (cached or not) of a task's 1st, 2nd, ... agent call."""
    output_by_call_index: tuple[float, ...]
    """Mean output tokens of a task's 1st, 2nd, ... agent call."""
    cache_read_share: float
    """Cache reads among all input tokens."""
    cache_write_share: float
    """Cache writes among all input tokens."""
    harness_calls_per_task: dict[str, float]
    """The harness's own calls per task attempted, by purpose."""
    command_seconds: float
    verify_seconds: float
    usd_by_purpose: dict[str, float]
    total_usd: float


class WorkloadFacts(_Strict):
    """A run's workload. Written into the run index (``kind`` ``workload``) at every ending."""

    kind: Literal["workload_facts"] = "workload_facts"
    version: int = FACTS_VERSION
    run_id: str
    created_at: str = ""
    source: Literal["ending", "trace"] = "ending"
    """Recorded at the run's ending, or rebuilt later from its trace."""
    ending: str | None = None
    """The run's stop reason."""
    workspace: Workspace
    models: tuple[str, ...] = ()
    """Every model the run called, most calls first."""
    provider: str = ""
    """The spec's ``[model] provider`` (empty: no model, or a record from before it was kept)."""
    model_source: ModelSource = ""
    """Who answered the run's calls: the spec's model, one the caller handed in, or a
    replay of a recording (empty: a record from before it was kept)."""
    tasks_attempted: int = 0
    tasks_verified: int = 0
    tasks_parked: int = 0
    night_calls: tuple[CallFacts, ...] = ()
    """Calls that belong to no task: the plan before the first, the closing summary."""
    tasks: tuple[TaskFacts, ...] = ()
    summary: Summary | None = None

    @property
    def all_calls(self) -> list[CallFacts]:
        return [*self.night_calls, *(c for t in self.tasks for c in t.calls)]

    @property
    def total_usd(self) -> float:
        return to_usd(sum(to_nanos(c.usd) for c in self.all_calls))


def _call(event: Mapping[str, Any]) -> CallFacts | None:
    if event.get("released"):
        return None
    usage = event.get("usage")
    known = isinstance(usage, Mapping)
    fields: dict[str, int] = {}
    if isinstance(usage, Mapping):
        fields = {k: int(usage.get(k, 0)) for k in Usage.__dataclass_fields__}
    return CallFacts(
        purpose=str(event.get("purpose", "?")),
        model=str(event.get("model", "?")),
        usd=float(event.get("cost_usd") or 0.0),
        usage_known=known,
        at=float(event.get("t_start", event.get("t", 0.0)) or 0.0),
        **fields,
    )


def _means(rows: Iterable[tuple[int, ...]]) -> tuple[float, ...]:
    columns: dict[int, list[int]] = defaultdict(list)
    for row in rows:
        for i, value in enumerate(row):
            columns[i].append(value)
    return tuple(round(fmean(columns[i]), 1) for i in sorted(columns))


def summarize(night: tuple[CallFacts, ...], tasks: tuple[TaskFacts, ...]) -> Summary:
    calls = [*night, *(c for t in tasks for c in t.calls)]
    agent = [t.agent_calls for t in tasks]
    inputs = sum(c.input_tokens for c in calls)
    harness: dict[str, int] = defaultdict(int)
    nanos: dict[str, int] = defaultdict(int)
    for c in calls:
        nanos[c.purpose] += to_nanos(c.usd)
        if c.purpose != "execute":
            harness[c.purpose] += 1
    return Summary(
        calls_per_task=tuple(len(a) for a in agent),
        input_by_call_index=_means(tuple(c.input_tokens for c in a) for a in agent),
        output_by_call_index=_means(tuple(c.output for c in a) for a in agent),
        cache_read_share=round(sum(c.cache_read for c in calls) / inputs, 4) if inputs else 0.0,
        cache_write_share=(
            round(sum(c.cache_write_5m + c.cache_write_1h for c in calls) / inputs, 4)
            if inputs
            else 0.0
        ),
        harness_calls_per_task={
            k: round(v / len(tasks), 3) if tasks else float(v) for k, v in sorted(harness.items())
        },
        command_seconds=round(sum(t.command_seconds for t in tasks), 3),
        verify_seconds=round(sum(t.verify_seconds for t in tasks), 3),
        usd_by_purpose={k: to_usd(v) for k, v in sorted(nanos.items())},
        total_usd=to_usd(sum(nanos.values())),
    )


class _OpenTask:
    def __init__(self, task_id: str) -> None:
        self.id = task_id
        self.attempts = 0
        self.calls: list[CallFacts] = []
        self.command_seconds = 0.0
        self.verify_seconds = 0.0


def workload_facts(
    run_id: str,
    trace: Iterable[Mapping[str, Any]],
    workspace: Workspace,
    *,
    verified: Iterable[str] = (),
    parked: Iterable[str] = (),
    ending: str | None = None,
    created_at: str = "",
    source: Literal["ending", "trace"] = "ending",
    provider: str = "",
    model_source: ModelSource = "",
) -> WorkloadFacts:
    """The workload of one run from its trace records, in order, and its result's verified
    and parked task ids."""
    night: list[CallFacts] = []
    tasks: dict[str, _OpenTask] = {}
    current: _OpenTask | None = None
    stopped = False
    for event in trace:
        kind = event.get("kind")
        if kind == "task" and event.get("event") == "started":
            task_id = str(event.get("task"))
            current = tasks.setdefault(task_id, _OpenTask(task_id))
            current.attempts += 1
        elif kind == "decision" and event.get("decision") == "stop":
            stopped = True
        elif kind == "model_call":
            call = _call(event)
            if call is None:
                continue
            if current is None or stopped or call.purpose in ("plan", "summarize"):
                night.append(call)
            else:
                current.calls.append(call)
        elif kind == "tool_call" and event.get("task") in tasks:
            owner = tasks[str(event["task"])]
            tool = event.get("tool")
            if tool == "verify":
                owner.verify_seconds += float(event.get("seconds") or 0.0)
            elif tool == "command":
                owner.command_seconds += float(event.get("seconds") or 0.0)
            elif tool == "run_command" and "t_start" in event:
                owner.command_seconds += max(0.0, float(event["t"]) - float(event["t_start"]))
    done, held = set(verified), set(parked)
    facts = tuple(
        TaskFacts(
            id=t.id,
            outcome="verified" if t.id in done else "parked" if t.id in held else "unfinished",
            attempts=max(1, t.attempts),
            calls=tuple(t.calls),
            command_seconds=round(t.command_seconds, 3),
            verify_seconds=round(t.verify_seconds, 3),
        )
        for t in tasks.values()
    )
    counts: dict[str, int] = defaultdict(int)
    for c in [*night, *(c for t in facts for c in t.calls)]:
        counts[c.model] += 1
    return WorkloadFacts(
        run_id=run_id,
        created_at=created_at,
        source=source,
        ending=ending,
        workspace=workspace,
        models=tuple(sorted(counts, key=lambda m: (-counts[m], m))),
        provider=provider,
        model_source=model_source,
        tasks_attempted=len(facts),
        tasks_verified=sum(1 for t in facts if t.outcome == "verified"),
        tasks_parked=sum(1 for t in facts if t.outcome == "parked"),
        night_calls=tuple(night),
        tasks=facts,
        summary=summarize(tuple(night), facts),
    )


def main_model(facts: WorkloadFacts) -> str | None:
    """The model the run's agent calls went to (most of them), else its most called."""
    agent: dict[str, int] = defaultdict(int)
    for t in facts.tasks:
        for c in t.agent_calls:
            agent[c.model] += 1
    if agent:
        return max(sorted(agent), key=lambda m: agent[m])
    return facts.models[0] if facts.models else None


__all__ = [
    "FACTS_VERSION",
    "HARNESS_PURPOSES",
    "CallFacts",
    "Summary",
    "TaskFacts",
    "WorkloadFacts",
    "Workspace",
    "main_model",
    "summarize",
    "workload_facts",
]
