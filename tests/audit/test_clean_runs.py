"""Untouched runs audit clean, whatever their ending: the audit's recomputation agrees with
what the harness wrote, so a disagreement means something was changed after the fact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.audit.nights import (
    audited,
    budget_night,
    ending_night,
    outside_night,
    result_of,
    work_night,
)
from tests.helpers.nights import resume_night

ENDINGS = [
    "NO_PROGRESS",
    "QUEUE_EMPTY_GOAL_UNMET",
    "DRIFT_DETECTED",
    "TIME_LIMIT:wall_clock",
    "TIME_LIMIT:sigterm",
    "UNRECOVERABLE_ERROR:internal_error",
]


def test_a_goal_met_night_with_commits_effects_and_money_audits_clean(tmp_path: Path) -> None:
    run = work_night(tmp_path)
    audit = audited(run)
    assert audit.disagreements == [], [c for c in audit.checks if not c.agrees]
    assert audit.exit_code == 0 and audit.agrees
    names = [c.name for c in audit.checks]
    for expected in (
        "stop_reason",
        "verdict",
        "budgets.cost_usd",
        "budgets.tokens",
        "budgets.steps",
        "budgets.seconds",
        "spend.total_usd",
        "branch",
        "effects",
    ):
        assert expected in names
    # one commit check per verified task, a protection and a re-run per commit
    for tid in ("a1", "a3", "a2", "c1"):
        assert f"commit {tid}" in names and f"verify {tid}" in names
    assert "protected a3" not in names  # a3 changed nothing: no commit to look at
    r = result_of(run)
    assert audit.recomputed.stop_reason == "GOAL_MET"
    assert audit.recomputed.total_usd == r["spend"]["total_usd"] > 0
    assert audit.recomputed.commits == [v["commit"] for v in r["verified"] if v["commit"]]
    assert len(audit.recomputed.commits) == 3
    assert "run.json" in audit.recomputed.prices_from
    by_name = {c.name: c for c in audit.checks}
    # The spec's own command task wrote under tests/: the harness allows it, so does the audit.
    assert "tests/data.txt" in by_name["protected c1"].detail
    assert "2 ledger row(s)" in by_name["effects"].detail
    assert "sandboxed: exit 0" in by_name["verify a1"].detail


def test_the_run_records_the_prices_it_bills_at(tmp_path: Path) -> None:
    run = work_night(tmp_path)
    prices = json.loads((run / "run.json").read_text())["prices"]
    assert prices["fake-opus"] == {
        "input": 5.0,
        "output": 25.0,
        "cache_read": 0.5,
        "cache_write_5m": 6.25,
        "cache_write_1h": 10.0,
        "tiers": [],
    }


def test_a_budget_stop_with_a_refused_call_audits_clean(tmp_path: Path) -> None:
    run = budget_night(tmp_path)
    audit = audited(run)
    assert audit.disagreements == [], [c for c in audit.checks if not c.agrees]
    assert audit.recomputed.stop_reason == "BUDGET_EXHAUSTED:money"
    money = next(c for c in audit.checks if c.name == "budgets.cost_usd")
    assert "exhausted" in money.detail and "not exhausted" not in money.detail
    # the closing summary is spent after the stop: the at-stop figure leaves it out
    r = result_of(run)
    assert audit.recomputed.at_stop_usd == r["budgets"]["cost_usd"]["at_stop"]
    assert audit.recomputed.total_usd == r["spend"]["total_usd"]
    assert audit.recomputed.at_stop_usd < audit.recomputed.total_usd


def test_a_resumed_run_audits_clean(tmp_path: Path) -> None:
    """The budget night resumed with more money: two processes, two closing summaries, one
    result; the stop and its money are those of the last process."""
    run = budget_night(tmp_path)
    from overnight.testing import ScriptedExecutor, ScriptedModel, text_answer, usage_dict
    from overnight.testing.fakes import model_call

    model = ScriptedModel(execute=text_answer("done", usage_dict(input=100, output=100)))
    _, result = resume_night(
        run, {"usd": 3.0}, model=model, executor=ScriptedExecutor(default=[model_call(500)])
    )
    assert result.resumes == 1
    audit = audited(run)
    assert audit.disagreements == [], [c for c in audit.checks if not c.agrees]
    assert audit.recomputed.stop_reason == result.stop_reason


@pytest.mark.parametrize("ending", ENDINGS)
def test_every_other_ending_audits_clean(tmp_path: Path, ending: str) -> None:
    run = ending_night(tmp_path, ending)
    audit = audited(run)
    assert audit.disagreements == [], [c for c in audit.checks if not c.agrees]
    assert audit.recomputed.stop_reason == ending


def test_a_night_without_a_model_audits_clean_without_rerun(tmp_path: Path) -> None:
    run = outside_night(tmp_path)
    audit = audited(run, rerun=False)
    assert audit.disagreements == []
    assert not any(c.name.startswith("verify ") for c in audit.checks)
    assert audit.recomputed.total_usd == 0.0
