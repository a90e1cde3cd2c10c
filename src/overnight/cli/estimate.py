"""``overnight estimate SPEC``: from the recorded nights of the spec's workspace when there
are any (or the runs ``--from`` names), else the spec-and-seed derivation."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from overnight.config.spec import Spec
from overnight.core.budget import Price
from overnight.core.errors import ConfigError
from overnight.estimate.history import history_for, named_workloads
from overnight.estimate.learned import Learned, NightPrices, Settings, learn
from overnight.models.prices import price_for

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
    args: argparse.Namespace,
    table: Mapping[str, Any],
    overrides: Mapping[tuple[str, ...], Any],
) -> tuple[Learned | None, str]:
    """The estimate from history, or None and why there is none."""
    if spec.model is None:
        return None, "the night makes no model call"
    if args.from_runs:
        runs = named_workloads(args.from_runs)
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
