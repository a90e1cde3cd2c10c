"""`overnight clean` removes the branches of nights that landed nothing, keeps every branch
with a commit beyond its base and every run a resume could continue, takes `--older-than`,
and says what it kept and why; `overnight list` marks a resumable run with its resume
command. Real repositories, real nights."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from overnight.cli.main import main
from tests.helpers.nights import command_task, git, spec_data, write_spec


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as exit:
        code = int(exit.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def a_run(
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    tasks: list[dict[str, object]],
    **extra: object,
) -> tuple[Path, dict[str, object]]:
    data = spec_data(repo, predicate="test -f one.txt", tasks=tasks, model=False, **extra)  # type: ignore[arg-type]
    spec = write_spec(tmp_path / f"{name}.toml", data)
    run_dir = tmp_path / "runs" / name
    cli(capsys, "run", spec, "--run-dir", run_dir, "--quiet")
    result: dict[str, object] = json.loads((run_dir / "result.json").read_text())
    return run_dir, result


def landed(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> Path:
    run_dir, result = a_run(
        repo, tmp_path, capsys, name, [command_task("c1", "echo one > one.txt", "test -f one.txt")]
    )
    assert result["stop_reason"] == "GOAL_MET"
    return run_dir


def empty(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> Path:
    """A night that ended, not resumable, with nothing beyond its base on its branch."""
    run_dir, result = a_run(repo, tmp_path, capsys, name, [command_task("c1", "true", "true")])
    assert result["stop_reason"] == "QUEUE_EMPTY_GOAL_UNMET" and not result["resumable"]
    return run_dir


def resumable(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> Path:
    tasks = [command_task(f"c{i}", "true", "true") for i in range(3)]
    run_dir, result = a_run(repo, tmp_path, capsys, name, tasks, budget={"steps": 2})
    assert result["stop_reason"] == "BUDGET_EXHAUSTED:steps" and result["resumable"]
    return run_dir


def branch_of(run_dir: Path) -> str:
    return str(json.loads((run_dir / "run.json").read_text())["branch"])


def has_branch(repo: Path, branch: str) -> bool:
    return bool(git(repo, "branch", "--list", branch))


def backdate(run_dir: Path, days: float) -> None:
    """As if the run had ended ``days`` ago."""
    path = run_dir / "result.json"
    result = json.loads(path.read_text())
    result["ended_at"] = (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="seconds")
    path.write_text(json.dumps(result))


def test_clean_removes_the_branches_of_nights_that_landed_nothing_and_keeps_the_rest(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from overnight.store.rundir import RunDir, RunLock

    kept = landed(repo, tmp_path, capsys, "landed")
    gone = empty(repo, tmp_path, capsys, "empty")
    paused = resumable(repo, tmp_path, capsys, "paused")
    touched = empty(repo, tmp_path, capsys, "touched")
    held = empty(repo, tmp_path, capsys, "held")
    # A person committed on the branch of a night that itself landed nothing.
    git(repo, "checkout", "-q", branch_of(touched))
    (repo / "mine.txt").write_text("a person's work\n")
    git(repo, "add", "mine.txt")
    git(repo, "commit", "-q", "-m", "mine")
    # ... and has another one checked out now.
    git(repo, "checkout", "-q", branch_of(held))
    runs = tmp_path / "runs"
    lock = RunLock(RunDir(held))  # held as a running night's process would hold it
    lock.acquire()
    try:
        code, out, _ = cli(capsys, "clean", "--runs", runs, "--dry-run")
        assert code == 0
        assert f"would remove: branch {branch_of(gone)} (it landed nothing)" in out
        assert all(has_branch(repo, branch_of(r)) for r in (kept, gone, paused, touched))
    finally:
        lock.release()

    code, out, _ = cli(capsys, "clean", "--runs", runs)

    assert code == 0
    assert f"removed: branch {branch_of(gone)} (it landed nothing)" in out
    assert not has_branch(repo, branch_of(gone))
    assert f"kept:    branch {branch_of(kept)} (1 commit(s) beyond its base)" in out
    assert f"kept:    branch {branch_of(touched)} (1 commit(s) beyond its base)" in out
    assert f"kept:    {paused} (ended BUDGET_EXHAUSTED:steps, resumable; --all removes it" in out
    assert f"kept:    branch {branch_of(paused)} (the run could be resumed" in out
    assert f"kept:    branch {branch_of(held)} (checked out in {repo})" in out
    for run in (kept, paused, touched, held):
        assert has_branch(repo, branch_of(run)), run
    assert (paused / "worktree").exists()
    assert "0 worktree(s) and 1 branch(es) removed" in out

    # --all removes a resumable run's worktree, never the branch its resume needs.
    code, out, _ = cli(capsys, "clean", "--runs", runs, "--all")
    assert code == 0 and not (paused / "worktree").exists()
    assert has_branch(repo, branch_of(paused))
    assert f"kept:    branch {branch_of(paused)} (the run could be resumed" in out

    # Once nothing holds it, the branch that landed nothing goes; one RUN at a time too.
    git(repo, "checkout", "-q", "main")
    code, out, _ = cli(capsys, "clean", held)
    assert code == 0 and f"removed: branch {branch_of(held)} (it landed nothing)" in out
    assert not has_branch(repo, branch_of(held))
    code, out, _ = cli(capsys, "clean", held)
    assert code == 0 and "removed: nothing (already clean)" in out


def test_a_running_night_keeps_its_branch(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from overnight.store.rundir import RunDir, RunLock

    running = empty(repo, tmp_path, capsys, "running")
    lock = RunLock(RunDir(running))
    lock.acquire()
    try:
        code, out, _ = cli(capsys, "clean", "--runs", tmp_path / "runs")
    finally:
        lock.release()
    assert code == 0 and f"kept:    {running} (running)" in out
    assert has_branch(repo, branch_of(running))


def test_older_than_cleans_only_runs_that_ended_before_it(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, recent = empty(repo, tmp_path, capsys, "old"), empty(repo, tmp_path, capsys, "recent")
    backdate(old, 40)
    backdate(recent, 3)

    code, out, _ = cli(capsys, "clean", "--runs", tmp_path / "runs", "--older-than", "30d")

    assert code == 0
    assert not has_branch(repo, branch_of(old))
    assert f"kept:    {recent} (newer than 30d: ended 3 days ago)" in out
    assert has_branch(repo, branch_of(recent))
    # Two weeks, or hours: the recent one is older than both.
    code, out, _ = cli(capsys, "clean", "--runs", tmp_path / "runs", "--older-than", "2w")
    assert f"kept:    {recent} (newer than 2w" in out
    code, out, _ = cli(capsys, "clean", "--runs", tmp_path / "runs", "--older-than", "12h")
    assert code == 0 and not has_branch(repo, branch_of(recent))


@pytest.mark.parametrize("bad", ["30", "3x", "d30", "1.5", "soon"])
def test_a_bad_age_is_a_usage_error_naming_the_flag(
    capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    code, _, err = cli(capsys, "clean", "--older-than", bad)
    assert code == 64
    assert "--older-than" in err and "12h, 30d, 2w" in err


def test_list_marks_a_resumable_run_with_its_resume_command(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = landed(repo, tmp_path, capsys, "done")
    paused = resumable(repo, tmp_path, capsys, "paused")

    code, out, _ = cli(capsys, "list")

    assert code == 0
    run_id = json.loads((paused / "run.json").read_text())["run_id"]
    resume = f"resumable: overnight resume {shlex.quote(str(paused.absolute()))}"
    assert f"{run_id}  BUDGET_EXHAUSTED:steps  {resume}" in out
    done_id = json.loads((done / "run.json").read_text())["run_id"]
    [done_line] = [line for line in out.splitlines() if line.startswith(done_id)]
    assert done_line == f"{done_id}  GOAL_MET (cleaned)"
    rows = {r["run_id"]: r for r in json.loads(cli(capsys, "list", "--json")[1])}
    assert rows[run_id]["resumable"] is True and rows[done_id]["resumable"] is False


def test_a_night_that_stopped_without_a_result_is_listed_as_resumable(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paused = resumable(repo, tmp_path, capsys, "killed")
    (paused / "result.json").unlink()  # as after a kill -9
    code, out, _ = cli(capsys, "list")
    assert code == 0 and "stopped without a result  resumable: overnight resume" in out
    code, out, _ = cli(capsys, "clean", "--runs", tmp_path / "runs")
    assert f"kept:    {paused} (has no result yet, resumable" in out
    assert f"kept:    branch {branch_of(paused)} (the run could be resumed" in out
    assert has_branch(repo, branch_of(paused))
