"""A goal that already holds on the base commit is said, not celebrated: `overnight check`
warns and names the predicate, and `overnight run` ends GOAL_MET at once, exit 0, with
`already_met: true`, no model call (not even the closing summary) and no branch left in the
user's repository. A scheduled night whose goal holds stays cheap and quiet."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers.nights import cli_env, command_task, git, spec_data, write_spec

ROOT = Path(__file__).resolve().parents[2]


def overnight(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "overnight", *(str(a) for a in args)]
    return subprocess.run(
        argv, env=cli_env(ROOT), cwd=tmp_path, capture_output=True, text=True, timeout=180
    )


def counting_model(request: Any) -> Any:
    """Fails any call: the result's spend and the trace show whether one was made."""
    raise AssertionError("a night whose goal was already met called its model")


def night(repo: Path, tmp_path: Path, predicate: str) -> Path:
    data = spec_data(
        repo,
        predicate=predicate,
        tasks=[command_task("t_1", "echo x > done.txt", "test -f done.txt")],
    )
    data["model"]["target"] = "tests.e2e.test_goal_already_met:counting_model"
    return write_spec(tmp_path / "night.toml", data)


def branches(repo: Path) -> list[str]:
    return git(repo, "branch", "--list", "--format=%(refname:short)", "overnight/*").split()


def test_a_goal_met_on_the_base_commit_ends_the_night_at_once_and_keeps_nothing(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "done.txt").write_text("already\n")
    git(repo, "add", "done.txt")
    git(repo, "commit", "-qm", "the goal holds already")
    spec = night(repo, tmp_path, "test -f done.txt")

    checked = overnight(tmp_path, "check", spec)
    [line] = [ln for ln in checked.stdout.splitlines() if ln.startswith("predicate")]
    assert "warning" in line and "already met" in line and "test -f done.txt" in line
    assert checked.returncode == 0, checked.stdout + checked.stderr

    done = overnight(tmp_path, "run", spec, "--run-dir", tmp_path / "run")

    assert done.returncode == 0, done.stderr
    assert "already met" in done.stdout.splitlines()[0]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["stop_reason"] == "GOAL_MET" and result["already_met"] is True
    assert result["spend"]["model_calls"] == 0
    assert result["wrapup"]["source"] == "structured"
    assert "already passed on the base commit" in result["message"]
    assert branches(repo) == []
    assert not (tmp_path / "run" / "worktree").exists()
    trace = (tmp_path / "run" / "trace.jsonl").read_text().splitlines()
    assert not [r for r in map(json.loads, trace) if r.get("kind") == "model_call"]


def test_a_goal_the_night_meets_is_no_goal_already_met(repo: Path, tmp_path: Path) -> None:
    spec = night(repo, tmp_path, "test -f done.txt")

    checked = overnight(tmp_path, "check", spec)
    [line] = [ln for ln in checked.stdout.splitlines() if ln.startswith("predicate")]
    assert "warning" not in line and "already met" not in line

    done = overnight(tmp_path, "run", spec, "--run-dir", tmp_path / "run")

    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["stop_reason"] == "GOAL_MET" and result["already_met"] is False
    assert "already met" not in done.stdout
    assert branches(repo) == [result["branch"]["name"]]
