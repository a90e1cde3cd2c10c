"""The night a spec describes, and the workload to price from it, its table and the flags.

A spec's ``[[tasks]]`` decide the tasks (a ``brief`` is an agent task, a ``command`` costs
nothing), ``agent.max_calls`` is the calls per agent task, no model call verifies a task (the
harness runs each task's ``verify`` command), and the harness's own calls are counted the way
the harness makes them: one plan when there are no ``[[tasks]]``, a drift check every
``run.drift_every`` tasks and a replan after every task (neither after the last one),
compactions when a conversation passes ``agent.compact_at_tokens``, and one closing summary.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from overnight.config.estimate import TABLE, ModelRates, Workload, parse_workload
from overnight.config.spec import Spec
from overnight.core.budget import Price
from overnight.core.errors import ConfigError
from overnight.estimate.arithmetic import main_rates


def spec_defaults(spec: Spec) -> dict[str, Any]:
    """The night a spec describes, as workload fields, for ``resolve_workload``'s
    ``defaults``: its tasks (a ``brief`` is an agent task, a ``command`` is not), the agent's
    call limit, caching floor and compaction threshold, no model call to verify a task, the
    harness's own calls (a plan only without ``[[tasks]]``; drift checks, replans and
    compactions counted from the workload; one closing summary), and the cap to check.
    Without a ``[model]`` no call is made at all."""
    model = spec.model is not None
    agent = spec.agent
    defaults: dict[str, Any] = {
        "main_model": spec.model.name if spec.model is not None else None,
        "cheap_model": agent.mechanical_model,
        "calls_per_task": agent.max_calls,
        "min_cacheable_tokens": agent.min_cacheable_tokens,
        "compact_at_tokens": agent.compact_at_tokens,
        "compaction_input_tokens": agent.compact_at_tokens,
        "compactions": None,
        "verify_calls_per_task": 0,
        "drift_every": spec.run.drift_every,
        "drift_checks": None if model else 0,
        "drift_after_last_task": False,
        "replans": None if model and spec.run.replan else 0,
        "plans": 1 if model and not spec.tasks else 0,
        "summaries": 1 if model else 0,
        "budget_usd": spec.budget.usd,
        "finish_at": spec.budget.finish_at,
        "enforce_at": spec.budget.enforce_at,
    }
    if spec.tasks:
        briefs = sum(1 for t in spec.tasks if t.brief is not None) if model else 0
        defaults["tasks"] = briefs
        defaults["command_tasks"] = len(spec.tasks) - briefs
    return defaults


def resolve_workload(
    table: Mapping[str, Any],
    overrides: Mapping[tuple[str, ...], Any],
    defaults: Mapping[str, Any],
    price_of: Callable[[str], Price],
) -> Workload:
    """The workload to price: ``defaults`` (what a spec implies: ``spec_defaults``) under the
    ``[estimate]`` ``table`` under the flag ``overrides``. A named model whose rates are not
    given is priced by ``price_of``; a flag for one rate (``--main-price-output``) changes that
    rate only. A night with no model call needs no price."""
    data: dict[str, Any] = dict(defaults)
    data.update(table)
    data.update({path[0]: value for path, value in overrides.items() if len(path) == 1})
    for name_field, price_field in (("main_model", "main_price"), ("cheap_model", "cheap_price")):
        name = data.get(name_field)
        if data.get(price_field) is None and isinstance(name, str):
            try:
                data[price_field] = ModelRates.from_price(price_of(name)).model_dump()
            except ConfigError as exc:
                raise ConfigError(f"{TABLE}.{name_field}", exc.problem, exc.fix) from None
    for path, value in overrides.items():
        if len(path) == 2:
            nested = data.get(path[0])
            data[path[0]] = {**(nested if isinstance(nested, Mapping) else {}), path[1]: value}
    w = parse_workload(data)
    main_rates(w)
    return w
