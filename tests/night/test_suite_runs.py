"""How many times a night runs the goal's suite itself: the start check's run on the base
commit (the base record and the predicate's first verdict), the task's verify on a clean
checkout of its candidate, and the goal predicate on the landed tree only when the verify
did not already run the same command on exactly that tree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from overnight.night.resolve import sandbox_policy
from overnight.night.startcheck import check_predicate
from tests.helpers.nights import command_task, make_spec, run_night
from tests.helpers.project import calc_repo
from tests.helpers.suite_runs import suite_runs, trace_events

SUITE = "python3 -m pytest -q -p no:cacheprovider"
FIX = (
    "python3 -c \"import pathlib; p = pathlib.Path('calc/ops.py'); "
    "p.write_text(p.read_text().replace('a - b', 'a + b'))\""
)


def night(tmp_path: Path, verify: str, predicate: str = SUITE) -> tuple[Any, list[dict]]:
    repo = calc_repo(tmp_path / "repo")
    spec = make_spec(
        repo, predicate=predicate, tasks=[command_task("fix", FIX, verify)], model=False
    )
    _, result = run_night(spec, tmp_path / "run")
    return result, trace_events(tmp_path / "run")


def test_a_one_task_night_runs_the_suite_twice(tmp_path: Path) -> None:
    result, events = night(tmp_path, SUITE)
    assert result.stop_reason == "GOAL_MET"
    assert suite_runs(events) == ["start check", "verify"]
    judged = [e for e in events if e.get("tool") == "predicate" and e.get("from_verify")]
    assert len(judged) == 1 and judged[0]["met"] and judged[0]["verdict"].startswith("met: 1")


def test_a_verify_of_another_command_leaves_the_predicate_its_own_run(tmp_path: Path) -> None:
    result, events = night(tmp_path, SUITE + " tests")
    assert result.stop_reason == "GOAL_MET"
    assert suite_runs(events) == ["start check", "verify", "predicate"]


def test_a_verify_that_did_not_land_is_not_the_goals_verdict(tmp_path: Path) -> None:
    # The task's change is verified and fails; the branch stays at the base, whose own
    # predicate verdict came from the start check, and no verify's run is reused for it.
    repo = calc_repo(tmp_path / "repo")
    broken = FIX.replace("'a + b'", "'a * b + 1'")
    spec = make_spec(
        repo, predicate=SUITE, tasks=[command_task("fix", broken, SUITE)], model=False,
        run={"retries": 0},
    )  # fmt: skip
    _, result = run_night(spec, tmp_path / "run")
    events = trace_events(tmp_path / "run")
    assert result.stop_reason != "GOAL_MET"
    assert not [e for e in events if e.get("tool") == "predicate" and e.get("from_verify")]


def start_check_runs(tmp_path: Path, untracked: dict[str, str]) -> int:
    """How many times the check before the night ran the predicate, on a base that fails as
    the bug makes it fail, with ``untracked`` files in the user's checkout."""
    repo = calc_repo(tmp_path / "repo")
    for path, text in untracked.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    counter = tmp_path / "runs.txt"
    spec = make_spec(repo, predicate=f"echo run >> {counter}; {SUITE}", model=False)
    policy = sandbox_policy(spec, tmp_path / "run")
    check_predicate(spec.predicate, spec.workspace_path(), policy, hours=spec.budget.hours)
    return len(counter.read_text().splitlines())


def test_a_failing_base_beside_tool_settings_and_build_metadata_runs_once(
    tmp_path: Path,
) -> None:
    untracked = {".github/workflows/ci.yml": "on: push\n", "calc.egg-info/PKG-INFO": "x\n"}
    assert start_check_runs(tmp_path, untracked) == 1


def test_a_failing_base_beside_a_file_a_test_could_read_runs_again_in_the_checkout(
    tmp_path: Path,
) -> None:
    # what the user's checkout holds may be why it passes there: named before the night
    assert start_check_runs(tmp_path, {"calc/_local.py": "x = 1\n"}) == 2
