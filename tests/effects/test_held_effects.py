"""A task whose external effect has an unknown outcome is held for a person whatever its verify
says: parked, kept off the branch, listed by ``overnight review``. Resolving the effect (it
happened, or it did not) lets a resume run the task again, and the ledger sees to it that the
effect is performed at most once in all.

Every night here has a verify that passes: the verdict is not what holds the task.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from overnight.cli.main import main
from overnight.core.errors import ConfigError
from overnight.core.state import RunState
from overnight.core.tasks import Task
from overnight.messages.types import ModelRequest
from overnight.store.run_state import RunStateStore, load_run_state
from overnight.store.rundir import RunDir, RunLock
from overnight.testing import FunctionModel, text_answer, tool_answer, usage_dict
from tests.effects.billing import effect_rows
from tests.helpers.kills import (
    kill_everything,
    kill_marked,
    marked_env,
    overnight,
    start_cli,
    wait_for,
)
from tests.helpers.nights import (
    git,
    load_result,
    make_spec,
    resume_night,
    run_night,
    spec_data,
    write_spec,
)
from tests.tools.test_mcp import TICKET, lines, stdio_entry

TOOLS = '''
import threading

from overnight.effects import ToolFailure

KEYS = []
GATE = threading.Event()


def flaky_refund(args, idempotency_key):
    """Refund an order (the provider's gateway fails the first time: 502)."""
    KEYS.append(idempotency_key)
    if len(KEYS) == 1:
        raise ToolFailure("502 bad gateway", retryable=True)
    return {"id": "re_1"}


def slow_refund(args, idempotency_key):
    """Refund an order (the first call never answers in time)."""
    KEYS.append(idempotency_key)
    if len(KEYS) == 1:
        GATE.wait(600)
    return {"id": "re_1"}
'''

TARGETS = {"retryable_failure": "held_tools:flaky_refund", "timeout": "held_tools:slow_refund"}
FIX = "fixed.txt"


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "held_tools.py").write_text(TOOLS)
    monkeypatch.syspath_prepend(str(lib))
    sys.modules.pop("held_tools", None)
    import held_tools

    yield held_tools
    held_tools.GATE.set()  # the call given up on ends


def refund_model() -> FunctionModel:
    """Writes the fix, asks for the refund (again on every execution), and stops."""

    def answer(request: ModelRequest) -> dict[str, Any]:
        usage = usage_dict(input=900, output=60)
        if request.purpose != "execute":
            return text_answer("closing note", usage)
        step = sum(1 for m in request.messages if m["role"] == "assistant")
        if step == 0:
            return tool_answer("write_file", {"path": FIX, "content": "fixed\n"}, usage)
        if step == 1:
            return tool_answer("refund", {"order_id": "4471"}, usage)
        return text_answer("Fixed, and asked for the refund.", usage)

    return FunctionModel(answer)


def held_night(repo: Path, target: str) -> Any:
    refund = {
        "name": "refund",
        "target": target,
        "mutating": True,
        "task_key": "{order_id}:refund",
        "timeout_s": 0.5,
        "input_schema": {
            "type": "object",
            "properties": {"order_id": {"type": "string", "pattern": "^[0-9]+$"}},
            "required": ["order_id"],
        },
    }
    return make_spec(
        repo,
        predicate=f"test -f {FIX}",
        tasks=[
            {"id": "refund_4471", "brief": "fix it and refund 4471", "verify": f"test -f {FIX}"}
        ],
        tools={"allow": ["write_file"], "external": [refund], "commands": ["test"]},
        run={"replan": False, "retries": 0},
    )


def on_branch(repo: Path, branch: str) -> list[str]:
    return git(repo, "log", "--format=%s", f"main..{branch}").splitlines()


def review(capsys: pytest.CaptureFixture[str], runs: Path, db: Path, *args: str) -> tuple[int, str]:
    code = main(["review", *args, "--runs", str(runs), "--db", str(db)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("found", ["happened", "not_happened"])
@pytest.mark.parametrize("failure", ["retryable_failure", "timeout"])
def test_a_verified_task_with_an_unknown_effect_is_held_until_a_person_resolves_it(
    failure: str,
    found: str,
    repo: Path,
    tmp_path: Path,
    tools: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run, db = tmp_path / "runs" / "r1", tmp_path / "review.sqlite"
    _rd, r = run_night(held_night(repo, TARGETS[failure]), run, model=refund_model())

    # Held: parked with the effect named first, its verify having passed; nothing landed.
    [effect] = r.effects
    assert effect["state"] == "unknown"
    assert r.plan.done == [] and r.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"
    [parked] = r.plan.parked
    assert parked.reason.startswith(f"`refund` (key {effect['key']}) has an unknown outcome: ")
    assert ("502 bad gateway" if failure == "retryable_failure" else "no answer") in parked.reason
    assert on_branch(repo, r.branch.name) == []
    assert list(tools.KEYS) == [effect["key"]]

    assert parked.held_for == [effect["key"]]
    # result.json says resumable: a resume continues it once the review queue is resolved.
    assert r.resumable and load_result(run)["resumable"] is True
    code, out = review(capsys, tmp_path / "runs", db, "--json")
    kinds = {i["id"]: i["kind"] for i in json.loads(out)}
    summaries = {i["id"]: i["summary"] for i in json.loads(out)}
    assert "refund_4471 wait(s) for are resolved" in summaries[f"run:{r.run_id}"]
    assert kinds[f"run:{r.run_id}"] == "run waits for review"
    assert kinds[f"parked:{r.run_id}:refund_4471"] == "held for an effect of unknown outcome"
    assert kinds[f"effect:{effect['key']}"] == "effect of unknown outcome"

    # Not before a person has said what became of the effect.
    with pytest.raises(ConfigError, match="not resumable until the review queue") as refused:
        resume_night(run, model=refund_model())
    assert "refund_4471" in refused.value.fix and "--happened" in refused.value.fix
    note = "the bank shows it" if found == "happened" else "nothing at the bank"
    code, out = review(
        capsys,
        tmp_path / "runs",
        db,
        "resolve",
        f"effect:{effect['key']}",
        "--note",
        note,
        f"--{found.replace('_', '-')}",
    )
    assert code == 0, out

    _rd, again = resume_night(run, model=refund_model())
    assert again.stop_reason == "GOAL_MET" and again.plan.done == ["refund_4471"]
    assert again.plan.parked == []
    assert len(on_branch(repo, r.branch.name)) == 1
    [row] = again.effects
    assert row["state"] == "confirmed"
    if found == "happened":
        assert list(tools.KEYS) == [effect["key"]]  # never made again: the ledger replayed it
        assert row["detail"] == {"resolved_in_review": "happened", "note": note}
    else:
        assert list(tools.KEYS) == [effect["key"]] * 2  # once more, the same key
        assert row["detail"] == {"id": "re_1"}
    code, out = review(capsys, tmp_path / "runs", db, "--json")
    assert [i for i in json.loads(out) if i["id"].startswith("effect:")] == []


def test_a_note_alone_or_a_second_verdict_does_not_resolve_an_effect(
    repo: Path, tmp_path: Path, tools: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    run, db = tmp_path / "runs" / "r1", tmp_path / "review.sqlite"
    _rd, r = run_night(held_night(repo, TARGETS["retryable_failure"]), run, model=refund_model())
    item = f"effect:{r.effects[0]['key']}"
    runs = tmp_path / "runs"
    code, out = review(capsys, runs, db, "resolve", item, "--note", "looked")
    assert code == 64 and "--happened or --not-happened" in out
    with pytest.raises(ConfigError, match="not resumable"):
        resume_night(run, model=refund_model())
    code, out = review(
        capsys, runs, db, "resolve", f"parked:{r.run_id}:refund_4471", "--note", "x", "--happened"
    )
    assert code == 64 and "not an effect" in out
    assert review(capsys, runs, db, "resolve", item, "--note", "seen", "--happened")[0] == 0
    code, out = review(capsys, runs, db, "resolve", item, "--note", "no", "--not-happened")
    assert code == 64 and "already resolved as happened" in out


def test_a_task_whose_mcp_server_died_mid_call_is_held_and_the_ticket_made_once(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server opens the ticket, then dies before answering: the call's outcome is
    unknown to the night, though it happened. Held; resolved as happened; the resume runs the
    task again, and its second ``create_ticket`` gets the recorded answer, not a second
    ticket."""
    record = tmp_path / "record"
    record.mkdir()
    entry = stdio_entry(record, ["create_ticket"])
    entry["command"].insert(-1, "--die-once")

    def model() -> FunctionModel:
        def answer(request: ModelRequest) -> dict[str, Any]:
            usage = usage_dict(input=900, output=60)
            if request.purpose != "execute":
                return text_answer("closing note", usage)
            step = sum(1 for m in request.messages if m["role"] == "assistant")
            if step == 0:
                return tool_answer("write_file", {"path": FIX, "content": "fixed\n"}, usage)
            if step == 1:
                return tool_answer("create_ticket", TICKET, usage)
            return text_answer("Fixed, and opened the ticket.", usage)

        return FunctionModel(answer)

    spec = make_spec(
        repo,
        predicate=f"test -f {FIX}",
        tasks=[{"id": "ticket", "brief": "fix it and open a ticket", "verify": f"test -f {FIX}"}],
        tools={"allow": ["write_file"], "mcp": [entry], "commands": ["test"]},
        run={"replan": False, "retries": 0},
        sandbox={"writable": [str(record)]},
    )
    run, db = tmp_path / "runs" / "r1", tmp_path / "review.sqlite"
    _rd, r = run_night(spec, run, model=model())
    [effect] = r.effects
    assert (effect["tool"], effect["state"]) == ("create_ticket", "unknown")
    assert r.plan.done == [] and on_branch(repo, r.branch.name) == []
    [parked] = r.plan.parked
    assert parked.reason.startswith(f"`create_ticket` (key {effect['key']}) has an unknown ")
    assert len(lines(record, "effects.jsonl")) == 1 and (record / "died").exists()
    code, out = review(capsys, tmp_path / "runs", db, "--json")
    assert f"effect:{effect['key']}" in {i["id"] for i in json.loads(out)}

    item = f"effect:{effect['key']}"
    code, out = review(
        capsys, tmp_path / "runs", db, "resolve", item, "--note", "ticket 1 exists", "--happened"
    )
    assert code == 0, out
    _rd, again = resume_night(run, model=model())
    assert again.stop_reason == "GOAL_MET" and again.plan.done == ["ticket"]
    assert len(on_branch(repo, r.branch.name)) == 1
    assert len(lines(record, "effects.jsonl")) == 1  # one ticket in all
    assert [c["tool"] for c in lines(record, "calls.jsonl")] == ["create_ticket"]


CLI_LIB = '''
"""The model and the refund tool of a night killed inside its refund call."""

import os
import time
from pathlib import Path

from overnight.testing import FunctionModel, text_answer, tool_answer


def refund(args, idempotency_key):
    """Refund an order. The first call hangs after reaching the provider (the night is
    killed there); later calls answer."""
    with open(os.environ["TOOL_LOG"], "a") as log:
        log.write(idempotency_key + "\\n")
    marker = Path(os.environ["HANG_MARKER"])
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        time.sleep(3600)
    return {"id": "re_1"}


def answer(request):
    if request.purpose != "execute":
        return text_answer("closing note")
    step = sum(1 for m in request.messages if m["role"] == "assistant")
    if step == 0:
        return tool_answer("write_file", {"path": "fixed.txt", "content": "fixed\\n"})
    if step == 1:
        return tool_answer("refund", {"order_id": "4471"})
    return text_answer("Fixed, and refunded.")


model = FunctionModel(answer)
'''


@pytest.mark.parametrize("found", ["happened", "not_happened"])
def test_kill_9_between_intent_and_answer_then_resume_holds_the_task(
    found: str, repo: Path, tmp_path: Path
) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "held_cli.py").write_text(CLI_LIB)
    data = spec_data(
        repo,
        predicate=f"test -f {FIX}",
        tasks=[
            {"id": "refund_4471", "brief": "fix it and refund 4471", "verify": f"test -f {FIX}"}
        ],
        tools={
            "allow": ["write_file"],
            "commands": ["test"],
            "external": [
                {
                    "name": "refund",
                    "target": "held_cli:refund",
                    "mutating": True,
                    "task_key": "{order_id}:refund",
                    "input_schema": {
                        "type": "object",
                        "properties": {"order_id": {"type": "string"}},
                        "required": ["order_id"],
                    },
                }
            ],
        },
        run={"replan": False, "retries": 0},
    )
    data["model"]["target"] = "held_cli:model"
    spec = write_spec(tmp_path / "night.toml", data)
    run, db = tmp_path / "run", tmp_path / "review.sqlite"
    tool_log, marker = tmp_path / "tool.log", tmp_path / "hung"
    env, mark = marked_env(lib)
    env |= {"TOOL_LOG": str(tool_log), "HANG_MARKER": str(marker)}

    def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            overnight(*args), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180
        )

    try:
        proc = start_cli(overnight("run", spec, "--run-dir", run, "--quiet"), env, tmp_path)
        try:
            wait_for(marker.exists, 60, "the refund call to reach the provider")
            [row] = effect_rows(run / "effects.sqlite")
            assert row.state == "intended"  # written down before the call
        finally:
            kill_everything(proc, mark)  # SIGKILL: no answer recorded, the task in flight
        assert not (run / "result.json").exists()

        resumed = cli("resume", run, "--quiet")
        assert resumed.returncode == 3, resumed.stderr
        r = load_result(run)
        [effect] = r["effects"]
        assert (effect["key"], effect["state"]) == (row.step_key, "unknown")
        [parked] = r["plan"]["parked"]
        assert parked["reason"].startswith(
            f"`refund` (key {row.step_key}) has an unknown outcome: no answer was recorded"
        )
        assert r["plan"]["done"] == [] and on_branch(repo, r["branch"]["name"]) == []
        listed = cli("review", "--runs", run, "--db", db, "--json")
        ids = {i["id"] for i in json.loads(listed.stdout)}
        assert {f"parked:{r['run_id']}:refund_4471", f"effect:{row.step_key}"} <= ids

        flag = f"--{found.replace('_', '-')}"
        done = cli(
            "review",
            "resolve",
            f"effect:{row.step_key}",
            "--note",
            "checked",
            flag,
            "--runs",
            run,
            "--db",
            db,
        )
        assert done.returncode == 0, done.stderr
        again = cli("resume", run, "--quiet")
        assert again.returncode == 0, again.stderr
    finally:
        kill_marked(mark)
    r = load_result(run)
    assert r["stop_reason"] == "GOAL_MET" and r["plan"]["done"] == ["refund_4471"]
    assert len(on_branch(repo, r["branch"]["name"])) == 1
    keys = tool_log.read_text().splitlines()
    assert keys == [row.step_key] * (1 if found == "happened" else 2)
    assert [e["state"] for e in r["effects"]] == ["confirmed"]


def test_a_held_task_is_released_only_when_every_effect_it_waits_for_is_settled(
    tmp_path: Path,
) -> None:
    def task(n: int) -> Task:
        return Task(id=f"t{n}", title=f"t{n}", brief="b", verify="true")

    state = RunState(
        run_id="r",
        goal_text="g",
        goal_sha="0" * 64,
        branch="overnight/r",
        base_commit="b" * 40,
        queue=[task(0), task(1), task(2)],
    )
    store = RunStateStore(tmp_path / "checkpoint.json")
    store.save(state)
    for n, keys in ((0, ["k1", "k2"]), (1, ["k3"])):
        state.start_task(state.start_lap())
        state.hold(task(n), "held", "", None, keys)
    state.start_task(state.start_lap())
    state.finish_parked(task(2), "not done", "", None)  # parked for another reason
    store.save(state)
    assert state.no_progress_streak == 3

    assert state.release_held({"k1", "k3"}) == [task(1)]  # t0 still waits for k2
    assert [t.id for t in state.queue] == ["t1"] and state.no_progress_streak == 0
    assert [p.task.id for p in state.parked] == ["t0", "t2"]
    assert state.release_held({"k1", "k2", "k9"}) == [task(0)]
    assert state.release_held({"k1", "k2", "k3"}) == []  # nothing else is held
    store.save(state)  # a change the delta cannot follow item by item: written whole
    loaded = load_run_state(tmp_path / "checkpoint.json")
    assert loaded is not None
    assert [t.id for t in loaded.queue] == ["t0", "t1"]
    assert [(p.task.id, p.held_for) for p in loaded.parked] == [("t2", [])]


def test_an_effect_is_not_resolved_while_its_run_is_being_driven(
    repo: Path, tmp_path: Path, tools: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    run, db = tmp_path / "runs" / "r1", tmp_path / "review.sqlite"
    _rd, r = run_night(held_night(repo, TARGETS["retryable_failure"]), run, model=refund_model())
    item = f"effect:{r.effects[0]['key']}"
    lock = RunLock(RunDir(run))  # what a resumed night holds while it may be in the call
    lock.acquire()
    try:
        code, out = review(
            capsys, tmp_path / "runs", db, "resolve", item, "--note", "n", "--not-happened"
        )
    finally:
        lock.release()
    assert code == 64 and "being driven by another process" in out
    assert [row.state for row in effect_rows(run / "effects.sqlite")] == ["unknown"]
