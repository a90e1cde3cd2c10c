"""Over generated nights: money never crosses the cap, and every result explains its own stop.

Each generated night has agent tasks that make model calls through the real gateway. The fake
model answers with usage that never exceeds what was reserved for the call (input at most a
few hundred tokens against a request of more bytes than that, output at most ``max_tokens``),
which is the contract a real provider keeps.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from overnight.core.endings import CLASS, EXIT_CODE, Ending, agrees_with_budgets
from overnight.core.tasks import Task
from overnight.executor import ExecContext
from overnight.models.types import ModelRequest, estimate_input_tokens
from overnight.report.result import shipped_schema
from overnight.store.journal import read_journal
from overnight.testing import FunctionModel, ScriptedExecutor, text_answer, tool_answer, usage_dict
from overnight.testing.fakes import Step
from tests.helpers.nights import load_result, make_repo, make_spec, run_night

MAX_BILLED_INPUT = 200
PADDING = "Context for the task. " * 20  # keeps every execute request well above 200 bytes


@dataclass(frozen=True)
class Call:
    max_tokens: int
    usage: dict[str, Any]


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
    return Call(max_tokens, usage)


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


def fake_model(night: NightPlan) -> FunctionModel:
    by_tag = {
        f"t{i}#{k}": call
        for i, task_calls in enumerate(night.calls)
        for k, call in enumerate(task_calls)
    }
    small = usage_dict(input=150, output=60)

    def answer(request: ModelRequest) -> dict[str, Any]:
        assert estimate_input_tokens(request) > MAX_BILLED_INPUT
        if request.purpose == "execute":
            text = request.messages[0]["content"]
            tag = text[1 : text.index("]")]
            call = by_tag[tag]
            assert call.usage["output_tokens"] <= request.max_tokens
            return text_answer("worked on it", call.usage)
        if request.purpose == "drift":
            verdict = {
                "reasoning": "checked",
                "off_goal_task_ids": [],
                "drift_score": night.drift_score,
            }
            return tool_answer("submit_drift_verdict", verdict, small)
        if request.purpose == "replan":
            return tool_answer("submit_replan", {"reasoning": "nothing to add", "add": []}, small)
        if request.purpose == "summarize":
            return text_answer("A closing note.", small)
        raise AssertionError(f"unexpected purpose {request.purpose}")

    return FunctionModel(answer)


def run_generated(night: NightPlan, root: Path) -> tuple[Path, Any]:
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
    rd, result = run_night(spec, root / "run", model=fake_model(night), executor=executor)
    return rd.path, result


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(night=nights())
def test_money_never_crosses_the_cap_and_the_result_explains_its_stop(night: NightPlan) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, result = run_generated(night, Path(tmp))
        journal = read_journal(run_dir / "spend.jsonl")
        on_disk = load_result(run_dir)

    event(result.stop_reason)
    event(f"summary from {result.wrapup.source}")
    cap = night.usd
    spent = sum(r["usd"] for r in journal if r["kind"] == "spend")
    assert result.spend.total_usd <= cap + 1e-9
    assert spent <= cap + 1e-9
    assert result.spend.total_usd == pytest.approx(spent, abs=1e-6)
    # Ordinary spend stays under the enforcement line; only the summary may use the reserve.
    money = result.budgets.cost_usd
    assert money.enforced_at is not None
    assert money.used <= money.enforced_at + 1e-9
    tokens = result.budgets.tokens
    if tokens.limit is not None:
        assert tokens.enforced_at is not None and tokens.used <= tokens.enforced_at

    assert agrees_with_budgets(result.stop_reason, result.budgets.view())
    ending = Ending(result.ending)
    assert result.exit_code == EXIT_CODE[ending]
    assert result.status == CLASS[ending].value
    assert result.stop_reason.split(":", 1)[0] == result.ending

    schema = shipped_schema()
    jsonschema.validate(result.model_dump(mode="json"), schema)
    jsonschema.validate(on_disk, schema)
    assert on_disk["stop_reason"] == result.stop_reason


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
