"""Drift bands through the real harness, and what the judge is (not) shown."""

from pathlib import Path
from typing import Any

import pytest

from overnight.core.drift import DriftVerdict, drift_gate
from overnight.core.tasks import Task
from overnight.messages.types import ModelRequest
from overnight.night.harness_requests import drift_request
from overnight.store.checkpoint import load_checkpoint
from overnight.testing import ScriptedModel
from overnight.testing.fakes import text_answer
from tests.helpers.nights import command_task, make_spec, run_night

OFF = ["t_5", "t_6", "t_7"]
GOAL = "Reduce p95 latency on /api/search to under 200ms."


def night_of_eight(repo: Path, tmp_path: Path, score: float, off: list[str] = OFF) -> Any:
    tasks = [command_task(f"t_{i}", f"echo {i} >> log.txt", "true") for i in range(8)]
    spec = make_spec(repo, goal=GOAL, tasks=tasks, predicate="false")
    verdict = {"reasoning": "judged", "off_goal_task_ids": off, "drift_score": score}
    model = ScriptedModel(drift=verdict)
    rd, result = run_night(spec, tmp_path / f"run-{score}", model=model)
    return rd, result, model


def test_aligned_nothing_pruned_ordinary_ending(repo: Path, tmp_path: Path) -> None:
    _, r, _ = night_of_eight(repo, tmp_path, 0.05, off=[])
    assert r.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"
    assert r.plan.pruned == []
    assert [d.score for d in r.drift] == [0.05]


def test_prune_band_sheds_off_goal_tasks_and_continues(repo: Path, tmp_path: Path) -> None:
    _, r, _ = night_of_eight(repo, tmp_path, 0.4)
    assert r.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"
    assert [p.id for p in r.plan.pruned] == OFF
    assert r.budgets.steps.used == 5
    assert [d.action for d in r.drift] == ["prune"]


def test_halt_band_ends_drift_detected_without_reshaping(repo: Path, tmp_path: Path) -> None:
    _, r, _ = night_of_eight(repo, tmp_path, 0.6)
    assert (r.stop_reason, r.status, r.exit_code) == ("DRIFT_DETECTED", "FAILURE", 3)
    assert r.plan.pruned == []
    assert r.plan.remaining == OFF
    assert r.alert == "page"
    assert r.resumable is False


def test_exactly_half_prunes_and_does_not_halt(repo: Path, tmp_path: Path) -> None:
    _, r, _ = night_of_eight(repo, tmp_path, 0.5)
    assert r.stop_reason != "DRIFT_DETECTED"
    assert [p.id for p in r.plan.pruned] == OFF


def test_exactly_point_three_does_not_even_prune(repo: Path, tmp_path: Path) -> None:
    _, r, _ = night_of_eight(repo, tmp_path, 0.3)
    assert r.plan.pruned == []
    assert r.budgets.steps.used == 8


@pytest.mark.parametrize(
    ("score", "action"),
    [
        (0.0, "none"),
        (0.3, "none"),
        (0.30001, "prune"),
        (0.5, "prune"),
        (0.50001, "halt"),
        (1.0, "halt"),
    ],
)
def test_gate_boundaries(score: float, action: str) -> None:
    queue = [Task(id=f"t_{i}", command="true", verify="true") for i in range(3)]
    verdict = DriftVerdict(reasoning="r", off_goal_task_ids=["t_1"], drift_score=score)
    decision = drift_gate(queue, verdict)
    assert decision.action == action
    assert [t.id for t in decision.pruned] == (["t_1"] if action == "prune" else [])


def test_judge_sees_only_the_original_goal_and_queue(repo: Path, tmp_path: Path) -> None:
    # A task rewrites a goal file and the spec copy in the worktree: the judge must not care.
    tasks = [
        command_task("t_0", "echo 'Improve observability of search.' > goal.txt", "true"),
        command_task("t_1", "sed -i 's/p95/dashboards/' night.toml || true", "true"),
        command_task("t_2", "true", "true"),
    ]
    spec = make_spec(repo, goal=GOAL, tasks=tasks, predicate="false", run={"drift_every": 2})
    seen: list[ModelRequest] = []

    def judge(request: ModelRequest) -> dict[str, Any]:
        seen.append(request)
        return {"reasoning": "fine", "off_goal_task_ids": [], "drift_score": 0.0}

    run_night(spec, tmp_path / "run", model=ScriptedModel(drift=judge))
    assert len(seen) == 1
    [request] = seen
    content = request.messages[0]["content"]
    assert f"<original_goal>{GOAL}</original_goal>" in content
    assert "t_2" in content and "t_0" not in content  # only the queue, not the history
    assert len(request.messages) == 1
    assert [t.name for t in request.tools] == ["submit_drift_verdict"]
    assert "observability" not in content


def test_verdict_as_text_json_is_accepted(repo: Path, tmp_path: Path) -> None:
    tasks = [command_task(f"t_{i}", "true", "true") for i in range(3)]
    spec = make_spec(repo, tasks=tasks, predicate="false", run={"drift_every": 1})
    body = '```json\n{"reasoning": "x", "off_goal_task_ids": ["t_2"], "drift_score": 0.45}\n```'
    _, r = run_night(spec, tmp_path / "run", model=ScriptedModel(drift=text_answer(body)))
    assert [p.id for p in r.plan.pruned] == ["t_2"]


def test_invalid_verdict_is_a_classified_failure(repo: Path, tmp_path: Path) -> None:
    tasks = [command_task(f"t_{i}", "true", "true") for i in range(3)]
    spec = make_spec(repo, tasks=tasks, predicate="false", run={"drift_every": 1})
    bad = {"reasoning": "x", "off_goal_task_ids": [], "drift_score": 1.7}
    rd, r = run_night(spec, tmp_path / "run", model=ScriptedModel(drift=bad))
    assert r.stop_reason == "UNRECOVERABLE_ERROR:invalid_model_output"
    assert r.exit_code == 4
    assert "drift_score" in r.message
    assert (rd.path / "result.json").exists()


def test_score_is_recorded_in_the_checkpoint(repo: Path, tmp_path: Path) -> None:
    rd, _, _ = night_of_eight(repo, tmp_path, 0.4)
    body = load_checkpoint(rd.checkpoint)
    assert body is not None and body["drift_score"] == 0.4


def test_the_judge_is_shown_automation_only_when_a_task_changed_some() -> None:
    queue = [Task(id="t_9", title="next", brief="do it", verify="true")]
    plain = drift_request("m", 512, GOAL, queue)
    assert plain == drift_request("m", 512, GOAL, queue, [])
    assert "automation" not in plain.messages[0]["content"]
    rows = [{"id": "t_1", "title": "ci", "paths": [".envrc"], "outcome": "parked"}]
    content = drift_request("m", 512, GOAL, queue, rows).messages[0]["content"]
    assert content.startswith(plain.messages[0]["content"])
    assert "<automation_changed>" in content and '".envrc"' in content
