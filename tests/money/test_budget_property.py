"""Over generated nights: no reservation crosses the cap, every cent a provider may bill is
booked, and every result explains its own stop.

Each generated night has agent tasks that make model calls through the real gateway and the
real retry policy. The fake provider behind them keeps the contract of a real one for most
calls (usage within what was reserved: input at most a few hundred tokens against a request
of more bytes than that, output at most ``max_tokens``), and breaks it for others: it bills
many times the worst case, omits its usage, sends it in a foreign shape or with an unreadable
count, and fails attempts the ways a network does (529 before any output, a dropped stream, a
timeout, an error event inside a stream, a failed answer that reports its usage).

What must hold whatever it does:

- a reservation never takes booked-plus-held money past the line it is checked against (the
  enforcement line for ordinary calls, the cap for the closing summary);
- the total spent never exceeds the cap, except by what providers billed above their
  reservations, and each such bill is a warning in ``result.json``;
- every attempt that may have been billed is booked, every unknown bill is booked at its
  worst case, with a warning, and an attempt that cannot have been billed is released;
- ``budgets.cost_usd.used`` is everything spent, ``at_stop`` everything booked before the
  stop was decided, and the stop reason agrees with the budgets block.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from overnight.clock import FakeClock
from overnight.core.budget import money_line_nanos, to_nanos
from overnight.core.endings import CLASS, EXIT_CODE, Ending, agrees_with_budgets
from overnight.core.tasks import Task
from overnight.messages.types import ModelRequest, estimate_input_tokens
from overnight.models.retry import RetryingClient
from overnight.seams import ExecContext
from overnight.store.journal import read_journal
from overnight.store.result import shipped_schema
from overnight.testing import FunctionModel, ScriptedExecutor, text_answer, tool_answer, usage_dict
from overnight.testing.fakes import (
    FlakyModel,
    Step,
    foreign_usage_answer,
    malformed_usage_answer,
    over_billed,
    unbilled_answer,
)
from tests.helpers.nights import load_result, make_repo, make_spec, run_night

MAX_BILLED_INPUT = 200
PADDING = "Context for the task. " * 20  # keeps every execute request well above 200 bytes
MAX_ATTEMPTS = 4

#: Failures a provider may have billed, and those it cannot have.
BILLABLE = frozenset({"dropped", "timeout", "stream_error", "failed_billed"})
UNBILLED = frozenset({"overloaded", "refused"})
#: How an answer bills: within its reservation, far above it, not at all, in a foreign shape,
#: or with a count that cannot be read.
BEHAVIOURS = ("fair", "over", "no_usage", "foreign", "malformed")


@dataclass(frozen=True)
class Call:
    max_tokens: int
    usage: dict[str, Any]
    behaviour: str
    failures: tuple[str, ...]
    factor: int = 3


@dataclass(frozen=True)
class NightPlan:
    usd: float
    tokens: int | None
    steps: int | None
    retries: int
    predicate: str
    drift_score: float
    verifies: tuple[str, ...]
    calls: tuple[tuple[Call, ...], ...]
    summary: str
    summary_failures: tuple[str, ...]


failure_kinds = st.sampled_from(
    ["overloaded", "dropped", "timeout", "stream_error", "failed_billed", "overloaded"]
)
# A non-retryable refusal ends the night; it comes last in a call's failures, when at all.
failure_lists = st.tuples(
    st.lists(failure_kinds, max_size=MAX_ATTEMPTS - 1),
    st.sampled_from([False] * 12 + [True]),
).map(lambda pair: (*pair[0], "refused") if pair[1] else tuple(pair[0]))
behaviours = st.sampled_from(["fair"] * 6 + ["over", "no_usage", "foreign", "malformed"])


@st.composite
def calls(draw: st.DrawFn) -> Call:
    max_tokens = draw(st.integers(1, 40_000))
    output = draw(st.integers(0, max_tokens))
    left = MAX_BILLED_INPUT
    billed_input = []
    for _ in range(4):  # fresh input, cache reads, 5-minute writes, 1-hour writes
        n = draw(st.integers(0, left))
        billed_input.append(n)
        left -= n
    fresh, read, write_5m, write_1h = billed_input
    usage = usage_dict(
        input=fresh,
        output=output,
        cache_read=read,
        cache_write_5m=write_5m,
        cache_write_1h=write_1h,
    )
    failures = draw(st.sampled_from([(), (), ()]) | failure_lists)
    return Call(max_tokens, usage, draw(behaviours), failures, factor=draw(st.integers(2, 50)))


@st.composite
def nights(draw: st.DrawFn) -> NightPlan:
    n_tasks = draw(st.integers(1, 8))
    return NightPlan(
        usd=draw(st.floats(0.01, 0.3) | st.floats(0.01, 3.0)),
        tokens=draw(
            st.sampled_from([False, False, True]).flatmap(
                lambda limited: st.integers(500, 200_000) if limited else st.none()
            )
        ),
        steps=draw(st.none() | st.integers(1, 12)),
        retries=draw(st.integers(0, 1)),
        predicate=draw(st.sampled_from(["false", "false", "false", "true"])),
        drift_score=draw(st.sampled_from([0.0, 0.0, 0.4, 0.9])),
        verifies=tuple(
            draw(
                st.lists(
                    st.sampled_from(["true", "false", "exit 2"]), min_size=n_tasks, max_size=n_tasks
                )
            )
        ),
        calls=tuple(tuple(draw(st.lists(calls(), min_size=0, max_size=4))) for _ in range(n_tasks)),
        summary=draw(st.sampled_from(["fair", "fair", "over", "no_usage"])),
        summary_failures=draw(st.sampled_from([(), ()]) | failure_lists),
    )


def tagged_call(tag: str, max_tokens: int) -> Step:
    """One execute call marking a 1-hour cache breakpoint, so that any cache write the answer
    bills is covered by the reservation."""

    def step(task: Task, ctx: ExecContext) -> None:
        ctx.call_model(
            ModelRequest(
                model=ctx.model,
                purpose="execute",
                system="You carry out one task in a repository.",
                messages=[{"role": "user", "content": f"[{tag}] {task.brief}\n{PADDING}"}],
                max_tokens=max_tokens,
                cache_ttl="1h",
            )
        )

    return step


class Provider:
    """The fake provider of one night: answers by the plan, and remembers how each answer
    that reached the gateway billed."""

    def __init__(self, night: NightPlan) -> None:
        self.night = night
        self.by_tag = {
            f"t{i}#{k}": call
            for i, task_calls in enumerate(night.calls)
            for k, call in enumerate(task_calls)
        }
        self.answered: list[str] = []

    def call_of(self, request: ModelRequest) -> Call | None:
        if request.purpose != "execute":
            return None
        content = request.messages[0]["content"]
        if not isinstance(content, str):  # a budget notice turned it into blocks
            content = "".join(b.get("text", "") for b in content)
        return self.by_tag[content[1 : content.index("]")]]

    def failures(self, request: ModelRequest) -> list[str]:
        call = self.call_of(request)
        if call is not None:
            return list(call.failures)
        if request.purpose == "summarize":
            return list(self.night.summary_failures)
        return []

    def answer(self, request: ModelRequest) -> dict[str, Any]:
        assert estimate_input_tokens(request) > MAX_BILLED_INPUT
        small = usage_dict(input=150, output=min(60, request.max_tokens))
        call = self.call_of(request)
        if call is not None:
            self.answered.append(call.behaviour)
            return bill(request, call.behaviour, call.factor, call.usage)
        if request.purpose == "drift":
            verdict = {
                "reasoning": "checked",
                "off_goal_task_ids": [],
                "drift_score": self.night.drift_score,
            }
            self.answered.append("fair")
            return tool_answer("submit_drift_verdict", verdict, small)
        if request.purpose == "replan":
            self.answered.append("fair")
            return tool_answer("submit_replan", {"reasoning": "nothing to add", "add": []}, small)
        if request.purpose == "summarize":
            self.answered.append(self.night.summary)
            return bill(request, self.night.summary, 5, small)
        raise AssertionError(f"unexpected purpose {request.purpose}")


def bill(
    request: ModelRequest, behaviour: str, factor: int, usage: dict[str, Any]
) -> dict[str, Any]:
    if behaviour == "fair":
        assert usage["output_tokens"] <= request.max_tokens
        return text_answer("worked on it", usage)
    if behaviour == "over":
        return over_billed(request, factor)
    if behaviour == "no_usage":
        return unbilled_answer("worked on it")
    if behaviour == "foreign":
        return foreign_usage_answer("worked on it")
    return malformed_usage_answer(1.5)


def run_generated(night: NightPlan, root: Path) -> tuple[Path, Any, Provider, FlakyModel]:
    repo = make_repo(root / "repo")
    tasks = [
        {"id": f"t{i}", "title": f"task {i}", "brief": f"part {i} of the work", "verify": verify}
        for i, verify in enumerate(night.verifies)
    ]
    budget: dict[str, Any] = {}
    if night.tokens is not None:
        budget["tokens"] = night.tokens
    if night.steps is not None:
        budget["steps"] = night.steps
    spec = make_spec(
        repo,
        usd=night.usd,
        predicate=night.predicate,
        tasks=tasks,
        budget=budget,
        run={"retries": night.retries, "drift_every": 2},
    )
    executor = ScriptedExecutor(
        {
            f"t{i}": [tagged_call(f"t{i}#{k}", c.max_tokens) for k, c in enumerate(task_calls)]
            for i, task_calls in enumerate(night.calls)
        }
    )
    provider = Provider(night)
    flaky = FlakyModel(FunctionModel(provider.answer).complete, provider.failures)
    clock = FakeClock()
    client = RetryingClient(
        flaky,
        max_attempts=MAX_ATTEMPTS,
        sleep=clock.advance,
        monotonic=clock.monotonic,
        jitter=lambda: 0.0,
    )
    rd, result = run_night(spec, root / "run", model=client, executor=executor, clock=clock)
    return rd.path, result, provider, flaky


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(night=nights())
def test_money_never_crosses_the_cap_and_the_result_explains_its_stop(night: NightPlan) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, result, provider, flaky = run_generated(night, Path(tmp))
        journal = read_journal(run_dir / "spend.jsonl")
        on_disk = load_result(run_dir)

    event(result.stop_reason)
    event(f"summary from {result.wrapup.source}")
    warned = [w.kind for w in result.warnings]
    for kind in sorted(set(warned)):
        event(f"warned {kind}")

    cap = to_nanos(night.usd, up=False)
    enforced = money_line_nanos(night.usd, 0.92)

    # Walk the journal: no reservation crossed its line; every one was closed.
    booked = 0
    open_: dict[str, dict[str, Any]] = {}
    over_excess = 0
    over_bills = 0
    at_stop: int | None = None
    for rec in journal:
        if rec["kind"] == "reserve":
            if rec["purpose"] == "summarize" and at_stop is None:
                at_stop = booked
            open_[rec["id"]] = rec
            held = sum(to_nanos(r["usd"]) for r in open_.values())
            line = cap if rec["purpose"] == "summarize" else enforced
            assert booked + held <= line, rec
        elif rec["kind"] == "release":
            open_.pop(rec["id"])
        else:
            reserved = open_.pop(rec["id"])
            spent = to_nanos(rec["usd"])
            booked += spent
            if spent > to_nanos(reserved["usd"]) or rec["tokens"] > reserved["tokens"]:
                over_bills += 1
                over_excess += max(0, spent - to_nanos(reserved["usd"]))
            if rec["usage"] is None:  # an unknown bill: booked at exactly its worst case
                assert spent == to_nanos(reserved["usd"]), rec
    assert open_ == {}

    # The total: never past the cap but by what was billed above its reservation, and then
    # with a warning for each such bill.
    total = to_nanos(result.spend.total_usd)
    assert total == booked == to_nanos(result.budgets.cost_usd.used)
    assert total <= cap + over_excess
    assert warned.count("over_reservation") == over_bills
    if over_bills == 0:
        assert total <= cap

    # Every attempt accounted for: billable failures booked, unbilled ones released, unknown
    # bills booked at the worst case.
    made = [kind for _request, kind in flaky.attempts]
    assert warned.count("attempt_failed") == sum(k in BILLABLE for k in made)
    assert sum(r["kind"] == "release" for r in journal) == sum(k in UNBILLED for k in made)
    assert warned.count("usage_unknown") == sum(
        b in ("no_usage", "foreign") for b in provider.answered
    )
    assert warned.count("answer_unreadable") == provider.answered.count("malformed")
    assert result.spend.model_calls == sum(r["kind"] == "spend" for r in journal)

    # ``at_stop`` is what was booked when the stop was decided; ordinary spend stays under the
    # enforcement line unless a provider over-billed.
    money = result.budgets.cost_usd
    assert money.at_stop is not None and money.enforced_at is not None
    assert to_nanos(money.at_stop) == (booked if at_stop is None else at_stop)
    if over_bills == 0:
        assert money.at_stop <= money.enforced_at
        tokens = result.budgets.tokens
        if tokens.limit is not None:
            assert tokens.enforced_at is not None and tokens.at_stop is not None
            assert tokens.at_stop <= tokens.enforced_at

    assert agrees_with_budgets(result.stop_reason, result.budgets.view())
    ending = Ending(result.ending)
    assert result.exit_code == EXIT_CODE[ending]
    assert result.status == CLASS[ending].value
    assert result.stop_reason.split(":", 1)[0] == result.ending

    schema = shipped_schema()
    jsonschema.validate(result.model_dump(mode="json"), schema)
    jsonschema.validate(on_disk, schema)
    assert on_disk["stop_reason"] == result.stop_reason
    assert len(on_disk["warnings"]) == len(result.warnings)


# -- the check is not vacuous -------------------------------------------------------------------


def test_a_result_claiming_the_wrong_budget_or_ending_disagrees(repo: Path, tmp_path: Path) -> None:
    tasks = [
        {"id": f"t{i}", "title": f"task {i}", "brief": f"part {i}", "verify": "true"}
        for i in range(3)
    ]
    spec = make_spec(repo, usd=0.05, tasks=tasks, run={"replan": False})
    model = FunctionModel(
        lambda r: text_answer("ok", usage_dict(input=100, output=min(1_000, r.max_tokens)))
    )
    executor = ScriptedExecutor(default=[tagged_call("x", 1_000)])
    _rd, result = run_night(spec, tmp_path / "run", model=model, executor=executor)

    assert result.stop_reason == "BUDGET_EXHAUSTED:money"
    view = result.budgets.view()
    assert agrees_with_budgets(result.stop_reason, view)
    assert not agrees_with_budgets("BUDGET_EXHAUSTED:tokens", view)
    assert not agrees_with_budgets("BUDGET_EXHAUSTED:steps", view)
    assert not agrees_with_budgets("TIME_LIMIT:wall_clock", view)
    # Endings checked after the budgets cannot be reported over an exhausted money block.
    assert not agrees_with_budgets("DRIFT_DETECTED", view)
    assert not agrees_with_budgets("NO_PROGRESS", view)
    assert not agrees_with_budgets("QUEUE_EMPTY_GOAL_UNMET", view)
    # The two that outrank budgets may.
    assert agrees_with_budgets("GOAL_MET", view)
    assert agrees_with_budgets("UNRECOVERABLE_ERROR:internal_error", view)
