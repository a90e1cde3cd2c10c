"""The run directory's reference is held to what a night writes: every path ``RunDir`` names
and every file a real night leaves is a line of ``LAYOUT``, the table the page is written from."""

from __future__ import annotations

from pathlib import Path

from overnight.store.rundir import LAYOUT, RunDir
from tests.helpers.nights import command_task, make_repo, make_spec, run_night

NAMES = {name.rstrip("/") for name, _ in LAYOUT}


def test_every_path_run_dir_names_is_in_the_layout(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "run")
    named = {
        value.name
        for key, value in vars(rd).items()
        if key != "path" and isinstance(value, Path) and value.parent == rd.path
    }
    assert {"run.json", "result.json", "lock", "worktree"} <= named
    assert named - NAMES == set()


def test_every_file_a_night_leaves_is_in_the_layout(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tasks = [command_task("t1", "echo one > one.txt", "test -f one.txt")]
    spec = make_spec(
        repo, tasks=tasks, predicate="test -f one.txt", model=False, sandbox={"mode": "off"}
    )
    run_dir, result = run_night(spec, tmp_path / "run")
    assert result.ending == "GOAL_MET"
    left = {p.name for p in run_dir.path.iterdir()}
    assert {"run.json", "spec.json", "result.json", "trace.jsonl", "artifacts"} <= left
    assert left - NAMES == set()
