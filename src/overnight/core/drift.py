"""Drift: the judge's verdict and the harness half that acts on it.

The judge sees only the original goal and the queue. ``reasoning`` is the first field so that a
model filling the schema in order writes its analysis before it commits to a number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.endings import DRIFT_HALT_ABOVE
from overnight.core.tasks import Task

DRIFT_PRUNE_ABOVE = 0.3


class DriftVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reasoning: str
    off_goal_task_ids: list[str]
    drift_score: float = Field(ge=0.0, le=1.0)


@dataclass(frozen=True)
class DriftDecision:
    action: Literal["none", "prune", "halt"]
    kept: list[Task]
    pruned: list[Task]


def drift_gate(queue: list[Task], verdict: DriftVerdict) -> DriftDecision:
    """Both thresholds are strict: exactly 0.5 prunes, exactly 0.3 does nothing.

    A halting verdict prunes nothing: a run that is about to stop for drift does not quietly
    reshape its queue first; the report shows the queue the judge condemned.
    """
    if verdict.drift_score > DRIFT_HALT_ABOVE:
        return DriftDecision("halt", list(queue), [])
    if verdict.drift_score > DRIFT_PRUNE_ABOVE:
        off = set(verdict.off_goal_task_ids)
        kept = [t for t in queue if t.id not in off]
        pruned = [t for t in queue if t.id in off]
        return DriftDecision("prune", kept, pruned)
    return DriftDecision("none", list(queue), [])
