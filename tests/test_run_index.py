"""Every run is indexed in $OVERNIGHT_HOME: a run id works wherever a run directory does,
`overnight list` shows runs made anywhere, `overnight review` sees them, and `overnight clean`
frees the user's repository of a finished run's worktree while keeping its branch."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from overnight.cli.commands import main
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
    assert row["state"] == "GOAL_MET" and row["cleaned"] is False
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


def test_clean_removes_the_worktrees_and_keeps_branch_and_result(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    cli(capsys, "run", a_night(repo, tmp_path, "n3"), "--run-dir", run_dir, "--quiet")
    result = json.loads((run_dir / "result.json").read_text())
    branch = result["branch"]["name"]
    # While the worktree exists, git will not check the branch out in the user's repository.
    blocked = subprocess.run(
        ["git", "-C", str(repo), "checkout", "-q", branch], capture_output=True, text=True
    )
    assert blocked.returncode != 0
    code, out, _ = cli(capsys, "clean", result["run_id"])
    assert code == 0 and "removed:" in out and str(run_dir / "worktree") in out
    assert not (run_dir / "worktree").exists() and (run_dir / "result.json").exists()
    assert git(repo, "worktree", "list").count("\n") == 0  # only the main checkout is left
    git(repo, "checkout", "-q", branch)
    assert (repo / "one.txt").read_text() == "one\n"
    git(repo, "checkout", "-q", "main")
    code, out, _ = cli(capsys, "clean", run_dir)
    assert code == 0 and "already clean" in out
    _, listed, _ = cli(capsys, "list", "--json")
    assert json.loads(listed)[0]["cleaned"] is True


def test_clean_refuses_a_run_that_could_still_be_resumed(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = [command_task(f"c{i}", "true", "true") for i in range(3)]
    spec = a_night(repo, tmp_path, "n4", tasks=tasks, budget={"steps": 2})
    run_dir = tmp_path / "run"
    assert cli(capsys, "run", spec, "--run-dir", run_dir, "--quiet")[0] == 2  # resumable
    code, _, err = cli(capsys, "clean", run_dir)
    assert code == 64 and "could be resumed" in err and "--force" in err
    assert (run_dir / "worktree").exists()
    assert cli(capsys, "clean", run_dir, "--force")[0] == 0
    assert not (run_dir / "worktree").exists()
