"""What a night will cost, derived from token counts before it runs (``overnight estimate``).

Pure arithmetic: no files, no network. A ``Workload`` states the night's shape (its agent and
command tasks, calls per agent task, the size of each kind of call, the prices, the cap to
check); ``estimate`` derives from it

- the input of every call of an agent task: the conversation is re-sent on each call, so call
  ``t`` carries ``first_call_tokens + (t - 1) x growth_per_call_tokens`` and a task's input is
  the sum over its calls, which grows with the square of the number of calls;
- the bill per kind of call (task execution, verification, drift check, replan, compaction,
  plan, closing summary), every call at the main model's rate, and the total. Command tasks
  make no model calls; a night with none at all costs $0 and needs no price;
- four levers, each applied alone against that total (their savings do not add up: they
  compete for the same tokens): prompt caching, a cap on the calls per task, moving a share
  of the tasks to a cheaper model, and a lower effort setting on those tasks;
- a recommendation: the hard cap (the derived total x ``cap_factor``, 1.25, rounded up to a
  whole dollar), its headroom, the cost per verified task and the per-task token budget;
- with a cap to check (a spec's ``budget.usd``): whether its enforcement line covers the
  derived total, and the least cap that would.

Every figure is computed exactly (``Fraction``) and rounded only for display: money to the
cent (half up), tokens to the token.

The defaults are the reference night: 40 tasks of six calls, a 3.5k first call (3.0k system
prompt + 0.5k brief) growing by 3.3k per call (a 3.0k tool result + the 0.3k previous reply),
4.2k output per task. With the main model at $5/$25 per million tokens and the cheaper one at
$3/$15 (``SEED_EXAMPLE``) it comes to 306 calls and $22.01, and a $28 hard cap. The per-call
sizes of the other kinds are chosen so that their rows bill $0.78 (40 verifications: 2.4k in,
0.3k out), $0.35 (8 drift checks: 7.5k in, 0.25k out), $0.78 (12 replans: 8k in, 1k out) and
$1.80 (6 compactions: 50k in, 2k out).

A spec describes a different night (``spec_defaults``): its ``[[tasks]]`` (a ``brief`` is an
agent task, a ``command`` costs nothing), ``agent.max_calls`` calls per agent task, no model
call to verify (the harness runs each task's ``verify`` command), and the harness's own calls
counted the way the harness makes them: one plan when there are no ``[[tasks]]``, a drift
check every ``run.drift_every`` tasks and a replan after every task (neither after the last
one), compactions when a conversation passes ``agent.compact_at_tokens``, and one closing
summary.

Counts and sizes that depend on the rest of the workload (the output of a task, the low-effort
cut, the drift checks, and for a spec the replans and compactions) are derived from it unless
given, so changing ``tasks`` or ``calls_per_task`` never leaves one of them out of range.
"""

from __future__ import annotations

import math
import textwrap
import typing
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from overnight.core.budget import PER_MILLION, Price
from overnight.core.errors import ConfigError

if TYPE_CHECKING:
    from overnight.config.spec import Spec

#: The cache TTL the caching lever assumes every gap between a task's calls stays under.
CACHE_TTL_MINUTES = 5
#: Where a workload sits in ``night.toml``; prefixes the field named by an error.
TABLE = "estimate"
#: Output of one call when a task's output is not given: the reference's 4.2k over six calls.
OUTPUT_PER_CALL_TOKENS = 700
#: The share of the tiered tasks' output a low effort setting removes when the cut is not
#: given: the reference night's 40k of its 24 tiered tasks' 100.8k (about 39.7%).
LOW_EFFORT_SHARE = Fraction(40_000, 100_800)


def _x(value: float | int) -> Fraction:
    """A configured number as the decimal it was written as (0.6 is 3/5, not a binary float)."""
    return Fraction(str(value))


def _half_up(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


def tiered_tasks(w: Workload) -> int:
    """Tasks the tiering (and low-effort) lever moves: the share of tasks, rounded half up."""
    return _half_up(w.tasks * _x(w.tiered_share))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ModelRates(_Strict):
    """One model's prices: $ per million tokens, and the cache rates as multiples of input."""

    input: float = Field(ge=0)
    """$ per million uncached input tokens."""
    output: float = Field(ge=0)
    """$ per million output tokens (thinking included)."""
    cache_write: float = Field(default=1.25, ge=0)
    """A 5-minute cache write, as a multiple of the input price."""
    cache_read: float = Field(default=0.1, ge=0)
    """A cache read, as a multiple of the input price."""

    @classmethod
    def from_price(cls, price: Price) -> ModelRates:
        """The ledger's five-rate price as rates and cache multipliers (the usual 1.25x / 0.1x
        when the input price is 0)."""
        if price.input == 0:
            return cls(input=0.0, output=price.output)
        return cls(
            input=price.input,
            output=price.output,
            cache_write=round(price.cache_write_5m / price.input, 6),
            cache_read=round(price.cache_read / price.input, 6),
        )


class Workload(_Strict):
    """The night to price (``[estimate]`` in ``night.toml``). The defaults are the reference
    night's shape; a spec's own settings (``spec_defaults``) come next, then this table; the
    prices come from the spec when not given here."""

    tasks: int = Field(default=40, ge=0)
    """Agent tasks the night works through, each making model calls (from a spec with
    ``[[tasks]]``: those with a ``brief``)."""
    command_tasks: int = Field(default=0, ge=0)
    """Tasks that make no model calls: a shell ``command`` run by the harness. They count
    towards the drift cadence and the replans (from a spec: the ``[[tasks]]`` with a
    ``command``; every task when the spec has no ``[model]``)."""
    calls_per_task: int = Field(default=6, gt=0, le=1000)
    """Model calls in one agent task's loop, its ReAct turns (from a spec: ``agent.max_calls``,
    the most a task may make)."""
    first_call_tokens: int = Field(default=3500, ge=0)
    """Input of a task's first call: the system prompt (3.0k) plus the task brief (0.5k)."""
    growth_per_call_tokens: int = Field(default=3300, ge=0)
    """Input each later call adds over the one before it: the previous tool result (3.0k)
    plus the model's previous reply (0.3k)."""
    output_per_task_tokens: int | None = Field(default=None, ge=0)
    """Output tokens of one agent task, all its calls together (thinking included). Not given:
    700 per call, the reference's 4.2k over six calls."""
    verify_calls_per_task: int = Field(default=1, ge=0)
    """Model calls per agent task that check its work. The harness checks a task by running its
    ``verify`` command, which calls no model: 0 for a spec, 1 in the reference night."""
    verify_input_tokens: int = Field(default=2400, ge=0)
    """Input of one verification call."""
    verify_output_tokens: int = Field(default=300, ge=0)
    """Output of one verification call."""
    drift_every: int = Field(default=5, gt=0)
    """Tasks between drift checks (from a spec: ``run.drift_every``)."""
    drift_checks: int | None = Field(default=None, ge=0)
    """Drift checks in the night. Not given: one every ``drift_every`` tasks, agent and command
    tasks alike (0 for a spec with no ``[model]``: there is no judge)."""
    drift_after_last_task: bool = True
    """Whether the derived count includes a check after the last task when it falls on the
    cadence: the reference night counts it; the harness skips it, nothing being left in the
    queue to judge (from a spec: false)."""
    drift_input_tokens: int = Field(default=7500, ge=0)
    """Input of one drift check: the goal and the queue."""
    drift_output_tokens: int = Field(default=250, ge=0)
    """Output of one drift check: reasoning, off-goal ids, a score."""
    replans: int | None = Field(default=12, ge=0)
    """Replan calls in the night (the reference night: 12). From a spec, unless given here: one
    after every task but the last, as the harness asks after each task while tasks remain and
    the goal is unmet (0 with ``run.replan = false`` or no ``[model]``)."""
    replan_input_tokens: int = Field(default=8000, ge=0)
    """Input of one replan call."""
    replan_output_tokens: int = Field(default=1000, ge=0)
    """Output of one replan call."""
    compactions: int | None = Field(default=6, ge=0)
    """Compaction calls in the night, each summarizing a history so the context stops growing
    (the reference night: 6). From a spec, unless given here: one each time an agent task's
    conversation passes ``compact_at_tokens``, after which it restarts from the brief and the
    summary."""
    compact_at_tokens: int = Field(default=60_000, gt=0)
    """Conversation size at which a task compacts, for the derived count of compactions (from a
    spec: ``agent.compact_at_tokens``)."""
    compaction_input_tokens: int = Field(default=50_000, ge=0)
    """Input of one compaction call: the history it summarizes (from a spec:
    ``agent.compact_at_tokens``)."""
    compaction_output_tokens: int = Field(default=2000, ge=0)
    """Output of one compaction call: the summary."""
    plans: int = Field(default=0, ge=0)
    """Plan calls (from a spec: 1 when it has no ``[[tasks]]``, so the model plans the
    queue)."""
    plan_input_tokens: int = Field(default=2000, ge=0)
    """Input of one plan call: its instructions and the goal."""
    plan_output_tokens: int = Field(default=4000, ge=0)
    """Output of one plan call: the queue, a title, brief and verify command per task."""
    summaries: int = Field(default=0, ge=0)
    """Closing-summary calls, paid from the wrap-up reserve (from a spec with a ``[model]``:
    1)."""
    summary_input_tokens: int = Field(default=2000, ge=0)
    """Input of the closing summary: the facts of the run."""
    summary_output_tokens: int = Field(default=300, ge=0)
    """Output of the closing summary: a note of at most 200 words."""
    main_model: str | None = None
    """The model every call uses; priced from the spec's ``[prices.<name>]`` or genai-prices
    when ``main_price`` is not given (from a spec: ``model.name``)."""
    main_price: ModelRates | None = None
    """The main model's rates; overrides the price looked up for ``main_model``. Not needed
    when the night makes no model call."""
    cheap_model: str | None = None
    """A cheaper model for the tiering lever; priced like ``main_model`` when ``cheap_price`` is
    not given (from a spec: ``agent.mechanical_model``). Neither: no tiering lever."""
    cheap_price: ModelRates | None = None
    """The cheaper model's rates; overrides the price looked up for ``cheap_model``."""
    min_cacheable_tokens: int = Field(default=1024, gt=0)
    """The main model's minimum cacheable prefix (from a spec: ``agent.min_cacheable_tokens``).
    A first call shorter than this writes nothing, and the caching lever saves nothing."""
    loop_cap_calls: int = Field(default=4, gt=0)
    """The loop-cap lever: calls per task when the loop is capped. Output shrinks in
    proportion."""
    tiered_share: float = Field(default=0.6, ge=0, le=1)
    """The tiering lever: the share of agent tasks (rounded to whole tasks) moved to the
    cheaper model. The low-effort lever applies to the same tasks."""
    low_effort_output_cut_tokens: int | None = Field(default=None, ge=0)
    """The low-effort lever: output tokens a low effort setting removes from the tiered tasks,
    the night's total. Not given: the reference's share of their output, 40k of 100.8k
    (about 39.7%)."""
    verify_pass_rate: float = Field(default=0.75, gt=0, le=1)
    """Share of tasks expected to pass verification: the divisor of the cost per verified
    task."""
    cap_factor: float = Field(default=1.25, ge=1)
    """The hard cap is the derived total times this, rounded up to a whole dollar."""
    budget_usd: float | None = Field(default=None, ge=0)
    """The hard cap to check the derived total against (from a spec: ``budget.usd``). Not
    given: no check."""
    finish_at: float = Field(default=0.90, gt=0, le=1)
    """From this share of the cap no new task starts (from a spec: ``budget.finish_at``)."""
    enforce_at: float = Field(default=0.92, gt=0, le=1)
    """The enforcement line, as a share of the cap: no call may cross it, and the rest is the
    wrap-up reserve (from a spec: ``budget.enforce_at``)."""

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.tasks + self.command_tasks == 0:
            raise ConfigError(
                f"{TABLE}.tasks",
                "the night has no task (0 agent tasks and 0 command tasks)",
                "set it (--tasks) to 1 or more, or give command_tasks",
            )
        cut = self.low_effort_output_cut_tokens
        tiered = tiered_tasks(self)
        most = tiered * output_per_task(self)
        if cut is not None and tiered and cut > most:
            raise ConfigError(
                f"{TABLE}.low_effort_output_cut_tokens",
                f"{cut:,} is more than the {tiered} tiered tasks' whole output ({most:,} tokens)",
                f"set it (--low-effort-output-cut-tokens) to at most {most:,}, or leave it out "
                "to derive it",
            )
        if self.finish_at > self.enforce_at:
            raise ConfigError(
                f"{TABLE}.finish_at",
                f"{self.finish_at} is above the enforcement line ({self.enforce_at})",
                "keep finish_at <= enforce_at, e.g. 0.9 and 0.92",
            )
        return self


# --- what the workload implies when it does not say -------------------------------------------


def all_tasks(w: Workload) -> int:
    """Every task of the night: agent tasks and command tasks."""
    return w.tasks + w.command_tasks


def output_per_task(w: Workload) -> int:
    """Output of one agent task: as given, else 700 per call."""
    if w.output_per_task_tokens is not None:
        return w.output_per_task_tokens
    return OUTPUT_PER_CALL_TOKENS * w.calls_per_task


def low_effort_cut(w: Workload) -> int:
    """Output the low-effort lever removes: as given, else the reference share of the tiered
    tasks' output (never more than that output, whatever the number of tasks)."""
    if w.low_effort_output_cut_tokens is not None:
        return w.low_effort_output_cut_tokens
    return _half_up(tiered_tasks(w) * output_per_task(w) * LOW_EFFORT_SHARE)


def drift_checks(w: Workload) -> int:
    """As given, else one drift check every ``drift_every`` completed tasks (without the one
    after the last task, unless ``drift_after_last_task``)."""
    if w.drift_checks is not None:
        return w.drift_checks
    judged = all_tasks(w) if w.drift_after_last_task else all_tasks(w) - 1
    return judged // w.drift_every


def replans(w: Workload) -> int:
    """As given, else one after every task but the last."""
    if w.replans is not None:
        return w.replans
    return max(0, all_tasks(w) - 1)


def compactions_per_task(w: Workload) -> int:
    """Times one agent task's conversation passes ``compact_at_tokens``: after each call the
    tool result and the reply join it; past the threshold it is compacted and restarts from
    the first call's size plus the summary."""
    size, count = w.first_call_tokens, 0
    for _ in range(w.calls_per_task):
        size += w.growth_per_call_tokens
        if size > w.compact_at_tokens:
            count += 1
            size = w.first_call_tokens + w.compaction_output_tokens
    return count


def compactions(w: Workload) -> int:
    """As given, else every agent task's ``compactions_per_task``."""
    if w.compactions is not None:
        return w.compactions
    return w.tasks * compactions_per_task(w)


def resolved(w: Workload) -> Workload:
    """The workload with every derived count and size written in."""
    return w.model_copy(
        update={
            "output_per_task_tokens": output_per_task(w),
            "low_effort_output_cut_tokens": low_effort_cut(w),
            "drift_checks": drift_checks(w),
            "replans": replans(w),
            "compactions": compactions(w),
        }
    )


#: The reference night: the default workload with the main model at $5/$25 per million tokens
#: (512-token minimum cacheable prefix) and the cheaper one at $3/$15.
SEED_EXAMPLE = Workload(
    main_model="claude-opus-5",
    main_price=ModelRates(input=5.0, output=25.0),
    cheap_model="claude-sonnet-5",
    cheap_price=ModelRates(input=3.0, output=15.0),
    min_cacheable_tokens=512,
)


# --- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BillRow:
    """One kind of call: how many, their tokens, and what they cost at their model's rate."""

    kind: str
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    input_usd: float
    output_usd: float
    cost_usd: float
    arithmetic: str


@dataclass(frozen=True)
class Lever:
    """One change applied alone to the baseline: the new task-execution row and total."""

    key: str
    name: str
    applies: bool
    task_row_usd: float
    total_usd: float
    saving_usd: float
    saving_pct: float
    arithmetic: str
    notes: tuple[str, ...] = ()
    per_call_input_tokens: tuple[float, ...] = ()
    task_input_tokens: float | None = None
    task_output_tokens: float | None = None
    ttl_miss_total_usd: float | None = None


@dataclass(frozen=True)
class Recommendation:
    """The hard cap with its headroom, the cost per verified task and the task token budget."""

    derived_usd: float
    hard_cap_usd: int
    headroom_usd: float
    cap_rule: str
    derived_share_of_cap: float
    verified_tasks: float
    cost_per_verified_task_usd: float
    task_input_tokens: int
    task_output_tokens: int
    calls_per_task: int


@dataclass(frozen=True)
class BudgetCheck:
    """The cap the night was given against the derived total: ``covers`` when the total stays
    under the enforcement line (``enforce_at`` of the cap)."""

    cap_usd: float
    enforce_at: float
    enforcement_line_usd: float
    finish_at: float
    finish_line_usd: float
    derived_usd: float
    derived_share_of_cap: float | None
    covers: bool
    past_finish_line: bool
    margin_usd: float
    """The enforcement line minus the derived total: negative by what is missing."""
    least_cap_usd: float
    """The smallest cap, to the cent, whose enforcement line covers the derived total."""
    recommended_cap_usd: int
    """The hard cap, raised to the derived total / ``finish_at`` (rounded up to a dollar) when
    the cap's lines need more, so that every task can start."""
    verdict: str


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


# --- exact arithmetic ------------------------------------------------------------------------


def _usd(tokens_in: int | Fraction, tokens_out: int | Fraction, rates: ModelRates) -> Fraction:
    return (tokens_in * _x(rates.input) + tokens_out * _x(rates.output)) / PER_MILLION


def call_input_tokens(w: Workload, calls: int | None = None) -> list[int]:
    """Input of each call of one task: ``first + (t - 1) x growth`` for t = 1..calls."""
    n = w.calls_per_task if calls is None else calls
    return [w.first_call_tokens + (t - 1) * w.growth_per_call_tokens for t in range(1, n + 1)]


def task_input_tokens(w: Workload, calls: int | None = None) -> int:
    """Input billed for one task: the sum over its calls, not the size of the last one."""
    return sum(call_input_tokens(w, calls))


def _kinds(w: Workload) -> list[tuple[str, int, int, int]]:
    """Every kind of call: (kind, calls, input tokens, output tokens), task execution first."""
    out = output_per_task(w)
    verify = w.tasks * w.verify_calls_per_task
    counted = [
        ("drift check", drift_checks(w), w.drift_input_tokens, w.drift_output_tokens),
        ("replan", replans(w), w.replan_input_tokens, w.replan_output_tokens),
        ("compaction", compactions(w), w.compaction_input_tokens, w.compaction_output_tokens),
        ("plan", w.plans, w.plan_input_tokens, w.plan_output_tokens),
        ("closing summary", w.summaries, w.summary_input_tokens, w.summary_output_tokens),
    ]
    return [
        (
            "task execution",
            w.tasks * w.calls_per_task,
            w.tasks * task_input_tokens(w),
            w.tasks * out,
        ),
        ("verification", verify, verify * w.verify_input_tokens, verify * w.verify_output_tokens),
        *[(kind, n, n * size_in, n * size_out) for kind, n, size_in, size_out in counted],
    ]


def model_calls(w: Workload) -> int:
    """Every model call of the night (0: nothing to price)."""
    return sum(calls for _, calls, _, _ in _kinds(w))


def _main(w: Workload) -> ModelRates:
    """The main model's rates; $0 when the night makes no model call at all."""
    if w.main_price is not None:
        return w.main_price
    if model_calls(w) == 0:
        return ModelRates(input=0.0, output=0.0)
    raise ConfigError(
        f"{TABLE}.main_price",
        "no price for the main model",
        "give [estimate.main_price] input and output ($ per million tokens), a priced "
        "[model] name, or --main-price-input/--main-price-output",
    )


def _bill_exact(w: Workload) -> list[tuple[BillRow, Fraction]]:
    rates = _main(w)
    model = w.main_model or "main model"
    rows = []
    for kind, calls, tin, tout in _kinds(w):
        cost = _usd(tin, tout, rates)
        arithmetic = (
            f"({_k(tin, unit='')} x {_num(rates.input)} + "
            f"{_k(tout, unit='')} x {_num(rates.output)}) / 1000"
        )
        row = BillRow(
            kind=kind,
            model=model,
            calls=calls,
            input_tokens=tin,
            output_tokens=tout,
            input_usd=float(_usd(tin, 0, rates)),
            output_usd=float(_usd(0, tout, rates)),
            cost_usd=float(cost),
            arithmetic=arithmetic,
        )
        rows.append((row, cost))
    return rows


def bill(w: Workload) -> list[BillRow]:
    """The bill per kind of call the night makes, each at the main model's rate; task
    execution first. A kind with no call has no row."""
    return [row for row, _ in _bill_exact(w) if row.calls]


def _baseline(w: Workload) -> tuple[Fraction, Fraction]:
    """(task-execution row, total), exactly."""
    rows = _bill_exact(w)
    return rows[0][1], sum((cost for _, cost in rows), Fraction(0))


def total_usd(w: Workload) -> float:
    """The derived cost of the night."""
    return float(_baseline(w)[1])


def _lever(
    w: Workload,
    key: str,
    name: str,
    new_task_row: Fraction,
    arithmetic: str,
    *,
    applies: bool = True,
    notes: tuple[str, ...] = (),
    per_call: tuple[Fraction, ...] = (),
    task_in: Fraction | None = None,
    task_out: Fraction | None = None,
    ttl_miss_total: Fraction | None = None,
) -> Lever:
    row, total = _baseline(w)
    new_total = total - row + new_task_row
    saving = total - new_total
    return Lever(
        key=key,
        name=name,
        applies=applies,
        task_row_usd=float(new_task_row),
        total_usd=float(new_total),
        saving_usd=float(saving),
        saving_pct=float(saving / total * 100) if total else 0.0,
        arithmetic=arithmetic,
        notes=notes,
        per_call_input_tokens=tuple(float(t) for t in per_call),
        task_input_tokens=None if task_in is None else float(task_in),
        task_output_tokens=None if task_out is None else float(task_out),
        ttl_miss_total_usd=None if ttl_miss_total is None else float(ttl_miss_total),
    )


def _no_agent_task(w: Workload, key: str, name: str) -> Lever:
    """A lever on a night with no agent task: there are no task-execution calls to change."""
    row, _ = _baseline(w)
    return _lever(
        w, key, name, row, "no change", applies=False, notes=("no agent task: nothing to change",)
    )


def cached_call_tokens(w: Workload) -> list[Fraction]:
    """Effective input of each call with prompt caching (tokens billed at the plain input
    price): call 1 writes its whole prefix; each later call reads the previous call's input
    and writes only what is new. With a first call below the minimum cacheable prefix nothing
    is written or read, and every call is its full size."""
    rates = _main(w)
    sizes = call_input_tokens(w)
    if w.first_call_tokens < w.min_cacheable_tokens:
        return [Fraction(s) for s in sizes]
    write, read = _x(rates.cache_write), _x(rates.cache_read)
    out = [w.first_call_tokens * write]
    out += [prev * read + w.growth_per_call_tokens * write for prev in sizes[:-1]]
    return out


def caching_lever(w: Workload) -> Lever:
    """Prompt caching on the task-execution calls, assuming every gap between a task's calls
    is under the 5-minute TTL (and saying what the night costs when none is)."""
    rates = _main(w)
    ttl = f"{CACHE_TTL_MINUTES}-minute TTL"
    name = f"prompt caching (gaps < {ttl})"
    if w.tasks == 0:
        return _no_agent_task(w, "caching", name)
    row, total = _baseline(w)
    effective = cached_call_tokens(w)
    task_in = sum(effective, Fraction(0))
    plain_in = task_input_tokens(w)
    out = w.tasks * output_per_task(w)
    if w.first_call_tokens < w.min_cacheable_tokens:
        return _lever(
            w,
            "caching",
            name,
            row,
            "no change",
            applies=False,
            notes=(
                f"collapses to no saving: the first call's {_k(w.first_call_tokens)} prefix is "
                f"below the model's minimum cacheable length ({w.min_cacheable_tokens:,} "
                "tokens), so no write is accepted, every read misses, and every call bills at "
                "the full input price",
            ),
            per_call=tuple(effective),
            task_in=task_in,
            task_out=Fraction(output_per_task(w)),
        )
    new_row = _usd(w.tasks * task_in, out, rates)
    miss_in = w.tasks * plain_in * _x(rates.cache_write)
    miss_total = total - row + _usd(miss_in, out, rates)
    terms = " + ".join(_k(t) for t in effective)
    return _lever(
        w,
        "caching",
        name,
        new_row,
        f"({_k(w.tasks * task_in, unit='')} x {_num(rates.input)} + "
        f"{_k(out, unit='')} x {_num(rates.output)}) / 1000 = {_money(new_row)} task row",
        notes=(
            f"effective input per call {terms} = {_k(task_in)} per task "
            f"(vs {_k(plain_in)}): writes at {_num(rates.cache_write)}x, reads at "
            f"{_num(rates.cache_read)}x the input price",
            f"assumes every gap between a task's calls is under the {ttl}; with slower tools "
            f"each call pays the {_num(rates.cache_write)}x write and reads nothing, and the "
            f"night costs {_money(miss_total)} instead: measure the gaps, cache only the fast "
            "tasks, or use the 1-hour TTL",
        ),
        per_call=tuple(effective),
        task_in=task_in,
        task_out=Fraction(output_per_task(w)),
        ttl_miss_total=miss_total,
    )


def loop_cap_lever(w: Workload) -> Lever:
    """Cap every task at ``loop_cap_calls`` calls: the dropped calls take their whole re-sent
    context with them; output shrinks in proportion to the calls."""
    rates = _main(w)
    cap = w.loop_cap_calls
    name = f"loop cap at {cap} calls"
    if w.tasks == 0:
        return _no_agent_task(w, "loop_cap", name)
    row, _ = _baseline(w)
    if cap >= w.calls_per_task:
        return _lever(
            w,
            "loop_cap",
            name,
            row,
            "no change",
            applies=False,
            notes=(f"a task already makes {w.calls_per_task} call(s), not more than {cap}",),
        )
    out = output_per_task(w)
    sizes = call_input_tokens(w, cap)
    task_in = Fraction(sum(sizes))
    task_out = Fraction(out * cap, w.calls_per_task)
    new_row = _usd(w.tasks * task_in, w.tasks * task_out, rates)
    return _lever(
        w,
        "loop_cap",
        name,
        new_row,
        f"({_k(w.tasks * task_in, unit='')} x {_num(rates.input)} + "
        f"{_k(w.tasks * task_out, unit='')} x {_num(rates.output)}) / 1000 = "
        f"{_money(new_row)} task row",
        notes=(
            f"input {' + '.join(_k(s) for s in sizes)} = {_k(task_in)} per task "
            f"(vs {_k(task_input_tokens(w))}); output {_k(out)} x "
            f"{cap}/{w.calls_per_task} = {_k(task_out)}",
        ),
        per_call=tuple(Fraction(s) for s in sizes),
        task_in=task_in,
        task_out=task_out,
    )


def tiering_lever(w: Workload) -> Lever:
    """Move ``tiered_share`` of the tasks to the cheaper model (not applicable without one)."""
    rates = _main(w)
    moved = tiered_tasks(w)
    cheap = w.cheap_model or "the cheaper model"
    name = f"{_plural(moved, 'task')} ({_pct(_x(w.tiered_share) * 100, 0)}) on {cheap}"
    if w.tasks == 0:
        return _no_agent_task(w, "tiering", name)
    row, _ = _baseline(w)
    if w.cheap_price is None or moved == 0:
        why = "no cheaper model is priced" if w.cheap_price is None else "no task is moved"
        return _lever(w, "tiering", name, row, "no change", applies=False, notes=(why,))
    t_in, t_out = task_input_tokens(w), output_per_task(w)
    per_main = _usd(t_in, t_out, rates)
    per_cheap = _usd(t_in, t_out, w.cheap_price)
    kept = w.tasks - moved
    new_row = kept * per_main + moved * per_cheap
    return _lever(
        w,
        "tiering",
        name,
        new_row,
        f"{kept} x {_money(per_main, 4)} + {moved} x {_money(per_cheap, 4)} per task = "
        f"{_money(new_row)} task row",
        notes=(
            f"{cheap} at {_rate(w.cheap_price)} against {_rate(rates)}; only the "
            "task-execution calls move",
        ),
    )


def low_effort_lever(w: Workload) -> Lever:
    """A low effort setting on the tiered tasks: their output shrinks by ``low_effort_cut``
    (billed at the main model's output price)."""
    rates = _main(w)
    moved = tiered_tasks(w)
    cut = low_effort_cut(w)
    name = f"low effort on the {_plural(moved, 'tiered task')}"
    if w.tasks == 0:
        return _no_agent_task(w, "low_effort", name)
    row, _ = _baseline(w)
    if moved == 0 or cut == 0:
        return _lever(
            w,
            "low_effort",
            name,
            row,
            "no change",
            applies=False,
            notes=("no task is tiered" if moved == 0 else "no output is cut",),
        )
    saved = _usd(0, cut, rates)
    night_out = w.tasks * output_per_task(w)
    return _lever(
        w,
        "low_effort",
        name,
        row - saved,
        f"{_k(cut, unit='')} x {_num(rates.output)} / 1000 = {_money(saved)} saved",
        notes=(f"output {_k(night_out)} -> {_k(night_out - cut)} for the night",),
        task_out=Fraction(night_out - cut, w.tasks),
    )


def levers(w: Workload) -> list[Lever]:
    """Each lever alone against the baseline total."""
    return [caching_lever(w), loop_cap_lever(w), tiering_lever(w), low_effort_lever(w)]


def hard_cap(w: Workload) -> int:
    """The derived total times ``cap_factor``, rounded up to a whole dollar, and raised when
    the night's own lines need more: the derived total must stay under ``finish_at`` of the
    cap (and so under ``enforce_at``), or the cap this estimate recommends would fail its own
    budget check.

    With the default 1.25 the cap covers the worst case of the caching lever (every call a
    1.25x cache write with no read raises the input bill by 25%) and keeps the derived total
    below 80% of the cap, under the 90% line where a night stops starting tasks."""
    total = _baseline(w)[1]
    by_factor = math.ceil(total * _x(w.cap_factor))
    by_lines = math.ceil(total / min(_x(w.finish_at), _x(w.enforce_at)))
    return max(by_factor, by_lines)


def _cap_rule(w: Workload, total: Fraction) -> str:
    rule = (
        f"{_money(total)} x {_num(w.cap_factor)} = {_money(total * _x(w.cap_factor))}, "
        "rounded up to a whole dollar"
    )
    if math.ceil(total * _x(w.cap_factor)) < hard_cap(w):
        line = min(_x(w.finish_at), _x(w.enforce_at))
        rule += (
            f", raised to {_money(total)} / {_num(line)} = {_money(total / line)} rounded up "
            f"so the derived total stays under the {_pct(line * 100, 0)} line"
        )
    return rule


def recommend(w: Workload) -> Recommendation:
    """The hard cap and headroom, the cost per verified task, the task token budget."""
    _, total = _baseline(w)
    cap = hard_cap(w)
    verified = all_tasks(w) * _x(w.verify_pass_rate)
    return Recommendation(
        derived_usd=float(total),
        hard_cap_usd=cap,
        headroom_usd=float(cap - total),
        cap_rule=_cap_rule(w, total),
        derived_share_of_cap=float(total / cap) if cap else 0.0,
        verified_tasks=float(verified),
        cost_per_verified_task_usd=float(total / verified),
        task_input_tokens=task_input_tokens(w),
        task_output_tokens=output_per_task(w),
        calls_per_task=w.calls_per_task,
    )


def _gap(x: Fraction, word: str) -> str:
    """How far the derived total sits from a line, never shown as a misleading $0.00."""
    if x == 0:
        return "exactly on"
    if x < Fraction(1, 200):
        return f"less than $0.01 {word}"
    return f"{_money(x)} {word}"


def check_budget(w: Workload) -> BudgetCheck | None:
    """The derived total against ``budget_usd``: covered when it stays under the enforcement
    line; None when no cap is given. The cap recommended here is the hard cap, raised when the
    cap's own lines need more: high enough that every task can start."""
    if w.budget_usd is None:
        return None
    _, total = _baseline(w)
    cap = _x(w.budget_usd)
    line = cap * _x(w.enforce_at)
    finish = cap * _x(w.finish_at)
    covers = total <= line
    past_finish = total > finish
    least = Fraction(math.ceil(total * 100 / _x(w.enforce_at)), 100)
    recommended = hard_cap(w)
    enforce_pct, finish_pct = _pct(_x(w.enforce_at) * 100, 0), _pct(_x(w.finish_at) * 100, 0)
    where = f"its enforcement line, {_money(line)} ({enforce_pct} of the cap)"
    if total == 0:
        verdict = "the night makes no model call: it costs nothing, and any cap covers it."
    elif not covers:
        verdict = (
            f"the {_money(cap)} cap is too small for this night: the derived {_money(total)} is "
            f"{_gap(total - line, 'over')} {where}, past which calls are refused. Set "
            f"budget.usd to at least {_money(least)}; ${recommended} is recommended."
        )
    elif past_finish:
        verdict = (
            f"the {_money(cap)} cap covers the derived {_money(total)} only just: it is within "
            f"{where} but past the {finish_pct} line, {_money(finish)}, from which no new task "
            f"starts, so the last tasks may not run; ${recommended} is recommended."
        )
    else:
        verdict = (
            f"the {_money(cap)} cap covers the derived {_money(total)}: "
            f"{_gap(line - total, 'under')} {where}."
        )
    return BudgetCheck(
        cap_usd=float(cap),
        enforce_at=w.enforce_at,
        enforcement_line_usd=float(line),
        finish_at=w.finish_at,
        finish_line_usd=float(finish),
        derived_usd=float(total),
        derived_share_of_cap=float(total / cap) if cap else None,
        covers=covers,
        past_finish_line=past_finish,
        margin_usd=float(line - total),
        least_cap_usd=float(least),
        recommended_cap_usd=recommended,
        verdict=verdict,
    )


def estimate(w: Workload) -> Estimate:
    """The whole derivation for one workload."""
    rows = bill(w)
    row, total = _baseline(w)
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


# --- building a workload from a spec, a table and flags --------------------------------------


def _field_name(loc: tuple[int | str, ...]) -> str:
    return ".".join([TABLE, *(str(p) for p in loc)]) if loc else TABLE


def parse_workload(data: Mapping[str, Any]) -> Workload:
    """Validate a workload mapping; the first problem becomes a ``ConfigError`` naming the
    field (``estimate.<field>``)."""
    try:
        return Workload.model_validate(dict(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        message = "unknown field (a typo?)" if err["type"] == "extra_forbidden" else err["msg"]
        name = _field_name(tuple(err["loc"]))
        flag = "--" + "-".join(str(p) for p in err["loc"]).replace("_", "-")
        raise ConfigError(name, message, f"fix [estimate] in the spec or {flag}") from None


@dataclass(frozen=True)
class Flag:
    """One command-line override: ``--calls-per-task 4`` sets ``calls_per_task``."""

    option: str
    path: tuple[str, ...]
    type: type
    help: str

    @property
    def dest(self) -> str:
        """The argparse attribute: ``workload.calls_per_task``, ``workload.main_price.input``."""
        return ".".join(("workload", *self.path))

    @property
    def metavar(self) -> str:
        return {int: "N", float: "X"}.get(self.type, "NAME")


def _help(description: str | None) -> str:
    text = " ".join((description or "").split())
    return text.replace("%", "%%")


def _flag_type(annotation: Any) -> type:
    """``int`` for ``int`` and ``int | None``, ``float`` likewise, else ``str`` (a ``bool``
    flag takes ``true`` or ``false``)."""
    kinds = set(typing.get_args(annotation)) - {type(None)} or {annotation}
    for kind in (int, float):
        if kinds == {kind}:
            return kind
    return str


def workload_flags() -> list[Flag]:
    """A flag for every workload field, nested price fields included
    (``--main-price-input``)."""
    flags: list[Flag] = []
    for name, info in Workload.model_fields.items():
        if name in ("main_price", "cheap_price"):
            for sub, sub_info in ModelRates.model_fields.items():
                flags.append(
                    Flag(
                        f"--{name}-{sub}".replace("_", "-"),
                        (name, sub),
                        float,
                        _help(f"{name}.{sub}: {sub_info.description}"),
                    )
                )
            continue
        flags.append(
            Flag(
                f"--{name}".replace("_", "-"),
                (name,),
                _flag_type(info.annotation),
                _help(info.description),
            )
        )
    return flags


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
    _main(w)
    return w


# --- text ------------------------------------------------------------------------------------


def _exact(x: Fraction | float | int) -> Fraction:
    """A result back as the decimal it stands for (a float via its shortest repr)."""
    return Fraction(str(x)) if isinstance(x, float) else Fraction(x)


def _dec(x: Fraction | float | int, places: int) -> Decimal:
    x = _exact(x)
    exact = Decimal(x.numerator) / Decimal(x.denominator)
    return exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def _money(x: Fraction | float, places: int = 2) -> str:
    return f"${_dec(x, places):,}"


def _num(x: float | int | Fraction) -> str:
    """A price or factor as written: 5, 0.5, 1.25."""
    d = _dec(x, 6)
    text = f"{d:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _k(tokens: int | float | Fraction, unit: str = "k", min_places: int = 0) -> str:
    """Tokens in thousands: 2,820k, 70.5k, 30.05k, 4.375k."""
    text = f"{_dec(_exact(tokens) / 1000, 3):,f}"
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0").ljust(min_places, "0")
    return f"{whole}.{frac}{unit}" if frac else f"{whole}{unit}"


def _pct(x: Fraction | float, places: int = 1) -> str:
    return f"{_dec(x, places)}%"


def _rate(rates: ModelRates) -> str:
    return f"${_num(rates.input)}/${_num(rates.output)} per MTok"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _header(w: Workload) -> str:
    commands = _plural(w.command_tasks, "command task")
    if w.tasks == 0:
        return f"Night estimate: {commands}, no agent task"
    head = f"Night estimate: {w.tasks} tasks x {w.calls_per_task} calls per task"
    return f"{head}, plus {commands} (no model calls)" if w.command_tasks else head


def _derivation(est: Estimate, w: Workload, add: Callable[[str], None]) -> None:
    first, growth = _k(w.first_call_tokens, min_places=1), _k(w.growth_per_call_tokens)
    add("Per-task input (every call re-sends the whole conversation):")
    add(f"  input(t) = {first} + (t - 1) x {growth}")
    width = max(len(_k(s, min_places=1)) for s in est.call_input_tokens)
    for t, size in enumerate(est.call_input_tokens, start=1):
        add(f"  input({t}) = {first} + {t - 1} x {growth} = {_k(size, min_places=1):>{width}}")
    add(
        f"  per task     {_k(est.task_input_tokens)} input, "
        f"{_k(est.task_output_tokens, min_places=1)} output"
    )
    add(
        f"  x {w.tasks} tasks  {_k(est.night_input_tokens)} input, "
        f"{_k(est.night_output_tokens)} output"
    )
    add(
        f"  a {_ordinal(w.calls_per_task + 1)} call would add {_k(est.next_call_input_tokens)} "
        f"(its whole context), not {growth}:"
    )
    add("  a task's input grows with the square of its calls")
    if compactions_per_task(w):
        note = (
            f"(past {_k(w.compact_at_tokens)} a task compacts its conversation; the bill still "
            "prices every call at its uncompacted size, an upper bound)"
        )
        add(textwrap.fill(note, 96, initial_indent="  ", subsequent_indent="   "))


def _bill_table(est: Estimate, add: Callable[[str], None]) -> None:
    add("Bill, each kind of call at the main model's rate:")
    add("  cost = (input in k x $/MTok + output in k x $/MTok) / 1000")
    head = ("kind", "calls", "input", "output", "arithmetic", "cost")
    table = [
        (
            r.kind,
            str(r.calls),
            _k(r.input_tokens),
            _k(r.output_tokens),
            r.arithmetic,
            _money(r.cost_usd),
        )
        for r in est.bill
    ]
    table.append(("total", str(est.total_calls), "", "", "", _money(est.total_usd)))
    widths = [max(len(row[i]) for row in [head, *table]) for i in range(len(head))]
    for row in [head, *table]:
        left = f"{row[0]:<{widths[0]}}"
        rest = "  ".join(
            f"{cell:<{widths[i]}}" if i == 4 else f"{cell:>{widths[i]}}"
            for i, cell in enumerate(row)
            if i
        )
        add(f"  {left}  {rest}".rstrip())
    add(f"  task execution is {_pct(est.task_share)} of the night")


def _lever_table(est: Estimate, add: Callable[[str], None]) -> None:
    add(f"Levers, each alone against the {_money(est.total_usd)} baseline:")
    lhead = ("lever", "new total", "saving $", "saving %")
    ltable = [
        (lv.name, _money(lv.total_usd), _money(lv.saving_usd), _pct(lv.saving_pct))
        for lv in est.levers
    ]
    lw = [max(len(row[i]) for row in [lhead, *ltable]) for i in range(len(lhead))]
    for lrow in [lhead, *ltable]:
        cells = "  ".join(f"{c:>{lw[i]}}" for i, c in enumerate(lrow) if i)
        add(f"  {lrow[0]:<{lw[0]}}  {cells}")
    for lv in est.levers:
        add(f"  {lv.name}:")
        detail = [] if lv.arithmetic == "no change" else [lv.arithmetic]
        for text in [*detail, *lv.notes]:
            add(textwrap.fill(text, 96, initial_indent="    ", subsequent_indent="      "))
    for note in est.lever_notes:
        add(textwrap.fill(f"({note})", 96, initial_indent="  ", subsequent_indent="   "))


def _recommendation(est: Estimate, w: Workload, add: Callable[[str], None]) -> None:
    rec = est.recommendation
    add("Recommendation:")
    add(f"  hard cap           ${rec.hard_cap_usd} = {rec.cap_rule}")
    add(
        f"  headroom           ${rec.hard_cap_usd}.00 - {_money(rec.derived_usd)} = "
        f"{_money(rec.headroom_usd)} (the derived total is {_pct(rec.derived_share_of_cap * 100)}"
        " of the cap)"
    )
    add(
        f"  verified tasks     {all_tasks(w)} x {_pct(_x(w.verify_pass_rate) * 100, 0)} = "
        f"{_num(rec.verified_tasks)}"
    )
    add(
        f"  per verified task  {_money(rec.derived_usd)} / {_num(rec.verified_tasks)} = "
        f"{_money(rec.cost_per_verified_task_usd)}"
    )
    if w.tasks:
        add(
            f"  task token budget  {_k(rec.task_input_tokens)} in / "
            f"{_k(rec.task_output_tokens, min_places=1)} out per {rec.calls_per_task}-call task"
        )


def _budget(check: BudgetCheck, add: Callable[[str], None]) -> None:
    add("Against the night's cap (budget.usd):")
    add(
        f"  cap                {_money(check.cap_usd)}: enforcement line "
        f"{_money(check.enforcement_line_usd)} ({_pct(_exact(check.enforce_at) * 100, 0)}), "
        f"no new task from {_money(check.finish_line_usd)} "
        f"({_pct(_exact(check.finish_at) * 100, 0)})"
    )
    add(f"  derived            {_money(check.derived_usd)}")
    add(
        f"  least cap          {_money(check.least_cap_usd)} (the derived total / "
        f"{_pct(_exact(check.enforce_at) * 100, 0)}, rounded up to the cent)"
    )
    word = "COVERED" if check.covers else "NOT COVERED"
    add(textwrap.fill(f"{word}: {check.verdict}", 96, initial_indent="  ", subsequent_indent="  "))


def render_text(est: Estimate) -> str:
    """The derivation, the levers table and the recommendation (and the check against the
    cap, when one is given), as printed by the CLI."""
    w = Workload.model_validate(est.workload)
    lines: list[str] = []
    add = lines.append
    add(_header(w))
    if est.total_calls:
        rates = _main(w)
        add(
            f"  main model     {w.main_model or '(unnamed)'} at {_rate(rates)} "
            f"(cache writes {_num(rates.cache_write)}x, reads {_num(rates.cache_read)}x input)"
        )
        if w.cheap_price is not None and w.tasks:
            add(f"  cheaper model  {w.cheap_model or '(unnamed)'} at {_rate(w.cheap_price)}")
    add("")
    if w.tasks:
        _derivation(est, w, add)
        add("")
    if est.total_calls:
        _bill_table(est, add)
    else:
        add("Bill: no model calls (the harness runs each command and verify itself): $0.00")
    add("")
    if w.tasks:
        _lever_table(est, add)
        add("")
    _recommendation(est, w, add)
    if est.budget is not None:
        add("")
        _budget(est.budget, add)
    return "\n".join(lines) + "\n"
