"""A resumed night is exported too: a trace of its own, its ending, its tasks."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.nights import command_task, make_repo, make_spec, resume_night, run_night
from tests.telemetry.collector import Collector, named


def test_a_resume_is_a_night_of_its_own_with_its_ending(
    tmp_path: Path, collector: Collector
) -> None:
    repo = make_repo(tmp_path / "repo")
    spec = make_spec(
        repo,
        model=False,
        predicate="test -f a && test -f b",
        budget={"steps": 1},
        tasks=[
            command_task("make-a", "touch a", "test -f a", value=2),
            command_task("make-b", "touch b", "test -f b", value=1),
        ],
        telemetry={"otlp_endpoint": collector.url},
    )
    _, first = run_night(spec, tmp_path / "run")
    assert first.ending == "BUDGET_EXHAUSTED" and first.resumable
    _, second = resume_night(tmp_path / "run", {"steps": 5})
    assert second.ending == "GOAL_MET"

    nights = sorted(named(collector.spans(), "night"), key=lambda s: s.attrs["overnight.resumes"])
    assert [(n.attrs["overnight.resumes"], n.attrs["overnight.ending"]) for n in nights] == [
        (0, "BUDGET_EXHAUSTED"),
        (1, "GOAL_MET"),
    ]
    assert nights[0].span.trace_id != nights[1].span.trace_id
    assert nights[0].attrs["overnight.run_id"] == nights[1].attrs["overnight.run_id"]
    assert nights[1].attrs["overnight.exit_code"] == 0
    assert any(name == "decision resumed" for name, _ in nights[1].events)
    tasks = {
        (bytes(s.span.trace_id), s.attrs["overnight.task.id"])
        for s in named(collector.spans(), "task ")
    }
    assert tasks == {
        (bytes(nights[0].span.trace_id), "make-a"),
        (bytes(nights[1].span.trace_id), "make-b"),
    }
    # a command task's command is a tool span of its attempt
    commands = [s for s in named(collector.spans(), "execute_tool command")]
    assert len(commands) == 2
    assert all(c.attrs["overnight.exit_code"] == 0 for c in commands)
