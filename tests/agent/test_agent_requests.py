"""What the built-in agent puts in its requests: cache breakpoints, the budget notice, the
visible task budget, and which model a task is executed with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overnight.agent.prompts import SYSTEM
from overnight.core.budget import Price, Usage
from overnight.messages.types import ModelRequest
from overnight.store.journal import read_journal
from tests.agent.support import (
    FIX_ADD,
    UNITTEST,
    AgentModel,
    Step,
    agent_spec,
    agent_task,
    calc_repo,
    text_of,
)
from tests.helpers.nights import run_night

MARK = {"type": "ephemeral", "ttl": "5m"}
NOTICE = "[budget]"


def marked_blocks(request: ModelRequest) -> list[dict[str, Any]]:
    """Every message block of ``request`` that carries cache_control."""
    return [
        block
        for message in request.messages
        if not isinstance(message["content"], str)
        for block in message["content"]
        if block.get("cache_control") is not None
    ]


# --------------------------------------------------------------------------- cache breakpoints


def test_cache_always_marks_tools_system_and_the_last_block_with_5m(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path)
    spec = agent_spec(repo, tasks=[agent_task("fix_add")], agent={"cache": "always"})
    model = AgentModel({"fix_add": FIX_ADD})
    _rd, result = run_night(spec, tmp_path / "run", model=model)
    assert result.stop_reason == "GOAL_MET"
    requests = model.executes()
    assert len(requests) == 4
    for request in requests:
        assert request.cache_ttl == "5m"
        assert [t.cache_control for t in request.tools] == [None] * 5 + [MARK]
        assert request.system == [{"type": "text", "text": SYSTEM, "cache_control": MARK}]
        last = request.messages[-1]["content"]
        assert isinstance(last, list) and last[-1]["cache_control"] == MARK
        # one breakpoint in the conversation: earlier ones are not left behind in it
        assert marked_blocks(request) == [last[-1]]
    first = requests[0].messages[0]["content"]
    assert first[0]["type"] == "text" and first[0]["text"].startswith("Task fix_add:")
    assert [b["type"] for b in requests[1].messages[-1]["content"]] == ["tool_result"]


def test_cache_off_marks_nothing(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path)
    spec = agent_spec(repo, tasks=[agent_task("fix_add")], agent={"cache": "off"})
    model = AgentModel({"fix_add": FIX_ADD})
    _rd, result = run_night(spec, tmp_path / "run", model=model)
    assert result.stop_reason == "GOAL_MET"
    for request in model.calls:
        assert request.cache_ttl is None
        assert "cache_control" not in json.dumps(request.model_dump(exclude_none=True))
    for request in model.executes():
        assert request.system == SYSTEM
        assert isinstance(request.messages[0]["content"], str)


# --------------------------------------------------------------------------- the budget notice

#: Only output is billed, so every call costs exactly its reserved worst case: the spend after
#: n calls is n x 3200 x $25/M = n x $0.08 of a $1 cap, and the calls after the ninth one
#: (spent $0.72, then $0.80) are in the notice band, below the $0.92 enforcement line.
OUTPUT_PRICED = {
    "fake-opus": {
        "input": 0.0,
        "output": 25.0,
        "cache_read": 0.0,
        "cache_write_5m": 0.0,
        "cache_write_1h": 0.0,
    }
}


def until_noticed_twice(request: ModelRequest, step: int) -> Step:
    """Reads on (new arguments each time) until the second call that carries a notice."""
    if NOTICE in text_of(request.messages[-1]["content"]) and step >= 10:
        return "Stopping here to save money."
    return ("read_file", {"path": "calc/core.py", "limit": step + 1})


def test_the_budget_notice_is_the_last_block_after_the_breakpoint(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path)
    spec = agent_spec(
        repo,
        tasks=[agent_task("spend", verify="true")],
        usd=1.0,
        prices=OUTPUT_PRICED,
        agent={"cache": "always", "max_calls": 12, "max_tokens": 3200},
    )
    model = AgentModel({"spend": until_noticed_twice}, output=3200)
    _rd, result = run_night(spec, tmp_path / "run", model=model)
    requests = model.executes()
    assert len(requests) == 11
    assert result.budgets.cost_usd.refused_at is None
    quiet, noticed = requests[:9], requests[9:]
    for request in quiet:
        assert NOTICE not in json.dumps(request.model_dump())
    for request, share in zip(noticed, ("72%", "80%"), strict=True):
        last = request.messages[-1]["content"]
        notice = last[-1]
        assert notice == {"type": "text", "text": notice["text"]}
        assert notice["text"].startswith(f"{NOTICE} {share} of the money for this night is spent")
        assert [b["type"] for b in last] == ["tool_result", "text"]
        assert last[-2]["cache_control"] == MARK
        assert marked_blocks(request) == [last[-2]]  # the notice comes after every breakpoint
        assert json.dumps(request.model_dump()).count(NOTICE) == 1
        # the stable prefix is what it was before the notice
        assert request.system == quiet[0].system
        assert request.tools == quiet[0].tools
        assert NOTICE not in json.dumps(request.system)


# --------------------------------------------------------------------------- the task budget


def test_the_visible_task_budget_is_the_money_left_in_output_tokens(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path)
    spec = agent_spec(repo, tasks=[agent_task("fix_add")], agent={"task_budget": True})
    model = AgentModel({"fix_add": FIX_ADD})
    rd, result = run_night(spec, tmp_path / "run", model=model)
    assert result.stop_reason == "GOAL_MET"
    # replay the ledger from the spend journal: what had been spent when each call was made
    spent, spent_before = 0.0, []
    for record in read_journal(rd.spend):
        if record["kind"] == "reserve":
            spent_before.append(spent)
        elif record["kind"] == "spend":
            spent += record["usd"]
    assert len(spent_before) == len(model.calls)
    budgets = []
    for request, before in zip(model.calls, spent_before, strict=True):
        if request.purpose != "execute":
            continue
        expected = int((10.0 * 0.92 - before) * 1e6 / 25.0)  # $ left / $ per output token
        assert request.task_budget_tokens == expected
        budgets.append(expected)
    assert len(budgets) == 4 and budgets == sorted(budgets, reverse=True)
    assert budgets[0] == 368_000  # nothing spent yet: $9.20 at $25 per million


def test_no_task_budget_unless_asked(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path)
    spec = agent_spec(repo, tasks=[agent_task("fix_add")])
    model = AgentModel({"fix_add": FIX_ADD})
    run_night(spec, tmp_path / "run", model=model)
    assert [r.task_budget_tokens for r in model.executes()] == [None] * 4


# --------------------------------------------------------------------------- model tiering

HAIKU = Price(1.0, 5.0, 0.1, 1.25, 2.0)


def test_mechanical_tasks_run_on_the_mechanical_model(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path)
    plan = {
        "reasoning": "one fix, one chore",
        "tasks": [
            {"id": "fix_add", "title": "fix add", "brief": "make add() add", "verify": UNITTEST},
            {
                "id": "notes",
                "title": "write notes",
                "brief": "write NOTES.md",
                "verify": "test -f NOTES.md",
                "mechanical": True,
            },
        ],
    }
    spec = agent_spec(
        repo,
        agent={"mechanical_model": "fake-haiku"},
        prices={
            "fake-haiku": {"input": 1.0, "output": 5.0},
            "fake-opus": {"input": 5.0, "output": 25.0},
        },
        predicate=f"{UNITTEST} && test -f NOTES.md",
        commands=["python3 -m unittest", "test"],
    )
    notes: list[Step] = [("write_file", {"path": "NOTES.md", "content": "notes\n"}), "written"]
    model = AgentModel({"fix_add": FIX_ADD, "notes": notes}, plan=plan)
    rd, result = run_night(spec, tmp_path / "run", model=model)
    assert result.stop_reason == "GOAL_MET"
    assert {r.model for r in model.executes("notes")} == {"fake-haiku"}
    assert {r.model for r in model.executes("fix_add")} == {"fake-opus"}
    assert {r.model for r in model.calls if r.purpose != "execute"} == {"fake-opus"}
    # each call is priced at its own model's rates
    spent = [r for r in read_journal(rd.spend) if r["kind"] == "spend"]
    assert sorted({r["model"] for r in spent}) == ["fake-haiku", "fake-opus"]
    for record in spent:
        u = record["usage"]
        usage = Usage(u["input"], u["output"], u["cache_read"], u["cache_write_5m"])
        price = HAIKU if record["model"] == "fake-haiku" else Price(5.0, 25.0, 0.5, 6.25, 10.0)
        assert record["usd"] == pytest.approx(usage.cost(price))
