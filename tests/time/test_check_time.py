"""Verify and the goal predicate are cut at the time left, and not started when none is left.

Nights of 0.002 h (7.2 s; the enforcement line at 92%, 6.62 s) on the real clock, whose checks
would hang for 25 s. A verify cut at the time limit is no verdict: its task stays IN_PROGRESS
for a resume with more time to verify. A cut predicate is "not met (timed out at the time
limit)". Either way the night ends TIME_LIMIT:wall_clock, its budgets block agreeing."""

from __future__ import annotations

import time
from pathlib import Path

from overnight.clock import SystemClock
from overnight.config.spec import Spec
from overnight.core.endings import agrees_with_budgets
from overnight.night.runs import start_run
from overnight.store.result import TerminalResult
from overnight.store.rundir import RunDir
from tests.helpers.nights import command_task, load_result, make_spec, resume_night

HOURS = 0.002  # 7.2 s
HANG_S = 25


def run_on_the_clock(spec: Spec, run_dir: Path) -> tuple[RunDir, TerminalResult, float]:
    start = time.monotonic()
    rd, result = start_run(spec, run_dir, clock=SystemClock())
    return rd, result, time.monotonic() - start


def test_a_verify_cut_at_the_time_limit_leaves_its_task_for_a_resume(
    repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    runs, fast = outside / "runs", outside / "fast"
    verify = f"test -f '{fast}' || sleep {HANG_S}; test -f done.txt"
    tasks = [command_task("t_1", f"echo ran >> '{runs}'; echo x > done.txt", verify)]
    spec = make_spec(repo, model=False, tasks=tasks, predicate="test -f done.txt", hours=HOURS)

    rd, result, took = run_on_the_clock(spec, tmp_path / "run")

    assert took < 15, f"a {HOURS * 3600:.1f} s night took {took:.1f} s"
    assert result.stop_reason == "TIME_LIMIT:wall_clock" and result.resumable
    assert agrees_with_budgets(result.stop_reason, result.budgets.view())
    assert result.plan.in_progress == "t_1", "a check the clock cut is no verdict"
    assert result.plan.parked == [] and result.verified == []
    assert runs.read_text().splitlines() == ["ran"]

    fast.touch()
    _rd, resumed = resume_night(rd.path, {"hours": 1.0})

    assert resumed.stop_reason == "GOAL_MET"
    [done] = resumed.verified
    assert (done.id, done.via) == ("t_1", "resume")
    assert runs.read_text().splitlines() == ["ran"], "the task was executed again"
    # Attempt 1 was verified twice, by two processes: each verify kept a log of its own.
    logs = sorted(p.name for p in (rd.path / "artifacts").glob("t_1.*"))
    assert logs == ["t_1.1.log", "t_1.1.verify-2.log", "t_1.1.verify.log"]


def test_a_predicate_cut_at_the_time_limit_is_not_met_and_says_so(
    repo: Path, tmp_path: Path
) -> None:
    slow = tmp_path / "slow"  # the first predicate (before any task) answers at once
    predicate = f"if [ -f '{slow}' ]; then sleep {HANG_S}; fi; false"
    tasks = [command_task("t_1", f"touch '{slow}'", "true")]
    spec = make_spec(repo, model=False, tasks=tasks, predicate=predicate, hours=HOURS)

    rd, result, took = run_on_the_clock(spec, tmp_path / "run")

    assert took < 15, f"a {HOURS * 3600:.1f} s night took {took:.1f} s"
    assert result.stop_reason == "TIME_LIMIT:wall_clock"
    assert agrees_with_budgets(result.stop_reason, result.budgets.view())
    assert [v.id for v in result.verified] == ["t_1"]
    assert result.predicate is not None and result.predicate.met is False
    assert "not met (timed out at the time limit" in result.predicate.detail

    # Resumed with no more time: the predicate, which would now sleep, is not started.
    start = time.monotonic()
    _rd, again = resume_night(rd.path)
    assert time.monotonic() - start < 5
    assert again.stop_reason == "TIME_LIMIT:wall_clock"
    assert again.predicate is not None and again.predicate.met is False
    assert again.predicate.detail == "not run: no time was left before the time limit"


def test_with_no_time_left_neither_verify_nor_the_predicate_starts(
    repo: Path, tmp_path: Path
) -> None:
    """The task's own command uses up the night; the checks after it must not start at all
    (they used to get a second each, whatever the clock said)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    busy, checked, predicated = outside / "busy", outside / "verify-ran", outside / "pred-ran"
    command = f"touch '{busy}'; sleep {HANG_S}"
    verify = f"touch '{checked}'; true"
    predicate = f"if [ -f '{busy}' ]; then touch '{predicated}'; fi; false"
    tasks = [command_task("t_1", command, verify)]
    spec = make_spec(repo, model=False, tasks=tasks, predicate=predicate, hours=HOURS)

    rd, result, took = run_on_the_clock(spec, tmp_path / "run")

    assert took < 15, f"a {HOURS * 3600:.1f} s night took {took:.1f} s"
    assert result.stop_reason == "TIME_LIMIT:wall_clock"
    assert agrees_with_budgets(result.stop_reason, result.budgets.view())
    assert busy.exists(), "the task's command did not run"
    assert not checked.exists(), "a verify started with no time left"
    assert not predicated.exists(), "the predicate started with no time left"
    assert result.plan.in_progress == "t_1"
    assert load_result(rd.path)["plan"]["in_progress"] == "t_1"


def test_a_resume_with_no_time_left_starts_nothing(repo: Path, tmp_path: Path) -> None:
    """A run stopped at its time limit and resumed without more time: the task in flight is
    not verified (there is no time to), and the night ends again at once."""
    outside = tmp_path / "outside"
    outside.mkdir()
    checked = outside / "verify-ran"
    tasks = [command_task("t_1", f"sleep {HANG_S}", f"touch '{checked}'; true")]
    spec = make_spec(repo, model=False, tasks=tasks, predicate="false", hours=HOURS)
    rd, first, _took = run_on_the_clock(spec, tmp_path / "run")
    assert first.stop_reason == "TIME_LIMIT:wall_clock" and first.plan.in_progress == "t_1"

    _rd, again = resume_night(rd.path)

    assert again.stop_reason == "TIME_LIMIT:wall_clock"
    assert again.plan.in_progress == "t_1"
    assert not checked.exists()
