"""``overnight estimate SPEC``: from the recorded nights of the spec's workspace when there
are any (or the runs ``--from`` names), else the spec-and-seed derivation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from overnight.config.prices import price_for
from overnight.config.spec import Spec
from overnight.core.budget import Price
from overnight.core.errors import ConfigError
from overnight.estimate.derivation import Estimate, estimate
from overnight.estimate.from_spec import resolve_workload, spec_defaults
from overnight.estimate.history import history_for, named_workloads
from overnight.estimate.learned import Learned, NightPrices, Settings, learn

ASK_FOR_TASKS = (
    "the model plans this night's tasks and no recorded night of its workspace says how "
    "many: any count would be a guess"
)


def _tasks(
    spec: Spec, table: Mapping[str, Any], overrides: Mapping[tuple[str, ...], Any]
) -> tuple[int | None, str]:
    if ("tasks",) in overrides:
        return int(overrides[("tasks",)]), "--tasks"
    if "tasks" in table:
        return int(table["tasks"]), "[estimate] tasks"
    if spec.tasks:
        return sum(1 for t in spec.tasks if t.brief is not None), "the spec's [[tasks]]"
    return (
        None,
        "the model plans them; a simulated night draws its count from the recorded ones "
        "(--tasks N to say)",
    )


def require_task_count(
    spec: Spec, table: Mapping[str, Any], overrides: Mapping[tuple[str, ...], Any]
) -> None:
    """A night the model plans, priced with no history and no ``[estimate]`` table (whose
    fields default to the reference night's): its task count must be given."""
    if (
        spec.model is not None
        and spec.estimate is None
        and _tasks(spec, table, overrides)[0] is None
    ):
        raise ConfigError(
            "--tasks",
            ASK_FOR_TASKS,
            "pass --tasks N (or set [estimate] tasks = N); after a night of this workspace "
            "the estimate learns it from the record",
        )


def learned_estimate(
    spec: Spec,
    from_runs: Sequence[str] | None,
    table: Mapping[str, Any],
    overrides: Mapping[tuple[str, ...], Any],
) -> tuple[Learned | None, str]:
    """The estimate from history, or None and why there is none."""
    if spec.model is None:
        return None, "the night makes no model call"
    if from_runs:
        runs = named_workloads(from_runs)
        chosen = "the runs named by --from"
    else:
        runs, chosen = history_for(spec.workspace_path(), spec.model.name)
        if not runs:
            return None, chosen
    known = {name: p.price() for name, p in spec.prices.items()}
    provider = spec.model.provider

    def price_of(name: str) -> Price:
        return price_for(name, provider, known)

    tasks, tasks_from = _tasks(spec, table, overrides)
    budget = overrides.get(("budget_usd",), table.get("budget_usd", spec.budget.usd))
    prices = NightPrices(
        price_of=price_of,
        model=spec.model.name,
        cheap_model=spec.agent.mechanical_model,
        min_cacheable=spec.agent.min_cacheable_tokens,
    )
    settings = Settings(
        tasks=tasks,
        tasks_from=tasks_from,
        budget_usd=float(budget) if budget else None,
        finish_at=float(overrides.get(("finish_at",), spec.budget.finish_at)),
        enforce_at=float(overrides.get(("enforce_at",), spec.budget.enforce_at)),
        loop_cap_calls=int(overrides.get(("loop_cap_calls",), table.get("loop_cap_calls", 4))),
        tiered_share=float(overrides.get(("tiered_share",), table.get("tiered_share", 0.6))),
    )
    return learn(runs, chosen, prices, settings), chosen


@dataclass(frozen=True)
class SpecEstimate:
    """What a spec's night will cost: learned from recorded nights, or else derived."""

    learned: Learned | None
    derived: Estimate | None
    """The derivation from the spec, when there is no learned estimate."""
    why: str
    """Why there is no learned estimate (when there is none)."""


def spec_estimate(
    spec: Spec,
    overrides: Mapping[tuple[str, ...], Any] | None = None,
    from_runs: Sequence[str] | None = None,
    *,
    no_history: bool = False,
) -> SpecEstimate:
    """``overnight estimate SPEC``: from the spec's recorded nights (or ``from_runs``) when
    there are any, else derived from the spec, its ``[estimate]`` table and ``overrides``."""
    overrides = overrides or {}
    table = spec.estimate.model_dump(exclude_unset=True) if spec.estimate is not None else {}
    if no_history and from_runs:
        raise ConfigError("--from", "give --from or --no-history, not both")
    learned, why = (
        (None, "--no-history")
        if no_history
        else learned_estimate(spec, from_runs, table, overrides)
    )
    if learned is not None:
        return SpecEstimate(learned, None, why)
    require_task_count(spec, table, overrides)
    provider = spec.model.provider if spec.model is not None else "python"
    known = {name: p.price() for name, p in spec.prices.items()}
    workload = resolve_workload(
        table, overrides, spec_defaults(spec), lambda name: price_for(name, provider, known)
    )
    return SpecEstimate(None, estimate(workload), why)
