"""Attacks on the run's own state: budgets, spend and checkpoints rewritten between a stop
and its resume. Inside the sandbox the run directory is out of reach (see the escape
attacks); these are the checks resume makes whoever wrote the files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.attacks.night import AttackNight, Outcome

TASKS = [
    {"id": f"t{i}", "title": f"task {i}", "brief": "Fix add in calc.py.", "verify": "false"}
    for i in range(3)
]


def stopped(tmp_path: Path) -> tuple[AttackNight, Outcome]:
    """A night stopped by its steps budget after one task: resumable."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    night = AttackNight(tmp_path, tasks=[dict(t) for t in TASKS], budget={"steps": 2})
    night.commands = ["python3", "false"]
    outcome = night.play([])
    assert outcome.result["stop_reason"] == "BUDGET_EXHAUSTED:steps", outcome.stderr
    assert outcome.result["resumable"] is True
    return night, outcome


def edit_json(path: Path, change: dict[str, Any], key: str = "budget") -> None:
    data = json.loads(path.read_text())
    data[key].update(change)
    path.write_text(json.dumps(data))


def assert_refused(night: AttackNight, again: Outcome, checkpoint: bytes, says: str) -> None:
    assert again.exit_code == 4, again.stderr
    assert again.result["stop_reason"] == "UNRECOVERABLE_ERROR:checkpoint_corrupt"
    assert says in again.result["message"]
    assert (night.run_dir / "checkpoint.json").read_bytes() == checkpoint  # left as is
    assert again.result["spend"]["model_calls"] == 0 or again.result["wrapup"]["cost_usd"] == 0
    night.assert_key_nowhere(again)


@pytest.mark.parametrize(
    "change", [{"usd": 1000.0}, {"steps": None}, {"hours": 100.0}, {"enforce_at": 1.0}]
)
def test_a_budget_raised_in_spec_json_is_refused_on_resume(
    tmp_path: Path, change: dict[str, Any]
) -> None:
    night, _ = stopped(tmp_path)
    checkpoint = (night.run_dir / "checkpoint.json").read_bytes()
    edit_json(night.run_dir / "spec.json", change)
    again = night.cli("resume", night.run_dir, "--quiet")
    assert_refused(night, again, checkpoint, "spec.json allows more")


def test_an_explicit_raise_is_recorded_and_a_later_edit_still_refused(tmp_path: Path) -> None:
    night, _ = stopped(tmp_path)
    raised = night.cli("resume", night.run_dir, "--quiet", "--steps", "4")
    assert raised.result["budgets"]["steps"]["limit"] == 4
    assert json.loads((night.run_dir / "spec.json").read_text())["budget"]["steps"] == 4
    assert raised.result["resumable"] is True
    checkpoint = (night.run_dir / "checkpoint.json").read_bytes()
    edit_json(night.run_dir / "spec.json", {"steps": 40})
    again = night.cli("resume", night.run_dir, "--quiet")
    assert_refused(night, again, checkpoint, "steps")


def test_a_stricter_spec_json_is_accepted(tmp_path: Path) -> None:
    # What a crash between the two writes of an explicit raise leaves: spec.json at the
    # older, stricter figure. It is no attack, and the stricter figure holds.
    night, _ = stopped(tmp_path)
    edit_json(night.run_dir / "spec.json", {"usd": 4.0})
    again = night.cli("resume", night.run_dir, "--quiet", "--steps", "3")
    assert again.exit_code in (0, 2, 3), again.stderr
    assert again.result["budgets"]["cost_usd"]["limit"] == 4.0


@pytest.mark.parametrize("keep", [0.0, 0.5])
def test_an_emptied_or_cut_journal_never_resets_spend(tmp_path: Path, keep: float) -> None:
    night, first = stopped(tmp_path)
    spent = first.result["budgets"]["cost_usd"]["used"]
    assert spent > 0
    journal = night.run_dir / "spend.jsonl"
    data = journal.read_bytes()
    journal.write_bytes(data[: int(len(data) * keep)])
    # The steps budget is still spent: the resume stops at once and spends nothing new on
    # tasks, so what it reports as used is what it took from the checkpoint.
    again = night.cli("resume", night.run_dir, "--quiet")
    assert again.result["stop_reason"] == "BUDGET_EXHAUSTED:steps", again.stderr
    assert again.result["budgets"]["cost_usd"]["used"] >= spent
    assert again.result["spend"]["total_usd"] >= spent


def test_a_checkpoint_copied_from_another_run_is_refused(tmp_path: Path) -> None:
    donor, _ = stopped(tmp_path / "a")
    victim, _ = stopped(tmp_path / "b")
    foreign = (donor.run_dir / "checkpoint.json").read_bytes()
    (victim.run_dir / "checkpoint.json").write_bytes(foreign)
    again = victim.cli("resume", victim.run_dir, "--quiet")
    assert_refused(victim, again, foreign, "belongs to run")
