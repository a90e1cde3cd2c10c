"""Workload facts: what a run's tasks cost, written into the run index at its ending, and
rebuilt from the trace of a run that has none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from overnight.cli.demo import run_demo
from overnight.estimate.history import recorded_workloads
from overnight.night.workload import WorkloadFacts, Workspace, workload_facts
from overnight.night.workload_record import workspace_of
from overnight.store.index import index_path, workload_records
from overnight.store.journal import Journal, read_intact_records


def demo_night(where: Path) -> dict[str, Any]:
    assert run_demo(where, quiet=True) == 0
    data: dict[str, Any] = json.loads((where / "run" / "result.json").read_text())
    return data


def trace_of(where: Path) -> list[dict[str, Any]]:
    return read_intact_records(where / "run" / "trace.jsonl")


def test_a_night_records_its_workload_in_the_index_at_its_ending(tmp_path: Path) -> None:
    result = demo_night(tmp_path / "a")
    records = workload_records()
    assert list(records) == [result["run_id"]]
    facts = WorkloadFacts.model_validate(records[result["run_id"]])
    assert facts.kind == "workload_facts" and facts.version == 1 and facts.source == "ending"
    assert facts.ending == "GOAL_MET"
    assert facts.models == ("scripted-opus",)
    assert (facts.tasks_attempted, facts.tasks_verified, facts.tasks_parked) == (2, 2, 0)
    assert facts.workspace.path == str((tmp_path / "a" / "workspace").absolute())
    # Every booked call is in it once, and its dollars are the night's bill.
    calls = [e for e in trace_of(tmp_path / "a") if e["kind"] == "model_call"]
    assert len(facts.all_calls) == len(calls) == result["spend"]["model_calls"]
    assert round(facts.total_usd, 9) == round(result["spend"]["total_usd"], 9)
    summary = facts.summary
    assert summary is not None
    assert summary.usd_by_purpose == result["spend"]["by_purpose"]
    # The plan and the closing summary are the night's; the replan follows the first task.
    assert [c.purpose for c in facts.night_calls] == ["plan", "summarize"]
    assert [c.purpose for c in facts.tasks[0].calls][-1] == "replan"
    assert summary.calls_per_task == tuple(len(t.agent_calls) for t in facts.tasks)
    assert all(n > 0 for n in summary.calls_per_task)
    first_inputs = [t.agent_calls[0].input_tokens for t in facts.tasks]
    assert summary.input_by_call_index[0] == sum(first_inputs) / len(first_inputs)
    assert 0 < summary.cache_read_share < 1 and summary.verify_seconds > 0


def test_a_run_without_recorded_facts_is_read_from_its_trace(tmp_path: Path) -> None:
    demo_night(tmp_path / "a")
    recorded = recorded_workloads()
    # An index as runs wrote it before they recorded their workload: run lines only.
    runs = [r for r in read_intact_records(index_path()) if r["kind"] == "run"]
    index_path().unlink()
    journal = Journal(index_path(), durable=False)
    for r in runs:
        journal.append({k: v for k, v in r.items() if k != "crc"})
    journal.close()
    assert workload_records() == {}
    rebuilt = recorded_workloads()
    assert [f.source for f in rebuilt] == ["trace"]
    assert rebuilt[0].tasks == recorded[0].tasks
    assert rebuilt[0].night_calls == recorded[0].night_calls


def test_copies_of_one_repository_are_one_workspace(tmp_path: Path, repo: Path) -> None:
    demo_night(tmp_path / "a")
    demo_night(tmp_path / "b")
    a, b = (workspace_of(tmp_path / x / "workspace") for x in "ab")
    assert a.path != b.path and a.root_tree is not None
    assert a.same_as(b)
    assert not a.same_as(workspace_of(repo))
    assert Workspace(path="/x", remote="git@h:r").same_as(Workspace(path="/y", remote="git@h:r"))
    assert not Workspace(path="/x").same_as(Workspace(path="/y"))


def _call(purpose: str, t: float, **usage: int) -> dict[str, Any]:
    return {"kind": "model_call", "purpose": purpose, "model": "m", "t_start": t, "usage": usage}


def test_calls_belong_to_the_task_last_started_and_retries_add_to_it() -> None:
    trace = [
        _call("plan", 0, input=10, output=5),
        {"kind": "task", "event": "started", "task": "a"},
        _call("execute", 1, input=100, output=10),
        {"kind": "tool_call", "tool": "run_command", "task": "a", "t_start": 1.0, "t": 3.5},
        {"kind": "tool_call", "tool": "verify", "task": "a", "seconds": 2.0},
        _call("replan", 4, input=50, output=5),
        {"kind": "task", "event": "started", "task": "b"},
        {**_call("execute", 5), "released": True},
        _call("execute", 6, input=200, output=20, cache_read=100),
        {"kind": "task", "event": "started", "task": "a"},
        _call("execute", 7, input=300, output=30),
        {"kind": "decision", "decision": "stop"},
        _call("summarize", 8, input=20, output=5),
    ]
    facts = workload_facts("r", trace, Workspace(path="/w"), verified=["a"], parked=["b"])
    a, b = facts.tasks
    assert (a.id, a.outcome, a.attempts) == ("a", "verified", 2)
    assert [c.purpose for c in a.calls] == ["execute", "replan", "execute"]
    assert (a.command_seconds, a.verify_seconds) == (2.5, 2.0)
    assert (b.outcome, [c.input_tokens for c in b.calls]) == ("parked", [300])
    assert [c.purpose for c in facts.night_calls] == ["plan", "summarize"]
    assert facts.summary is not None
    assert facts.summary.calls_per_task == (2, 1)
    assert facts.summary.input_by_call_index == (200.0, 300.0)
