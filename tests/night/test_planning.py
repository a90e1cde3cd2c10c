"""Structured answers are validated; an invalid one is asked for again once, then parked
(plan, replan) or ends the run (drift, a safety check that cannot be skipped)."""

from pathlib import Path
from typing import Any

from overnight.messages.types import ModelRequest
from overnight.testing import ScriptedExecutor, ScriptedModel
from overnight.testing.fakes import write_file
from tests.helpers.nights import command_task, make_spec, run_night

GOOD_PLAN = {
    "reasoning": "one step",
    "tasks": [{"id": "p_1", "title": "one", "brief": "write one", "verify": "test -f one.txt"}],
}
BAD_PLAN = {"reasoning": "no tasks", "tasks": []}


def sequence(*answers: dict[str, Any]) -> Any:
    seen: list[ModelRequest] = []

    def respond(request: ModelRequest) -> dict[str, Any]:
        seen.append(request)
        return answers[min(len(seen), len(answers)) - 1]

    respond.seen = seen  # type: ignore[attr-defined]
    return respond


def test_an_invalid_plan_is_asked_for_again_with_the_reason(repo: Path, tmp_path: Path) -> None:
    plan = sequence(BAD_PLAN, GOOD_PLAN)
    spec = make_spec(repo, tasks=[], predicate="test -f one.txt", executor={"target": "x:y"})
    executor = ScriptedExecutor({"p_1": [write_file("one.txt", "1")]})
    _, r = run_night(spec, tmp_path / "run", model=ScriptedModel(plan=plan), executor=executor)
    assert r.stop_reason == "GOAL_MET"
    first, second = plan.seen
    assert "rejected" not in str(first.messages)
    assert "rejected" in str(second.messages) and "tasks" in str(second.messages)


def test_a_plan_invalid_twice_is_parked_with_the_reason(repo: Path, tmp_path: Path) -> None:
    plan = sequence(BAD_PLAN, BAD_PLAN, GOOD_PLAN)
    spec = make_spec(repo, tasks=[], predicate="false", executor={"target": "x:y"})
    _, r = run_night(
        spec, tmp_path / "run", model=ScriptedModel(plan=plan), executor=ScriptedExecutor()
    )
    assert len(plan.seen) == 2  # once, then once more; never a third time
    assert (r.stop_reason, r.exit_code) == ("QUEUE_EMPTY_GOAL_UNMET", 3)
    [parked] = r.plan.parked
    assert parked.id.startswith("plan") and "invalid twice" in parked.reason
    assert "tasks" in parked.detail


def test_an_invalid_replan_is_parked_and_the_night_goes_on(repo: Path, tmp_path: Path) -> None:
    replan = sequence({"reasoning": "x", "add": [{"id": "bad id!"}]})
    tasks = [{"id": f"a_{i}", "brief": "b", "verify": "true"} for i in range(2)]
    spec = make_spec(repo, tasks=tasks, predicate="false", executor={"target": "x:y"})
    _, r = run_night(
        spec, tmp_path / "run", model=ScriptedModel(replan=replan), executor=ScriptedExecutor()
    )
    assert r.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"
    assert [v.id for v in r.verified] == ["a_0", "a_1"]
    assert any(p.id.startswith("replan") for p in r.plan.parked)


def test_a_drift_verdict_invalid_once_is_retried(repo: Path, tmp_path: Path) -> None:
    drift = sequence(
        {"reasoning": "x", "off_goal_task_ids": [], "drift_score": 7},
        {"reasoning": "x", "off_goal_task_ids": ["t_2"], "drift_score": 0.4},
    )
    tasks = [command_task(f"t_{i}", "true", "true") for i in range(3)]
    spec = make_spec(repo, tasks=tasks, predicate="false", run={"drift_every": 1})
    _, r = run_night(spec, tmp_path / "run", model=ScriptedModel(drift=drift))
    assert [p.id for p in r.plan.pruned] == ["t_2"]
