"""What a task leaves behind says what happened to it: a verify that could not run is parked as
such (not as a half-done task), a command that timed out or failed is recorded with the task
even when its verify passes, and a resumed task goes on counting its attempts, every attempt's
logs kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overnight.core.resume import VerifyOutcome, cannot_run_reason, outcome_of_exit
from overnight.core.tasks import Task
from overnight.night.signals import Signals
from overnight.report.html import render_html
from overnight.report.markdown import render_markdown
from overnight.seams import ExecContext
from overnight.store.checkpoint import load_checkpoint
from overnight.testing import ScriptedExecutor, ScriptedModel
from overnight.testing.fakes import append_line, write_file
from tests.helpers.nights import command_task, make_repo, make_spec, resume_night, run_night


def trace(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]


def state(run: Path) -> dict[str, Any]:
    body = load_checkpoint(run / "checkpoint.json")
    assert body is not None
    return body


# -- a verify that could not run ------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "command", "outcome"),
    [
        (0, "pytest -q", VerifyOutcome.DONE),
        (1, "pytest -q", VerifyOutcome.NOT_DONE),
        (127, "python3 scripts/check.py", VerifyOutcome.CANNOT_RUN),
        (126, "./check.sh", VerifyOutcome.CANNOT_RUN),
        (127, None, VerifyOutcome.CANNOT_RUN),
        (4, "pytest -q tests/unit", VerifyOutcome.CANNOT_RUN),
        (5, "python3 -m pytest -q", VerifyOutcome.CANNOT_RUN),
        (5, ["python", "-m", "pytest", "-q"], VerifyOutcome.CANNOT_RUN),
        (5, "PYTHONHASHSEED=0 py.test", VerifyOutcome.CANNOT_RUN),
        # 4 and 5 are pytest's words; from any other check they are its own verdict.
        (4, "python3 scripts/check.py", VerifyOutcome.PARTIAL),
        (5, "make check", VerifyOutcome.PARTIAL),
        (5, "python3 -c 'import pytest'", VerifyOutcome.PARTIAL),
        (2, "pytest -q", VerifyOutcome.PARTIAL),
        (137, "pytest -q", VerifyOutcome.PARTIAL),
        (None, "pytest -q", VerifyOutcome.PARTIAL),
    ],
)
def test_the_exit_of_a_verify_maps_to_one_outcome(
    code: int | None, command: str | list[str] | None, outcome: VerifyOutcome
) -> None:
    assert outcome_of_exit(code, command) is outcome
    assert (cannot_run_reason(code, command) is not None) == (outcome is VerifyOutcome.CANNOT_RUN)


def test_the_reasons_name_the_exit() -> None:
    assert cannot_run_reason(127) == "exit 127: command not found"
    assert cannot_run_reason(126) == "exit 126: found but not executable"
    assert cannot_run_reason(5, "pytest") == "exit 5: pytest collected no tests"
    assert cannot_run_reason(4, "pytest") == "exit 4: pytest usage error"


@pytest.mark.parametrize(
    ("verify", "why"),
    [
        ("no-such-checker-here --all", "exit 127: command not found"),
        ("./check.sh", "exit 126: found but not executable"),
        ("python3 -m pytest -q -p no:cacheprovider", "exit 5: pytest collected no tests"),
    ],
    ids=["not_found", "not_executable", "no_tests"],
)
def test_a_verify_that_cannot_run_is_parked_as_such_without_retries(
    tmp_path: Path, verify: str, why: str
) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "r\n", "check.sh": "#!/bin/sh\nexit 0\n"})
    runs = tmp_path / "runs"
    tasks = [command_task("t_1", f"echo ran >> '{runs}'", verify, retries=2)]
    spec = make_spec(repo, model=False, tasks=tasks, predicate="false")

    _rd, r = run_night(spec, tmp_path / "run")

    [parked] = r.plan.parked
    assert parked.reason == f"the verify command could not run ({why})"
    assert "partially applied" not in parked.reason
    assert parked.detail.startswith(why)
    assert runs.read_text().splitlines() == ["ran"], "a check that cannot run was retried"


def test_a_check_of_its_own_exiting_5_is_still_partially_applied(
    repo: Path, tmp_path: Path
) -> None:
    tasks = [command_task("t_1", "true", "exit 5")]
    spec = make_spec(repo, model=False, tasks=tasks, predicate="false")

    _rd, r = run_night(spec, tmp_path / "run")

    [parked] = r.plan.parked
    assert parked.reason == "verify reports a partially applied state"


def stop_on_first(signals: Signals) -> Any:
    """A step that asks the run to stop on the task's first execution (a SIGTERM)."""

    def step(_task: Task, ctx: ExecContext) -> None:
        if ctx.attempt == 1:
            signals.request("sigterm")

    return step


def test_on_resume_a_verify_that_cannot_run_is_parked_as_such(repo: Path, tmp_path: Path) -> None:
    signals = Signals()
    executor = ScriptedExecutor({"a_1": [write_file("a.txt", "a\n"), stop_on_first(signals)]})
    tasks = [{"id": "a_1", "brief": "write a.txt", "verify": "no-such-checker-here"}]
    spec = make_spec(repo, tasks=tasks, predicate="false")
    rd, first = run_night(
        spec, tmp_path / "run", model=ScriptedModel(), executor=executor, signals=signals
    )
    assert first.stop_reason == "TIME_LIMIT:sigterm" and first.plan.in_progress == "a_1"

    _rd, r = resume_night(rd.path, model=ScriptedModel(), executor=executor)

    [parked] = r.plan.parked
    assert parked.reason == "the verify command could not run (exit 127: command not found)"
    assert executor.executed == [("a_1", 1)]


# -- a command that failed, with a verify that passed ------------------------------------------


def test_a_command_that_exited_non_zero_is_recorded_with_its_done_task(
    repo: Path, tmp_path: Path
) -> None:
    tasks = [command_task("t_1", "echo x > x.txt; exit 3", "test -f x.txt")]
    spec = make_spec(repo, model=False, tasks=tasks, predicate="test -f x.txt")

    rd, r = run_night(spec, tmp_path / "run")

    assert r.stop_reason == "GOAL_MET" and [v.id for v in r.verified] == ["t_1"]
    [done] = state(rd.path)["completed"]
    assert done["command"]["exit_code"] == 3 and done["command"]["timed_out"] is False
    assert Path(done["command"]["log"]).name == "t_1.1.log"
    [finished] = [e for e in trace(rd.path) if e.get("decision") == "task_finished"]
    assert (finished["outcome"], finished["command_exit_code"]) == ("done", 3)
    # ...and said in result.json and the report, not only "done".
    assert (r.verified[0].command_exit_code, r.verified[0].command_timed_out) == (3, False)
    md = render_markdown(r)
    assert "(its command exited 3; its verify passed, judged from its exit code only)" in md


def test_a_command_that_timed_out_is_recorded_with_its_done_task(
    repo: Path, tmp_path: Path
) -> None:
    tasks = [command_task("t_1", "echo x > x.txt; sleep 30", "test -f x.txt", timeout_s=0.5)]
    spec = make_spec(repo, model=False, tasks=tasks, predicate="test -f x.txt")

    rd, r = run_night(spec, tmp_path / "run")

    assert r.stop_reason == "GOAL_MET"
    [done] = state(rd.path)["completed"]
    assert done["command"]["timed_out"] is True and done["command"]["exit_code"] is None
    assert done["command"]["timeout_s"] == 0.5
    [finished] = [e for e in trace(rd.path) if e.get("decision") == "task_finished"]
    assert finished["command_timed_out"] is True
    assert r.verified[0].command_timed_out is True
    assert "its command timed out" in render_html(r)


def test_a_parked_command_task_keeps_its_command_too(repo: Path, tmp_path: Path) -> None:
    tasks = [command_task("t_1", "exit 9", "false", retries=0)]
    spec = make_spec(repo, model=False, tasks=tasks, predicate="false")

    rd, _r = run_night(spec, tmp_path / "run")

    [parked] = state(rd.path)["parked"]
    assert parked["command"]["exit_code"] == 9


def test_an_agent_task_has_no_command_record(repo: Path, tmp_path: Path) -> None:
    executor = ScriptedExecutor({"a_1": [write_file("a.txt", "a\n")]})
    tasks = [{"id": "a_1", "brief": "write a.txt", "verify": "test -f a.txt"}]
    spec = make_spec(repo, tasks=tasks, predicate="test -f a.txt")

    rd, r = run_night(spec, tmp_path / "run", model=ScriptedModel(), executor=executor)

    assert r.stop_reason == "GOAL_MET"
    [done] = state(rd.path)["completed"]
    assert done["command"] is None


# -- attempts and logs across a resume ----------------------------------------------------------


def test_a_resumed_task_goes_on_counting_its_attempts_and_retries(
    repo: Path, tmp_path: Path
) -> None:
    signals = Signals()
    runs = tmp_path / "runs"
    executor = ScriptedExecutor({"a_1": [append_line(runs, "ran"), stop_on_first(signals)]})
    tasks = [{"id": "a_1", "brief": "try", "verify": "false", "retries": 1}]
    spec = make_spec(repo, tasks=tasks, predicate="false")
    rd, first = run_night(
        spec, tmp_path / "run", model=ScriptedModel(), executor=executor, signals=signals
    )
    assert first.plan.in_progress == "a_1"

    _rd, r = resume_night(rd.path, model=ScriptedModel(), executor=executor)

    # One retry in all: attempt 1 (interrupted, verified not done on resume), then attempt 2.
    assert executor.executed == [("a_1", 1), ("a_1", 2)]
    assert runs.read_text().splitlines() == ["ran", "ran"]
    [parked] = r.plan.parked
    assert parked.reason == "not done after 2 attempt(s)"
    artifacts = rd.path / "artifacts"
    assert (artifacts / "a_1.1.verify.log").exists() and (artifacts / "a_1.2.verify.log").exists()
    started = [e["attempt"] for e in trace(rd.path) if e.get("event") == "started"]
    assert started == [1, 2]
    assert state(rd.path)["attempts"] == {"a_1": 2}
