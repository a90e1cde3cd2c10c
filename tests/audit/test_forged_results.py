"""A result.json edited after the night, the way a forger who wants the night to look done (or
cheaper) would edit it: each edit is caught, by name, and nothing else is blamed."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from overnight.store.journal import Journal, read_journal
from tests.audit.nights import (
    audited,
    budget_night,
    copy_run,
    result_of,
    rewrite_result,
    work_night,
)
from tests.report.runs import isolated_env

Edit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("forged")
    with isolated_env(base):
        yield base


@pytest.fixture(scope="module")
def night(home: Path) -> Path:
    with isolated_env(home):
        return work_night(home / "work")


@pytest.fixture(scope="module")
def budget(home: Path) -> Path:
    with isolated_env(home):
        return budget_night(home / "budget")


@pytest.fixture
def forged(tmp_path: Path) -> Callable[[Path, Edit], Path]:
    made = iter(range(1000))

    def make(run: Path, edit: Edit) -> Path:
        copy = copy_run(run, tmp_path / f"forged-run-{next(made)}")
        data = result_of(copy)
        edit(data)
        rewrite_result(copy, data)
        return copy

    return make


def disagreements(run: Path, *, rerun: bool = False) -> list[str]:
    audit = audited(run, rerun=rerun)
    assert audit.exit_code == (3 if audit.disagreements else 0)
    return audit.disagreements


def test_the_copied_untouched_run_agrees(night: Path, forged: Callable[[Path, Edit], Path]) -> None:
    assert disagreements(forged(night, lambda _d: None)) == []


def test_a_total_edited_by_one_micro_dollar_is_caught(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    def cheaper(d: dict[str, Any]) -> None:
        d["spend"]["total_usd"] = round(d["spend"]["total_usd"] - 0.000001, 9)

    assert disagreements(forged(night, cheaper)) == ["spend.total_usd"]


def test_a_coherently_lowered_bill_is_caught_by_re_pricing(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    """Total, money block and split all halved together: the result agrees with itself, not
    with the calls it was billed for."""

    def halved(d: dict[str, Any]) -> None:
        half = round(d["spend"]["total_usd"] / 2, 6)
        d["spend"]["total_usd"] = half
        d["budgets"]["cost_usd"]["used"] = half
        d["spend"]["by_purpose"] = {k: round(v / 2, 6) for k, v in d["spend"]["by_purpose"].items()}

    found = disagreements(forged(night, halved))
    assert found == ["budgets.cost_usd", "spend.total_usd", "spend.by_purpose"]


@pytest.mark.parametrize(
    ("budget_name", "field", "change"),
    [
        ("cost_usd", "used", lambda v: v + 0.01),
        ("cost_usd", "at_stop", lambda v: v - 0.001),
        ("cost_usd", "limit", lambda v: v * 10),
        ("cost_usd", "stop_at", lambda v: v + 1),
        ("cost_usd", "refused_at", lambda _v: 9.5),
        ("tokens", "used", lambda v: v - 1),
        ("tokens", "at_stop", lambda v: v + 100),
        ("steps", "used", lambda v: v - 1),
        ("seconds", "at_stop", lambda v: v + 100),
        ("seconds", "limit", lambda v: v * 2),
    ],
)
def test_an_edited_budgets_block_is_caught(
    night: Path,
    forged: Callable[[Path, Edit], Path],
    budget_name: str,
    field: str,
    change: Callable[[Any], Any],
) -> None:
    def edit(d: dict[str, Any]) -> None:
        block = d["budgets"][budget_name]
        block[field] = change(block[field])

    assert f"budgets.{budget_name}" in disagreements(forged(night, edit))


def test_a_budget_stop_rewritten_as_success_is_caught(
    budget: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    """Every field a script reads says GOAL_MET: the budgets, predicate record and queue the
    stop check reads say otherwise."""

    def success(d: dict[str, Any]) -> None:
        d.update(stop_reason="GOAL_MET", ending="GOAL_MET", status="SUCCESS", exit_code=0)
        d.update(resumable=False, alert="none", message="the goal predicate passed")

    found = disagreements(forged(budget, success))
    assert found == ["stop_reason", "verdict"]
    audit = audited(forged(budget, lambda _d: None), rerun=False)
    assert audit.recomputed.stop_reason == "BUDGET_EXHAUSTED:money"


def test_an_edited_stop_reason_alone_is_caught(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["stop_reason"] = "QUEUE_EMPTY_GOAL_UNMET"

    found = disagreements(forged(night, edit))
    assert found[0] == "stop_reason"
    stop = next(
        c for c in audited(forged(night, edit), rerun=False).checks if c.name == "stop_reason"
    )
    assert "recomputed GOAL_MET" in stop.detail and "QUEUE_EMPTY_GOAL_UNMET" in stop.detail


def test_a_forged_predicate_record_is_caught(
    budget: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    def met(d: dict[str, Any]) -> None:
        d["predicate"].update(met=True, exit_code=0)

    assert disagreements(forged(budget, met)) == ["predicate"]


def test_tasks_moved_from_remaining_to_done_are_caught(
    budget: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    def done(d: dict[str, Any]) -> None:
        d["plan"]["done"] += d["plan"]["remaining"]
        d["plan"]["remaining"] = []

    assert disagreements(forged(budget, done)) == ["plan"]


def test_a_verified_entry_removed_from_the_result_is_caught(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    def drop(d: dict[str, Any]) -> None:
        d["verified"] = [v for v in d["verified"] if v["id"] != "a2"]

    found = disagreements(forged(night, drop))
    assert "verified" in found and "branch" in found
    branch = next(c for c in audited(forged(night, drop), rerun=False).checks if c.name == "branch")
    assert "on the branch but not in result.json" in branch.detail


def test_verified_entries_reordered_in_the_result_are_caught(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    def swap(d: dict[str, Any]) -> None:
        v = d["verified"]
        v[0], v[2] = v[2], v[0]

    found = disagreements(forged(night, swap))
    assert "verified" in found and "branch" in found
    branch = next(c for c in audited(forged(night, swap), rerun=False).checks if c.name == "branch")
    assert "another order" in branch.detail


def test_a_commit_swapped_for_another_in_the_result_is_caught(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    """The head commit listed twice, for a1 too: every commit named exists."""

    def same(d: dict[str, Any]) -> None:
        d["verified"][0]["commit"] = d["branch"]["head"]

    found = disagreements(forged(night, same))
    assert {"verified", "branch", "commit a1"} <= set(found)


def test_an_effect_deleted_from_the_result_is_caught(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    def delete(d: dict[str, Any]) -> None:
        d["effects"] = [e for e in d["effects"] if e["tool"] != "webhook"]

    assert disagreements(forged(night, delete)) == ["effects"]
    check = next(
        c for c in audited(forged(night, delete), rerun=False).checks if c.name == "effects"
    )
    assert "webhook of a2" in check.detail and "missing from result.json" in check.detail


def test_an_effect_whose_state_is_changed_is_caught(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    def confirmed(d: dict[str, Any]) -> None:
        for e in d["effects"]:
            if e["tool"] == "webhook":
                e["state"] = "confirmed"

    run = forged(night, confirmed)
    assert disagreements(run) == ["effects"]
    check = next(c for c in audited(run, rerun=False).checks if c.name == "effects")
    assert "'confirmed' in result.json, 'failed' in the ledger" in check.detail


def test_an_effect_the_ledger_does_not_hold_is_caught(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    def invented(d: dict[str, Any]) -> None:
        e = dict(d["effects"][0])
        e.update(key="forged:1", tool="issue_refund", state="confirmed")
        d["effects"].append(e)

    assert disagreements(forged(night, invented)) == ["effects"]


def test_a_result_that_does_not_fit_its_schema_disagrees(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    def broken(d: dict[str, Any]) -> None:
        d["spend"]["total_usd"] = "cheap"

    assert disagreements(forged(night, broken)) == ["result.json"]


def test_a_spend_journal_rewritten_with_valid_checksums_is_caught(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    """A call's booked dollars lowered in the journal, every line's checksum recomputed, and
    result.json made to match the forged journal: the call's recorded usage still prices it at
    what it cost."""
    run = forged(night, lambda _d: None)
    records = read_journal(run / "spend.jsonl")
    victim = next(r for r in records if r["kind"] == "spend" and r["purpose"] == "execute")
    cut = victim["usd"] / 2
    victim["usd"] = cut
    (run / "spend.jsonl").unlink()
    with Journal(run / "spend.jsonl", durable=False) as journal:
        for record in records:
            journal.append(record)
    data = result_of(run)
    lowered = round(data["spend"]["total_usd"] - cut, 9)
    data["spend"]["total_usd"] = lowered
    data["budgets"]["cost_usd"]["used"] = lowered
    data["spend"]["by_purpose"]["execute"] = round(data["spend"]["by_purpose"]["execute"] - cut, 9)
    rewrite_result(run, data)
    found = disagreements(run)
    assert "spend.calls" in found and "spend.total_usd" in found
    calls = next(c for c in audited(run, rerun=False).checks if c.name == "spend.calls")
    assert f"call {victim['id']}" in calls.detail


def test_lowered_prices_in_the_manifest_are_caught(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    run = forged(night, lambda _d: None)
    manifest = json.loads((run / "run.json").read_text())
    manifest["prices"]["fake-opus"]["output"] = 1.0
    (run / "run.json").write_text(json.dumps(manifest))
    found = disagreements(run)
    assert "spend.calls" in found and "spend.total_usd" in found


def test_a_damaged_checkpoint_is_a_disagreement_not_a_crash(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    run = forged(night, lambda _d: None)
    body = (run / "checkpoint.json").read_bytes()
    flipped = body.replace(b'\\"goal_met\\": true', b'\\"goal_met\\": false')
    assert flipped != body
    (run / "checkpoint.json").write_bytes(flipped)
    audit = audited(run, rerun=False)
    assert audit.disagreements == ["checkpoint"] and audit.exit_code == 3


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["spend"].update(cost_per_verified_task=0.0001),
        lambda d: d["wrapup"].update(cost_usd=0.0),
    ],
    ids=["cost_per_verified_task", "wrapup"],
)
def test_figures_derived_from_the_total_are_checked_too(
    night: Path, forged: Callable[[Path, Edit], Path], edit: Edit
) -> None:
    assert disagreements(forged(night, edit)) == ["spend.total_usd"]


def test_a_result_of_another_run_is_caught(
    night: Path, forged: Callable[[Path, Edit], Path]
) -> None:
    def other(d: dict[str, Any]) -> None:
        d["run_id"] = "20200101-000000-abcdef"

    assert disagreements(forged(night, other)) == ["run_id"]
