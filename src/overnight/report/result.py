"""The terminal result: the one object a 9am script reads, with a JSON Schema shipped beside it.

It carries enough to recompute its own stop reason: every budget's ``used`` at the moment of
the stop decision, its ``limit`` and the lines derived from it, and the amount a refused call
would have reached. What the closing summary cost is reported apart, in ``wrapup``.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.budget import BudgetReading

RESULT_KIND = "overnight-result"
RESULT_SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BudgetBlock(_Model):
    used: float
    """Used when the stop was decided (the wrap-up summary is reported apart)."""
    limit: float | None
    """The stated budget; null when the spec sets none."""
    stop_at: float | None
    """The stop check fires once ``used`` reaches this."""
    enforced_at: float | None
    """No ordinary call may cross this; above it lies the wrap-up reserve."""
    refused_at: float | None = None
    """What a refused call would have brought ``used`` to; null when nothing was refused."""

    def reading(self) -> BudgetReading:
        return BudgetReading(self.used, self.limit, self.stop_at, self.enforced_at, self.refused_at)


class Budgets(_Model):
    steps: BudgetBlock
    tokens: BudgetBlock
    seconds: BudgetBlock
    cost_usd: BudgetBlock

    def view(self) -> dict[str, BudgetReading]:
        return {
            "steps": self.steps.reading(),
            "tokens": self.tokens.reading(),
            "seconds": self.seconds.reading(),
            "cost_usd": self.cost_usd.reading(),
        }


class ParkedEntry(_Model):
    id: str
    title: str
    reason: str
    detail: str = ""
    patch: str | None = None
    protected_changes: list[str] = Field(default_factory=list)
    """For a task parked as "changed what judges it": each protected path it changed."""


class PrunedEntry(_Model):
    id: str
    title: str
    drift_score: float
    at_task_count: int


class Plan(_Model):
    done: list[str]
    remaining: list[str]
    in_progress: str | None
    """A task left IN_PROGRESS (a signal or a refused call interrupted it); resume verifies it."""
    parked: list[ParkedEntry]
    pruned: list[PrunedEntry]


class VerifiedTask(_Model):
    id: str
    title: str
    commit: str | None
    attempts: int
    via: Literal["lap", "resume"]


class DriftPoint(_Model):
    at_task_count: int
    seconds: float
    score: float
    action: Literal["none", "prune", "halt"]
    off_goal_task_ids: list[str]


class SpendPoint(_Model):
    seconds: float
    cost_usd: float


class Spend(_Model):
    total_usd: float
    """Everything spent by this run across all its processes, wrap-up included."""
    by_purpose: dict[str, float]
    curve: list[SpendPoint]
    cost_per_verified_task: float | None
    model_calls: int


class Wrapup(_Model):
    source: Literal["model", "structured"]
    """``model``: the summary call succeeded; ``structured``: rendered from the plan instead."""
    cost_usd: float
    error: str | None = None


class Branch(_Model):
    name: str
    base_commit: str
    head: str | None
    worktree: str
    diff_stat: str = ""


class PredicateBlock(_Model):
    command: str
    met: bool
    exit_code: int | None
    detail: str


class SandboxBlock(_Model):
    mode: Literal["auto", "on", "off"]
    """``off``: an unsandboxed night, whatever its commands did."""
    network: bool
    """Whether sandboxed commands had the machine's network."""
    sandboxed_commands: int
    """Commands (tasks, verifies, the predicate, ``run_command``) run in the sandbox."""
    unsandboxed_commands: int
    """Commands run as written, outside the sandbox."""


class GoalBlock(_Model):
    text: str
    sha256: str


class TerminalResult(_Model):
    kind: Literal["overnight-result"] = "overnight-result"
    schema_version: int = RESULT_SCHEMA_VERSION
    run_id: str
    status: Literal["SUCCESS", "PARTIAL", "FAILURE"]
    stop_reason: str
    """The ending, qualified: ``BUDGET_EXHAUSTED:money``, ``TIME_LIMIT:sigterm``, ..."""
    ending: str
    exit_code: int
    resumable: bool
    alert: Literal["none", "alert", "page"]
    message: str
    """One sentence: why the run ended."""
    goal: GoalBlock
    budgets: Budgets
    plan: Plan
    verified: list[VerifiedTask]
    drift: list[DriftPoint]
    spend: Spend
    predicate: PredicateBlock | None
    branch: Branch
    partial_output: str
    wrapup: Wrapup
    trace_ref: str
    """Path of the run's trace: one JSON line per model call, tool call and decision."""
    started_at: str
    ended_at: str
    resumes: int
    alerts: list[dict[str, Any]] = Field(default_factory=list)
    """What was sent when the run ended (action, how, ok, detail). A failed alert is recorded
    here and changes nothing else."""
    trace_lines_dropped: int = 0
    """Trace lines that could not be written (a full disk); the trace is then incomplete."""
    sandbox: SandboxBlock | None = None
    """How this night's commands were confined; null only in results written before the
    sandbox existed."""
    effects: list[dict[str, Any]] = Field(default_factory=list)
    """Every external effect this run wrote down: tool, run-step key, task key, task, state
    (intended, confirmed, failed, unknown), arguments, the provider's answer, error."""


def result_json_schema() -> dict[str, Any]:
    schema = TerminalResult.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://overnight.invalid/result.schema.json"
    return schema


def shipped_schema() -> dict[str, Any]:
    text = resources.files("overnight.report").joinpath("result.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


if __name__ == "__main__":  # regenerate the shipped schema: python -m overnight.report.result
    print(json.dumps(result_json_schema(), indent=2, sort_keys=True))
