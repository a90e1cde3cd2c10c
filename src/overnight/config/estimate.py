"""The ``[estimate]`` section of ``night.toml``: the night ``overnight estimate`` prices.

A ``Workload`` states the night's shape (its agent and command tasks, calls per agent task, the
size of each kind of call, the prices, the cap to check) and is validated here, with the two
sizes its validation needs: the output of a task and the tasks the tiering lever moves. The
arithmetic on it lives in ``overnight.estimate``.

The defaults are the reference night: 40 tasks of six calls, a 3.5k first call (3.0k system
prompt + 0.5k brief) growing by 3.3k per call (a 3.0k tool result + the 0.3k previous reply),
4.2k output per task. ``SEED_EXAMPLE`` prices it with the main model at $5/$25 per million
tokens and the cheaper one at $3/$15.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from overnight.core.budget import Price
from overnight.core.errors import ConfigError

#: Where a workload sits in ``night.toml``; prefixes the field named by an error.
TABLE = "estimate"
#: Output of one call when a task's output is not given: the reference's 4.2k over six calls.
OUTPUT_PER_CALL_TOKENS = 700


def as_fraction(value: float | int) -> Fraction:
    """A configured number as the decimal it was written as (0.6 is 3/5, not a binary float)."""
    return Fraction(str(value))


def round_half_up(x: Fraction) -> int:
    """``x`` to the nearest whole number, a half rounded up."""
    return math.floor(x + Fraction(1, 2))


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


def output_per_task(w: Workload) -> int:
    """Output of one agent task: as given, else 700 per call."""
    if w.output_per_task_tokens is not None:
        return w.output_per_task_tokens
    return OUTPUT_PER_CALL_TOKENS * w.calls_per_task


def tiered_tasks(w: Workload) -> int:
    """Tasks the tiering (and low-effort) lever moves: the share of tasks, rounded half up."""
    return round_half_up(w.tasks * as_fraction(w.tiered_share))


#: The reference night: the default workload with the main model at $5/$25 per million tokens
#: (512-token minimum cacheable prefix) and the cheaper one at $3/$15.
SEED_EXAMPLE = Workload(
    main_model="claude-opus-5",
    main_price=ModelRates(input=5.0, output=25.0),
    cheap_model="claude-sonnet-5",
    cheap_price=ModelRates(input=3.0, output=15.0),
    min_cacheable_tokens=512,
)


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
