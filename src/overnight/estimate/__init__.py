"""``overnight estimate``: what a night costs, derived from token counts before it runs.

Pure arithmetic: no files, no network. A ``Workload`` (``overnight.config.estimate``, the
``[estimate]`` table) states the night's shape; ``estimate`` derives from it

- the input of every call of an agent task, and the bill per kind of call and in total
  (``arithmetic``), with the counts the workload leaves out derived from the rest (``counts``);
- four levers, each applied alone against that total (``levers``);
- a recommendation: the hard cap, its headroom, the cost per verified task and the per-task
  token budget; with a cap to check (a spec's ``budget.usd``), whether its enforcement line
  covers the derived total, and the least cap that would (``recommend``).

``spec_defaults`` and ``resolve_workload`` (``from_spec``) build the workload a spec
describes, ``workload_flags`` (``flags``) the command-line overrides, and ``render_text``
(``estimate_text``) prints the result.

With the reference night (``SEED_EXAMPLE``) it comes to 306 calls and $22.01, and a $28 hard
cap. The per-call sizes of the other kinds are chosen so that their rows bill $0.78 (40
verifications: 2.4k in, 0.3k out), $0.35 (8 drift checks: 7.5k in, 0.25k out), $0.78 (12
replans: 8k in, 1k out) and $1.80 (6 compactions: 50k in, 2k out).
"""

from overnight.config.estimate import (
    SEED_EXAMPLE,
    ModelRates,
    Workload,
    output_per_task,
    parse_workload,
    tiered_tasks,
)
from overnight.estimate.arithmetic import (
    BillRow,
    bill,
    call_input_tokens,
    model_calls,
    task_input_tokens,
    total_usd,
)
from overnight.estimate.counts import (
    all_tasks,
    compactions,
    compactions_per_task,
    drift_checks,
    low_effort_cut,
    replans,
    resolved,
)
from overnight.estimate.derivation import Estimate, estimate
from overnight.estimate.estimate_text import render_text
from overnight.estimate.flags import Flag, workload_flags
from overnight.estimate.from_spec import resolve_workload, spec_defaults
from overnight.estimate.levers import (
    Lever,
    cached_call_tokens,
    caching_lever,
    levers,
    loop_cap_lever,
    low_effort_lever,
    tiering_lever,
)
from overnight.estimate.recommend import (
    BudgetCheck,
    Recommendation,
    check_budget,
    hard_cap,
    recommend,
)

__all__ = [
    "SEED_EXAMPLE",
    "BillRow",
    "BudgetCheck",
    "Estimate",
    "Flag",
    "Lever",
    "ModelRates",
    "Recommendation",
    "Workload",
    "all_tasks",
    "bill",
    "cached_call_tokens",
    "caching_lever",
    "call_input_tokens",
    "check_budget",
    "compactions",
    "compactions_per_task",
    "drift_checks",
    "estimate",
    "hard_cap",
    "levers",
    "loop_cap_lever",
    "low_effort_cut",
    "low_effort_lever",
    "model_calls",
    "output_per_task",
    "parse_workload",
    "recommend",
    "render_text",
    "replans",
    "resolve_workload",
    "resolved",
    "spec_defaults",
    "task_input_tokens",
    "tiered_tasks",
    "tiering_lever",
    "total_usd",
    "workload_flags",
]
