"""A lap and a resume judge a task through the same method (``Night.judge_candidate``): a
night killed -9 before its task's verify ran, and one killed after the verify had judged the
task but before the harness landed it, are both resumed through it, and land the task's work
without running the task again.

The night runs as a real CLI process, killed for real; the resume runs in this process, with
``judge_candidate`` wrapped to note each call on its way through (the judging itself runs
unchanged)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from overnight import api
from overnight.night.night import Night
from tests.helpers.kills import (
    kill_group,
    kill_marked,
    marked_env,
    overnight,
    start_cli,
    wait_for,
)
from tests.helpers.nights import command_task, git, load_result, make_repo, spec_data, write_spec


@pytest.fixture
def env() -> Iterator[dict[str, str]]:
    environ, mark = marked_env()
    try:
        yield environ
    finally:
        kill_marked(mark)


@pytest.fixture
def judged(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Every call of ``Night.judge_candidate`` in this process: (task id, from a lap)."""
    calls: list[tuple[str, bool]] = []
    original = Night.judge_candidate

    def noting(self: Night, task: Any, attempt: int, ran: Any = None, *, lap: bool = False) -> Any:
        calls.append((task.id, lap))
        return original(self, task, attempt, ran, lap=lap)

    monkeypatch.setattr(Night, "judge_candidate", noting)
    return calls


def night_of(tmp_path: Path, command: str, verify: str) -> tuple[Path, Path]:
    repo = make_repo(tmp_path / "repo")
    tasks = [
        command_task("t_first", command, verify),
        command_task("t_next", "echo b > b.txt", "test -f b.txt"),
    ]
    data = spec_data(repo, model=False, tasks=tasks, predicate="test -f block.txt && test -f b.txt")
    return repo, write_spec(tmp_path / "night.toml", data)


def executions(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_a_night_killed_before_its_verify_is_judged_on_resume_by_the_lap_s_method(
    tmp_path: Path, env: dict[str, str], judged: list[tuple[str, bool]]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    counter, started = outside / "executions", outside / "started"
    command = (
        f"echo ran >> '{counter}'; echo migrated > block.txt; "
        f"if [ \"$(wc -l < '{counter}')\" -eq 1 ]; then touch '{started}'; sleep 30; fi"
    )
    repo, spec = night_of(tmp_path, command, "test -f block.txt")
    run = tmp_path / "RUN"
    proc = start_cli(overnight("run", spec, "--run-dir", run, "--quiet"), env, tmp_path)
    try:
        wait_for(lambda: started.exists() or proc.poll() is not None, 30, "the task to start")
        assert proc.poll() is None, "the night ended before its first task blocked"
    finally:
        kill_group(proc)
    assert not (run / "result.json").exists()

    result = api.resume(run)

    assert judged == [("t_first", False), ("t_next", True)]
    assert result.stop_reason == "GOAL_MET"
    data = load_result(run)
    by_id = {v["id"]: v for v in data["verified"]}
    assert by_id["t_first"]["via"] == "resume"
    assert git(repo, "show", f"{by_id['t_first']['commit']}:block.txt") == "migrated"
    assert executions(counter) == 1, "the resume ran the task again instead of judging it"


def test_a_night_killed_after_its_verify_judged_the_task_is_judged_again_and_landed(
    tmp_path: Path, env: dict[str, str], judged: list[tuple[str, bool]]
) -> None:
    """The verify passes and, on its first run, kills the harness (its parent) before the
    harness can land the task: the checkpoint still holds the task in flight, its work in
    the worktree. The resume judges it again, through the same method, and lands it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    counter, verified = outside / "executions", outside / "verified"
    command = f"echo ran >> '{counter}'; echo migrated > block.txt"
    verify = (
        "test -f block.txt || exit 1; "
        f"if [ ! -f '{verified}' ]; then touch '{verified}'; kill -9 $PPID; fi; exit 0"
    )
    repo, spec = night_of(tmp_path, command, verify)
    run = tmp_path / "RUN"
    proc = start_cli(overnight("run", spec, "--run-dir", run, "--quiet"), env, tmp_path)
    try:
        wait_for(lambda: proc.poll() is not None, 60, "the verify to end the harness")
    finally:
        kill_group(proc)
    assert verified.exists(), "the harness ended before its task's verify ran"
    assert not (run / "result.json").exists()
    branch = git(repo, "branch", "--list", "--format=%(refname:short)", "overnight/*")
    assert git(repo, "log", "--format=%s", branch).splitlines()[0] != "t_first: task t_first"

    result = api.resume(run)

    assert judged == [("t_first", False), ("t_next", True)]
    assert result.stop_reason == "GOAL_MET"
    data = load_result(run)
    by_id = {v["id"]: v for v in data["verified"]}
    assert by_id["t_first"]["via"] == "resume"
    assert git(repo, "show", f"{by_id['t_first']['commit']}:block.txt") == "migrated"
    assert executions(counter) == 1
