"""The built-in agent driven end to end: a real repository, a real worktree, real tools and
real verify commands; only the model is fake (see ``tests.agent.support``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from overnight.messages.types import ModelRequest
from tests.agent.support import (
    BUGGY,
    FIX_ADD,
    FIXED,
    UNITTEST,
    AgentModel,
    Step,
    agent_spec,
    agent_task,
    calc_repo,
    executor_outcomes,
    last_results,
    task_of,
    trace_records,
)
from tests.helpers.nights import git, run_night


def test_an_edit_lands_as_one_verified_commit_and_the_checkout_is_untouched(
    tmp_path: Path,
) -> None:
    repo = calc_repo(tmp_path)
    main_head = git(repo, "rev-parse", "HEAD")
    spec = agent_spec(repo, tasks=[agent_task("fix_add", "add() subtracts; make it add.")])
    model = AgentModel({"fix_add": FIX_ADD})
    rd, result = run_night(spec, tmp_path / "run", model=model)

    assert result.stop_reason == "GOAL_MET"
    assert [v.id for v in result.verified] == ["fix_add"]
    assert [r.purpose for r in model.calls] == ["execute"] * 4 + ["summarize"]
    assert [o["status"] for o in executor_outcomes(rd)] == ["finished"]

    branch = result.branch.name
    assert git(repo, "rev-list", "--count", f"{main_head}..{branch}") == "1"
    assert git(repo, "log", "-1", "--format=%s", branch) == "fix_add: task fix_add"
    assert git(repo, "diff", "--name-only", main_head, branch) == "calc/core.py"
    assert git(repo, "show", f"{branch}:calc/core.py") + "\n" == FIXED
    # the user's checkout: same branch, same commit, same files, nothing staged or left over
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(repo, "rev-parse", "HEAD") == main_head
    assert (repo / "calc/core.py").read_text() == BUGGY
    assert git(repo, "status", "--porcelain") == ""


def answer_to_last_call(request: ModelRequest) -> dict[str, Any]:
    """The one tool_result in ``request``, checked to answer the tool call just before it."""
    [block] = last_results(request)
    call = request.messages[-2]
    assert call["role"] != "user"
    assert block["tool_use_id"] == call["content"][0]["id"]
    return block


def test_the_model_reads_exactly_what_its_tools_returned(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path)
    spec = agent_spec(repo, tasks=[agent_task("fix_add")])
    script = [
        FIX_ADD[0],
        ("run_command", {"command": "rm -rf calc"}),
        ("read_file", {"path": "calc/missing.py"}),
        *FIX_ADD[1:],
    ]
    model = AgentModel({"fix_add": script})
    rd, result = run_night(spec, tmp_path / "run", model=model)
    assert result.stop_reason == "GOAL_MET"
    first, *later = model.executes("fix_add")
    assert last_results(first) == []
    read, refused, missing, edited, ran = (answer_to_last_call(r) for r in later)

    numbered = "\n".join(f"{i:6}\t{line}" for i, line in enumerate(BUGGY.splitlines(), 1))
    assert read == {**read, "is_error": False, "content": numbered}
    assert refused["is_error"] is True
    assert "'rm' is not an allowed command" in refused["content"]
    assert "python3 -m unittest" in refused["content"]  # what is allowed instead
    assert missing["is_error"] is True
    assert "calc/missing.py does not exist" in missing["content"]
    assert edited["is_error"] is False
    assert edited["content"].startswith("edited calc/core.py: replaced 1 line(s) at line 2")
    assert ran["is_error"] is False
    assert ran["content"].startswith(f"$ {UNITTEST}\nexit code 0")
    assert ran["content"].endswith("OK")
    calls = [r for r in trace_records(rd) if r["kind"] == "tool_call" and "error" in r]
    assert [(r["tool"], r["error"]) for r in calls] == [
        ("read_file", False),
        ("run_command", True),
        ("read_file", True),
        ("edit_file", False),
        ("run_command", False),
    ]


# --------------------------------------------------------------------------- limits and loops


def never_stops(request: ModelRequest, step: int) -> Step:
    """A model that calls a tool on every turn, each time with new arguments."""
    return ("read_file", {"path": "calc/core.py", "offset": step + 1})


def test_a_task_at_its_call_limit_is_verified_and_committed_when_done(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path)
    spec = agent_spec(repo, tasks=[agent_task("fix_add")], agent={"max_calls": 2})

    def edit_then_spin(request: ModelRequest, step: int) -> Step:
        return FIX_ADD[1] if step == 0 else never_stops(request, step)

    model = AgentModel({"fix_add": edit_then_spin})
    rd, result = run_night(spec, tmp_path / "run", model=model)
    assert len(model.executes()) == 2
    [outcome] = executor_outcomes(rd)
    assert outcome["status"] == "limit_reached"
    assert outcome["summary"].startswith("call limit (2) reached; 2 call(s)")
    assert result.stop_reason == "GOAL_MET"
    assert [(v.id, v.attempts) for v in result.verified] == [("fix_add", 1)]
    assert git(repo, "show", f"{result.branch.name}:calc/core.py") + "\n" == FIXED


def test_a_task_at_its_call_limit_and_not_done_is_retried_then_parked(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path)
    tasks = [agent_task("stuck", value=2), agent_task("fix_add", value=1)]
    spec = agent_spec(repo, tasks=tasks, agent={"max_calls": 2}, run={"retries": 1})
    model = AgentModel({"stuck": never_stops, "fix_add": [FIX_ADD[1], "add() fixed."]})
    rd, result = run_night(spec, tmp_path / "run", model=model)
    assert len(model.executes("stuck")) == 4  # two attempts of two calls
    outcomes = [(o["task"], o["status"]) for o in executor_outcomes(rd)]
    assert outcomes == [
        ("stuck", "limit_reached"),
        ("stuck", "limit_reached"),
        ("fix_add", "finished"),
    ]
    started = [r for r in trace_records(rd) if r["kind"] == "task" and r["event"] == "started"]
    assert [(r["task"], r["attempt"]) for r in started] == [
        ("stuck", 1),
        ("stuck", 2),
        ("fix_add", 1),
    ]
    [parked] = result.plan.parked
    assert (parked.id, parked.reason) == ("stuck", "not done after 2 attempt(s)")
    # the run went on to the next task
    assert result.stop_reason == "GOAL_MET"
    assert [v.id for v in result.verified] == ["fix_add"]


def spin(_request: ModelRequest, _step: int) -> Step:
    return ("read_file", {"path": "README.md"})


def test_a_looping_task_is_stopped_after_three_calls_and_parked_without_retries(
    tmp_path: Path,
) -> None:
    repo = calc_repo(tmp_path)
    tasks = [agent_task("spin", value=2), agent_task("fix_add", value=1)]
    spec = agent_spec(repo, tasks=tasks, run={"retries": 2})
    model = AgentModel({"spin": spin, "fix_add": FIX_ADD})
    rd, result = run_night(spec, tmp_path / "run", model=model)
    spun = model.executes("spin")
    assert len(spun) == 3
    assert [len(last_results(r)) for r in spun] == [0, 1, 1]
    outcomes = [(o["task"], o["status"]) for o in executor_outcomes(rd)]
    assert outcomes == [("spin", "looping"), ("fix_add", "finished")]
    [parked] = result.plan.parked
    assert parked.id == "spin"
    assert "repeated the same tool call" in parked.reason
    started = [r for r in trace_records(rd) if r["kind"] == "task" and r["event"] == "started"]
    assert [(r["task"], r["attempt"]) for r in started] == [("spin", 1), ("fix_add", 1)]
    assert result.stop_reason == "GOAL_MET"


#: A check that prints the same failures every time, each run a little slower than the last.
SLOW_CHECK = """\
import pathlib, time
runs = pathlib.Path("check.runs")
n = int(runs.read_text()) if runs.exists() else 0
runs.write_text(str(n + 1))
time.sleep(0.3 * n)
print("\\n".join(f"problem {i}" for i in range(LINES)))
raise SystemExit(1)
"""


@pytest.mark.parametrize("lines", [2, 80], ids=["short", "cut-output"])
def test_a_command_repeating_its_output_loops_however_long_each_run_takes(
    tmp_path: Path, lines: int
) -> None:
    repo = calc_repo(tmp_path, {"check.py": SLOW_CHECK.replace("LINES", str(lines))})
    spec = agent_spec(
        repo,
        tasks=[agent_task("spin")],
        commands=["python3 check.py"],
        tool_options={"max_output_chars": 200},
    )

    def rerun(_request: ModelRequest, _step: int) -> Step:
        return ("run_command", {"command": "python3 check.py"})

    model = AgentModel({"spin": rerun})
    rd, result = run_night(spec, tmp_path / "run", model=model)
    outputs = [last_results(r)[0]["content"] for r in model.executes("spin")[1:]]
    assert len(outputs) == 2  # the third result ended the task
    assert len({o.splitlines()[1] for o in outputs}) == 2  # each run took longer
    assert outputs[0].splitlines()[2] == "problem 0"
    if lines > 2:  # a cut output names its own log each time
        assert all("characters cut here; the full output is kept in" in o for o in outputs)
        assert outputs[0] != outputs[1]
    assert [o["status"] for o in executor_outcomes(rd)] == ["looping"]
    assert "repeated the same tool call" in result.plan.parked[0].reason


def test_looping_tasks_in_a_row_end_the_run_no_progress(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path)
    tasks = [
        agent_task("spin_a", value=3),
        agent_task("spin_b", value=2),
        agent_task("fix_add", value=1),
    ]
    spec = agent_spec(repo, tasks=tasks, run={"no_progress_after": 2, "retries": 2})
    model = AgentModel({"spin_a": spin, "spin_b": spin, "fix_add": FIX_ADD})
    rd, result = run_night(spec, tmp_path / "run", model=model)
    assert result.stop_reason == "NO_PROGRESS"
    assert [p.id for p in result.plan.parked] == ["spin_a", "spin_b"]
    assert result.plan.remaining == ["fix_add"]
    assert len(model.executes()) == 6
    assert [o["status"] for o in executor_outcomes(rd)] == ["looping", "looping"]


# --------------------------------------------------------------------------- planning


def test_planned_tasks_are_executed_by_the_built_in_agent_to_the_goal(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path)
    plan = {
        "reasoning": "add() is wrong and there are no notes",
        "tasks": [
            {"id": "fix_add", "title": "fix add", "brief": "make add() add", "verify": UNITTEST},
            {"id": "notes", "title": "notes", "brief": "add notes", "verify": "test -f NOTES.md"},
        ],
    }
    spec = agent_spec(
        repo, predicate=f"{UNITTEST} && test -f NOTES.md", commands=["python3 -m unittest", "test"]
    )
    assert spec.tasks == []
    notes: list[Step] = [("write_file", {"path": "NOTES.md", "content": "add() adds\n"}), "done"]
    model = AgentModel({"fix_add": FIX_ADD, "notes": notes}, plan=plan)
    rd, result = run_night(spec, tmp_path / "run", model=model)
    assert result.stop_reason == "GOAL_MET"
    assert [r.purpose for r in model.calls] == ["plan"] + ["execute"] * 6 + ["summarize"]
    assert [task_of(r) for r in model.executes()] == ["fix_add"] * 4 + ["notes"] * 2
    [planned] = [r for r in trace_records(rd) if r.get("decision") == "planned"]
    assert planned["tasks"] == ["fix_add", "notes"]
    assert [(v.id, v.attempts) for v in result.verified] == [("fix_add", 1), ("notes", 1)]
    log = git(repo, "log", "--format=%s", f"{result.branch.base_commit}..{result.branch.name}")
    assert log.splitlines() == ["notes: notes", "fix_add: fix add"]
    assert git(repo, "show", f"{result.branch.name}:NOTES.md") == "add() adds"
