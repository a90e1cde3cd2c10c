"""A whole night in-process: command tasks, real git, a scripted model."""

from pathlib import Path

from overnight.testing import ScriptedModel
from tests.helpers.nights import command_task, git, load_result, make_spec, run_night


def test_command_night_meets_goal_and_commits_once_per_task(repo: Path, tmp_path: Path) -> None:
    tasks = [command_task(f"t_{i}", f"echo {i} > f{i}.txt", f"test -f f{i}.txt") for i in range(3)]
    spec = make_spec(repo, tasks=tasks, predicate="test -f f0.txt -a -f f1.txt -a -f f2.txt")
    model = ScriptedModel()
    rd, result = run_night(spec, tmp_path / "run", model=model)
    assert result.stop_reason == "GOAL_MET"
    assert result.exit_code == 0
    assert [v.id for v in result.verified] == ["t_0", "t_1", "t_2"]
    subjects = git(repo, "log", "--format=%s", result.branch.name).splitlines()
    assert subjects[:3] == ["t_2: task t_2", "t_1: task t_1", "t_0: task t_0"]
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert not (repo / "f0.txt").exists()
    assert load_result(rd.path)["stop_reason"] == "GOAL_MET"
    assert result.wrapup.source == "model"
