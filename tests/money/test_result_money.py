"""Whole nights, read through result.json: every cent booked is reported, the stop is judged on
what was used when it was decided, bills the ledger could not foresee are warnings, and every
figure reads as written."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from overnight.clock import FakeClock
from overnight.core.budget import BudgetReading
from overnight.core.endings import agrees_with_budgets
from overnight.messages.types import ModelRequest, estimate_input_tokens
from overnight.models.retry import RetryingClient
from overnight.store.journal import Journal, read_journal
from overnight.store.result import TerminalResult, shipped_schema
from overnight.testing import (
    FunctionModel,
    ScriptedExecutor,
    ScriptedModel,
    text_answer,
    usage_dict,
)
from overnight.testing.fakes import FlakyModel, model_call, unbilled_answer
from tests.helpers.nights import load_result, make_spec, resume_night, run_night

QUIET = {"replan": False, "drift_every": 1000}
OPUS = {"input": 5.0, "output": 25.0}  # $/M; the cache rates follow by the usual multipliers


def agent_tasks(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"a{i}", "title": f"agent {i}", "brief": f"part {i}", "verify": "true"}
        for i in range(n)
    ]


def test_used_is_everything_spent_and_the_stop_is_judged_at_the_stop(
    repo: Path, tmp_path: Path
) -> None:
    """The night drains its queue at $0.89 of $1.00; the closing summary then costs $0.022 and
    takes spending past the 90% line. ``used`` says $0.912 (all of it); the stop reason, which
    the decision took at $0.89, is recomputed from ``at_stop``."""
    model = ScriptedModel(
        execute=text_answer("done", usage_dict(output=35_600)),  # $0.89
        usage=usage_dict(input=400, output=800),  # the summary: $0.022
    )
    executor = ScriptedExecutor(default=[model_call(max_tokens=36_000)])
    spec = make_spec(repo, usd=1.0, tasks=agent_tasks(1), run=QUIET)
    rd, result = run_night(spec, tmp_path / "run", model=model, executor=executor)

    assert result.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"
    money = result.budgets.cost_usd
    assert money.at_stop == 0.89
    assert result.wrapup.source == "model" and result.wrapup.cost_usd == 0.022
    assert money.used == 0.912 == result.spend.total_usd  # what was billed, all of it
    assert money.stop_at is not None and money.used >= money.stop_at > money.at_stop
    assert agrees_with_budgets(result.stop_reason, result.budgets.view())
    # Judged on the final figure, the block would claim the money ran out.
    final = {**result.budgets.view()}
    final["cost_usd"] = BudgetReading(money.used, money.limit, money.stop_at, money.enforced_at)
    assert not agrees_with_budgets(result.stop_reason, final)
    # The tokens block counts the summary's tokens too.
    assert result.budgets.tokens.used == 35_600 + 1_200
    assert result.budgets.tokens.at_stop == 35_600
    on_disk = load_result(rd.path)
    assert on_disk["budgets"]["cost_usd"]["used"] == 0.912
    assert on_disk["budgets"]["cost_usd"]["at_stop"] == 0.89


def test_a_bill_far_above_its_reservation_is_booked_reported_and_stops_the_night(
    repo: Path, tmp_path: Path
) -> None:
    """$0.0043 reserved, $10 billed, against a $0.02 cap."""

    def answer(request: ModelRequest) -> dict[str, Any]:
        if request.purpose == "execute":
            return text_answer("done", usage_dict(output=400_000))  # $10.00
        return text_answer("summary", usage_dict(input=10, output=10))

    model = FunctionModel(answer)
    executor = ScriptedExecutor(default=[model_call(max_tokens=100)])
    spec = make_spec(repo, usd=0.02, tasks=agent_tasks(3), run=QUIET)
    rd, result = run_night(spec, tmp_path / "run", model=model, executor=executor)

    assert result.stop_reason == "BUDGET_EXHAUSTED:money"
    assert [r.purpose for r in model.calls] == ["execute"]  # nothing more was let through
    assert result.plan.remaining == ["a1", "a2"]
    money = result.budgets.cost_usd
    assert result.spend.total_usd == money.used == money.at_stop
    assert money.used == 10.0  # the spend passed the cap: recorded, not hidden
    assert agrees_with_budgets(result.stop_reason, result.budgets.view())
    (warning,) = result.warnings
    assert warning.kind == "over_reservation" and warning.purpose == "execute"
    assert warning.reserved_usd is not None and warning.reserved_usd < 0.005
    assert warning.booked_usd == 10.0
    assert load_result(rd.path)["warnings"][0]["kind"] == "over_reservation"
    traced = [e for e in read_journal(rd.trace) if e.get("warnings")]
    assert traced and traced[0]["warnings"][0]["kind"] == "over_reservation"


def test_answers_without_usage_are_booked_at_their_worst_case_never_at_zero(
    repo: Path, tmp_path: Path
) -> None:
    def answer(request: ModelRequest) -> dict[str, Any]:
        return unbilled_answer("summary" if request.purpose == "summarize" else "done")

    model = FunctionModel(answer)
    executor = ScriptedExecutor(default=[model_call(max_tokens=2_000)])
    spec = make_spec(repo, usd=5.0, tasks=agent_tasks(2), run=QUIET)
    rd, result = run_night(spec, tmp_path / "run", model=model, executor=executor)

    spent = [r for r in read_journal(rd.spend) if r["kind"] == "spend"]
    assert len(spent) == 3  # two execute calls and the summary
    assert all(r["usd"] == r["reserved_usd"] > 0 for r in spent)
    assert result.spend.total_usd == pytest.approx(sum(r["usd"] for r in spent))
    assert result.spend.total_usd > 0
    assert [w.kind for w in result.warnings] == ["usage_unknown"] * 3
    assert [w.purpose for w in result.warnings] == ["execute", "execute", "summarize"]
    execute = next(r for r in model.calls if r.purpose == "execute")
    expected = (estimate_input_tokens(execute) * 5.0 + 2_000 * 25.0) / 1e6
    assert result.warnings[0].booked_usd == pytest.approx(expected)


def test_every_attempt_of_a_night_is_booked(repo: Path, tmp_path: Path) -> None:
    """An SDK-backed provider (here a fake behind the real retry policy) whose streams break
    twice on every execute call before answering."""

    def failures(request: ModelRequest) -> list[str]:
        return ["dropped", "overloaded", "timeout"] if request.purpose == "execute" else []

    clock = FakeClock()
    flaky = FlakyModel(lambda r: text_answer("done", usage_dict(input=100, output=100)), failures)
    client = RetryingClient(
        flaky, sleep=clock.advance, monotonic=clock.monotonic, jitter=lambda: 0.0
    )
    executor = ScriptedExecutor(default=[model_call(max_tokens=1_000)])
    spec = make_spec(repo, usd=5.0, tasks=agent_tasks(2), run=QUIET)
    rd, result = run_night(spec, tmp_path / "run", model=client, executor=executor, clock=clock)

    records = read_journal(rd.spend)
    assert sum(r["kind"] == "reserve" for r in records) == 2 * 4 + 1  # the summary answers first
    assert sum(r["kind"] == "release" for r in records) == 2  # the two 529s
    kinds = [w.kind for w in result.warnings]
    assert kinds == ["attempt_failed"] * 4
    assert result.spend.model_calls == 2 * 3 + 1
    answered = 100 * 5.0 / 1e6 + 100 * 25.0 / 1e6
    worst = result.warnings[0].reserved_usd
    assert worst is not None and result.warnings[0].booked_usd == worst
    assert result.spend.by_purpose["execute"] == pytest.approx(2 * (2 * worst + answered))


def test_result_json_figures_read_as_written(repo: Path, tmp_path: Path) -> None:
    model = ScriptedModel(
        execute=text_answer("done", usage_dict(input=333, output=777)),
        usage=usage_dict(input=111, output=99),
    )
    executor = ScriptedExecutor(default=[model_call(max_tokens=1_000)] * 3)
    spec = make_spec(
        repo,
        usd=5.0,
        hours=0.1,
        tasks=agent_tasks(2),
        budget={"steps": 10, "tokens": 100_000},
        run=QUIET,
    )
    rd, _result = run_night(spec, tmp_path / "run", model=model, executor=executor)
    text = (rd.path / "result.json").read_text()
    data = json.loads(text)
    money, steps = data["budgets"]["cost_usd"], data["budgets"]["steps"]
    assert money["enforced_at"] == 4.6 and '"enforced_at": 4.6,' in text
    assert money["stop_at"] == 4.5
    assert data["budgets"]["seconds"]["limit"] == 360.0
    assert data["budgets"]["seconds"]["enforced_at"] == 331.2
    for block in (steps, data["budgets"]["tokens"]):
        for key in ("used", "limit", "stop_at", "enforced_at", "at_stop"):
            assert type(block[key]) is int, (key, block)
    assert '"used": 2' in text  # two steps, not 2.0
    # No float noise anywhere: no number with a run of 0s or 9s after its digits.
    assert not re.search(r"\d\.\d*(0000000|9999999)\d", text), text
    jsonschema.validate(data, shipped_schema())


def test_a_result_written_before_at_stop_existed_is_still_read_by_its_used(
    repo: Path, tmp_path: Path
) -> None:
    """An older result.json has no ``at_stop`` and no ``warnings``: it still validates, and its
    ``used`` (then the figure at the stop) is what its stop reason is checked against."""
    model = ScriptedModel(execute=text_answer("done", usage_dict(output=35_600)))
    executor = ScriptedExecutor(default=[model_call(max_tokens=36_000)])
    spec = make_spec(repo, usd=1.0, tasks=agent_tasks(1), run=QUIET)
    rd, _result = run_night(spec, tmp_path / "run", model=model, executor=executor)
    data = load_result(rd.path)
    del data["warnings"]
    for block in data["budgets"].values():
        block["used"] = block.pop("at_stop")
    jsonschema.validate(data, shipped_schema())
    older = TerminalResult.model_validate(data)
    assert older.budgets.cost_usd.at_stop is None and older.warnings == []
    assert agrees_with_budgets(older.stop_reason, older.budgets.view())
    data["budgets"]["cost_usd"]["used"] = 0.95  # past the 90% line: this stop would disagree
    assert not agrees_with_budgets(
        older.stop_reason, TerminalResult.model_validate(data).budgets.view()
    )


def test_a_reservation_left_without_an_answer_counts_at_its_worst_case_and_is_reported(
    repo: Path, tmp_path: Path
) -> None:
    """A process killed during a call leaves its reservation in the journal with no answer.
    The resumed run counts it at its worst case, in spend and in the warnings."""
    model = ScriptedModel(execute=text_answer("done", usage_dict(output=8_000)))  # $0.20
    executor = ScriptedExecutor(default=[model_call(max_tokens=8_000)])
    spec = make_spec(repo, usd=0.5, tasks=agent_tasks(4), run=QUIET)
    rd, first = run_night(spec, tmp_path / "run", model=model, executor=executor)
    assert first.stop_reason == "BUDGET_EXHAUSTED:money"
    with Journal(rd.spend, durable=True) as journal:  # the call a kill interrupted
        journal.append(
            {"kind": "reserve", "id": "killed", "usd": 0.25, "tokens": 9_000, "purpose": "execute"}
        )
    _rd, again = resume_night(rd.path, {"usd": 5.0}, model=model, executor=executor)

    unanswered = [w for w in again.warnings if w.kind == "unanswered_reservation"]
    assert len(unanswered) == 1 and unanswered[0].booked_usd == 0.25
    booked = sum(r["usd"] for r in read_journal(rd.spend) if r["kind"] == "spend")
    assert again.spend.total_usd == pytest.approx(booked + 0.25)
    assert again.budgets.cost_usd.used == again.spend.total_usd
