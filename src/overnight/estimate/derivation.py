"""The whole derivation for one workload, in the order it is printed."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from overnight.config.estimate import Workload, output_per_task
from overnight.estimate.arithmetic import (
    BillRow,
    baseline,
    bill,
    call_input_tokens,
    task_input_tokens,
)
from overnight.estimate.counts import resolved
from overnight.estimate.levers import Lever, levers
from overnight.estimate.recommend import BudgetCheck, Recommendation, check_budget, recommend


@dataclass(frozen=True)
class Estimate:
    """The whole derivation, in the order it is printed."""

    workload: dict[str, Any]
    call_input_tokens: tuple[int, ...]
    task_input_tokens: int
    task_output_tokens: int
    night_input_tokens: int
    night_output_tokens: int
    next_call_input_tokens: int
    bill: tuple[BillRow, ...]
    total_calls: int
    total_usd: float
    task_share: float
    levers: tuple[Lever, ...]
    recommendation: Recommendation
    lever_notes: tuple[str, ...] = field(default=())
    budget: BudgetCheck | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate(w: Workload) -> Estimate:
    """The whole derivation for one workload."""
    rows = bill(w)
    row, total = baseline(w)
    calls = w.calls_per_task
    return Estimate(
        workload=resolved(w).model_dump(mode="json"),
        call_input_tokens=tuple(call_input_tokens(w)),
        task_input_tokens=task_input_tokens(w),
        task_output_tokens=output_per_task(w),
        night_input_tokens=w.tasks * task_input_tokens(w),
        night_output_tokens=w.tasks * output_per_task(w),
        next_call_input_tokens=task_input_tokens(w, calls + 1) - task_input_tokens(w),
        bill=tuple(rows),
        total_calls=sum(r.calls for r in rows),
        total_usd=float(total),
        task_share=float(row / total * 100) if total else 0.0,
        levers=tuple(levers(w)),
        recommendation=recommend(w),
        lever_notes=(
            "each lever changes one thing against the baseline; the savings do not add up, "
            "because they compete for the same tokens",
        ),
        budget=check_budget(w),
    )
