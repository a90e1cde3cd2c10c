"""Every run is indexed in $OVERNIGHT_HOME: a run id works wherever a run directory does,
`overnight list` shows runs made anywhere, `overnight review` sees them, and `overnight clean`
frees the user's repository of a finished run's worktree while keeping its branch."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from overnight.cli.main import main
from tests.helpers.nights import command_task, git, spec_data, write_spec


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as exit:  # a usage error found by the argument parser
        code = int(exit.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def a_night(repo: Path, tmp_path: Path, name: str, **kwargs: object) -> Path:
    tasks = kwargs.pop("tasks", [command_task("c1", "echo one > one.txt", "test -f one.txt")])
    data = spec_data(repo, predicate="test -f one.txt", tasks=tasks, model=False, **kwargs)  # type: ignore[arg-type]
    return write_spec(tmp_path / f"{name}.toml", data)


def test_a_run_made_with_run_dir_is_listed_and_found_by_its_id(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "elsewhere" / "night-1"
    code, _, _ = cli(capsys, "run", a_night(repo, tmp_path, "n1"), "--run-dir", run_dir, "--quiet")
    assert code == 0
    run_id = json.loads((run_dir / "result.json").read_text())["run_id"]
    code, out, _ = cli(capsys, "list", "--json")
    [row] = json.loads(out)
    assert row["run_id"] == run_id and row["path"] == str(run_dir.absolute())
    assert row["state"] == "GOAL_MET" and row["cleaned"] is True  # not resumable: removed
    # The id, or its unique start, stands for the directory.
    code, out, _ = cli(capsys, "status", run_id, "--json")
    assert code == 0 and json.loads(out)["run_id"] == run_id
    code, out, _ = cli(capsys, "report", run_id[:15])
    assert code == 0 and f"# overnight run {run_id}" in out
    code, _, err = cli(capsys, "report", "no-such-run-id")
    assert code == 64 and "neither an overnight run directory nor a known run id" in err


def test_review_sees_runs_outside_the_default_folder(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parked = [command_task("c1", "echo half > one.txt", "exit 2")]  # partially applied
    spec = a_night(repo, tmp_path, "n2", tasks=parked)
    cli(capsys, "run", spec, "--run-dir", tmp_path / "demo-like" / "run", "--quiet")
    code, out, _ = cli(capsys, "review", "--json")
    assert code == 0
    items = json.loads(out)
    assert [i["kind"] for i in items if "c1" in i["id"]], items


def test_a_night_that_cannot_be_resumed_removes_its_worktree_and_keeps_its_branch(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    cli(capsys, "run", a_night(repo, tmp_path, "n3"), "--run-dir", run_dir, "--quiet")
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "GOAL_MET" and not result["resumable"]
    branch = result["branch"]["name"]
    assert not (run_dir / "worktree").exists() and not (run_dir / "checkout").exists()
    assert git(repo, "worktree", "list").count("\n") == 0  # only the main checkout is left
    git(repo, "checkout", "-q", branch)  # no worktree holds the branch any more
    assert (repo / "one.txt").read_text() == "one\n"
    git(repo, "checkout", "-q", "main")
    code, out, _ = cli(capsys, "clean", result["run_id"])
    assert code == 0 and "already clean" in out


def resumable_night(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    tasks = [command_task(f"c{i}", "true", "true") for i in range(3)]
    spec = a_night(repo, tmp_path, "n4", tasks=tasks, budget={"steps": 2})
    run_dir = tmp_path / "runs" / "resumable"
    assert cli(capsys, "run", spec, "--run-dir", run_dir, "--quiet")[0] == 2  # resumable
    assert (run_dir / "worktree").exists()  # a resume needs it
    return run_dir


def test_clean_refuses_a_run_that_could_still_be_resumed(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = resumable_night(repo, tmp_path, capsys)
    code, _, err = cli(capsys, "clean", run_dir)
    assert code == 64 and "could be resumed" in err and "--all" in err
    assert (run_dir / "worktree").exists()
    assert cli(capsys, "clean", run_dir, "--all")[0] == 0
    assert not (run_dir / "worktree").exists()


def test_clean_sweeps_ended_runs_keeps_resumable_and_running_ones(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from overnight.store.rundir import RunDir, RunLock

    resumable = resumable_night(repo, tmp_path, capsys)
    # A run whose worktree is left over (a night from before worktrees were removed, or
    # one whose removal failed): ended, not resumable.
    ended = tmp_path / "runs" / "ended"
    cli(capsys, "run", a_night(repo, tmp_path, "n5"), "--run-dir", ended, "--quiet")
    branch = json.loads((ended / "result.json").read_text())["branch"]["name"]
    git(repo, "worktree", "add", "-q", str(ended / "worktree"), branch)
    # A running night: its lock is held (here by this process, as the night's would be).
    running = tmp_path / "runs" / "running"
    shutil.copytree(resumable, running, ignore=shutil.ignore_patterns("worktree", "checkout"))
    git(repo, "worktree", "add", "-q", "--detach", str(running / "worktree"), branch)
    lock = RunLock(RunDir(running))
    lock.acquire()
    try:
        code, out, _ = cli(capsys, "clean", "--runs", tmp_path / "runs", "--dry-run")
        assert code == 0 and f"would remove: {ended / 'worktree'}" in out
        assert f"kept:    {resumable} (ended BUDGET_EXHAUSTED:steps, resumable" in out
        assert f"kept:    {running} (running)" in out
        assert (ended / "worktree").exists()  # a dry run removes nothing

        code, out, _ = cli(capsys, "clean", "--runs", tmp_path / "runs")
        assert code == 0 and f"removed: {ended / 'worktree'}" in out
        assert not (ended / "worktree").exists()
        assert (resumable / "worktree").exists() and (running / "worktree").exists()

        code, out, _ = cli(capsys, "clean", "--runs", tmp_path / "runs", "--all")
        assert not (resumable / "worktree").exists()
        assert (running / "worktree").exists()  # never a running night's
        assert git(repo, "rev-parse", branch)  # branches stay
    finally:
        lock.release()


def test_a_second_night_on_a_workspace_with_a_running_night_says_so(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from overnight.store.rundir import RunDir, RunLock

    first = resumable_night(repo, tmp_path, capsys)
    run_id = json.loads((first / "run.json").read_text())["run_id"]
    second = a_night(repo, tmp_path, "n6")
    code, _, err = cli(capsys, "run", second, "--run-dir", tmp_path / "second", "--quiet")
    assert code == 0 and "already running" not in err  # the first has ended
    lock = RunLock(RunDir(first))  # held as the first night's process would hold it
    lock.acquire()
    try:
        code, _, err = cli(capsys, "run", second, "--run-dir", tmp_path / "third", "--quiet")
    finally:
        lock.release()
    assert code == 0  # both may run, each on its own branch
    assert f"night {run_id} (pid {os.getpid()}) is already running on {repo}" in err
    assert "own branch" in err


def test_of_runs_started_within_one_second_the_latest_is_the_one_indexed_last(
    tmp_path: Path,
) -> None:
    from overnight.store.index import latest_run, register

    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text("{}")
        (tmp_path / name / "spec.json").write_text("{}")
        register(f"run-{name}", tmp_path / name, str(tmp_path), "2026-01-01T00:00:00+00:00")
    assert latest_run() == tmp_path / "second"
