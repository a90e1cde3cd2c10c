"""What the built-in agent carries forward: a compacted conversation within a task, and lessons
from one task to the next (across a resume too)."""

from __future__ import annotations

import json
from pathlib import Path

from overnight.agent.prompts import COMPACT_SYSTEM
from overnight.messages.types import ModelRequest
from overnight.store.checkpoint import load_checkpoint
from tests.agent.support import (
    FIX_ADD,
    UNITTEST,
    AgentModel,
    Step,
    agent_spec,
    agent_task,
    calc_repo,
    first_text,
    trace_records,
)
from tests.helpers.nights import resume_night, run_night

COMPACTED = "\n\nProgress so far (compacted):\n"
SUMMARY = "Read README.md (a long changelog); calc/core.py still subtracts in add()."
CHANGELOG = "".join(f"- release {n}: small fixes to calc\n" for n in range(120))  # ~4 KB


def read_then_fix(request: ModelRequest, step: int) -> Step:
    if COMPACTED not in first_text(request):
        return ("read_file", {"path": "CHANGELOG.md"})
    return FIX_ADD[1:][step]


def test_a_long_conversation_is_compacted_and_work_goes_on_from_the_summary(
    tmp_path: Path,
) -> None:
    repo = calc_repo(tmp_path, {"CHANGELOG.md": CHANGELOG})
    spec = agent_spec(
        repo,
        tasks=[agent_task("fix_add", "add() subtracts; make it add.")],
        agent={"compact_at_tokens": 600, "cache": "off"},
    )
    model = AgentModel({"fix_add": read_then_fix}, compact=SUMMARY)
    rd, result = run_night(spec, tmp_path / "run", model=model)
    assert result.stop_reason == "GOAL_MET"
    purposes = [r.purpose for r in model.calls]
    assert purposes == ["execute", "compact", "execute", "execute", "execute", "summarize"]
    before, compact, after = model.calls[:3]

    # the compact call holds the whole transcript so far, and nothing else
    assert compact.system == COMPACT_SYSTEM
    assert compact.tools == []
    [message] = compact.messages
    assert message["role"] == "user"
    transcript = json.loads(message["content"])
    assert [m["role"] == "user" for m in transcript] == [True, False, True]
    assert transcript[0] == before.messages[0]
    assert transcript[1]["content"][0]["input"] == {"path": "CHANGELOG.md"}
    assert "release 119: small fixes to calc" in transcript[2]["content"][0]["content"]

    # the next execute call starts over from the brief and the summary
    [restart] = after.messages
    brief = before.messages[0]["content"]
    assert "add() subtracts; make it add." in brief
    assert restart == {"role": "user", "content": f"{brief}{COMPACTED}{SUMMARY}"}
    assert "release 119" not in json.dumps(after.messages)
    compacted = [r for r in trace_records(rd) if r["kind"] == "compacted"]
    assert compacted == [{**compacted[0], "task": "fix_add", "calls": 1}]


LESSONS = "Ran the tests.\nLESSON: tests run with `python3 -m unittest`\nLESSON: be careful\n"
KEPT = "tests run with `python3 -m unittest`"


def learn_tasks() -> list[dict[str, object]]:
    return [
        agent_task("learn", verify="true", value=2),
        agent_task("use", verify="true", value=1),
    ]


LEARN: list[Step] = [("run_command", {"command": UNITTEST}), LESSONS]


def test_a_specific_lesson_reaches_the_next_task_and_a_vague_one_does_not(
    tmp_path: Path,
) -> None:
    repo = calc_repo(tmp_path)
    spec = agent_spec(repo, tasks=learn_tasks(), predicate="test -f NOTES.md")
    model = AgentModel({"learn": LEARN, "use": ["nothing to do"]})
    rd, result = run_night(spec, tmp_path / "run", model=model)
    assert [v.id for v in result.verified] == ["learn", "use"]
    assert "Lessons from earlier tasks" not in first_text(model.executes("learn")[0])
    first = first_text(model.executes("use")[0])
    assert f"Lessons from earlier tasks in this run (specific; trust them):\n- {KEPT}" in first
    assert "be careful" not in first
    state = load_checkpoint(rd.checkpoint)
    assert state is not None and state["lessons"] == [KEPT]


def test_lessons_survive_a_resume(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path)
    spec = agent_spec(repo, tasks=learn_tasks(), predicate="test -f NOTES.md", budget={"steps": 1})
    first = AgentModel({"learn": LEARN})
    rd, stopped = run_night(spec, tmp_path / "run", model=first)
    assert stopped.stop_reason == "BUDGET_EXHAUSTED:steps"
    assert stopped.plan.remaining == ["use"]
    assert not first.executes("use")
    state = load_checkpoint(rd.checkpoint)
    assert state is not None and state["lessons"] == [KEPT]

    second = AgentModel({"use": ["nothing to do"]})
    _rd, resumed = resume_night(rd.path, {"steps": 10}, model=second)
    assert [v.id for v in resumed.verified] == ["learn", "use"]
    [use] = second.executes()
    assert f"- {KEPT}" in first_text(use)
    assert "be careful" not in first_text(use)
