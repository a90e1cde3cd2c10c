"""External tools through the CLI, as a real process: a tool that hangs cannot hold the night
past a SIGTERM or past its own timeout, and a tool that calls ``sys.exit(0)`` cannot end the
process with exit 0 and no result.json. The tools and the scripted model are modules beside
the spec, resolved by ``target = "module:attr"`` like a user's own."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.kills import (
    kill_group,
    kill_marked,
    marked_env,
    overnight,
    run_cli,
    start_cli,
    wait_for,
)
from tests.helpers.nights import load_result, make_repo, spec_data, write_spec

MODEL = """
import os

from overnight.testing import FunctionModel, text_answer, tool_answer

TOOL = os.environ["NIGHT_TOOL"]


def answer(request):
    if request.purpose != "execute":
        return text_answer("closing note")
    last = request.messages[-1]["content"]
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return text_answer("that is all I can do")
    return tool_answer(TOOL, {"order_id": "4471"})


model = FunctionModel(answer)
"""

TOOLS = '''
import os
import sys
import time


def _note(what):
    with open(os.environ["TOOL_CALLS"], "a") as fh:
        fh.write(what + "\\n")


def hang(args, idempotency_key):
    """Refund an order (and never answer)."""
    _note("hang")
    time.sleep(600)
    return {"id": "re_late"}


def leave(args, idempotency_key):
    """Look an order up (and end the process)."""
    _note("leave")
    sys.exit(0)
'''

SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
}


def night(tmp_path: Path, tool: dict[str, Any]) -> Path:
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "night_model.py").write_text(MODEL)
    (tmp_path / "night_tools.py").write_text(TOOLS)
    data = spec_data(
        repo,
        tasks=[
            {"id": "refund_4471", "brief": "refund order 4471", "verify": "false", "retries": 0}
        ],
        sandbox={"mode": "off"},
        run={"replan": False},
        agent={"max_calls": 3, "cache": "off"},
    )
    data["model"]["target"] = "night_model:model"
    data["tools"]["external"] = [{"input_schema": SCHEMA, **tool}]
    return write_spec(tmp_path / "night.toml", data)


@pytest.fixture
def env(tmp_path: Path) -> Any:
    environ, mark = marked_env()
    environ["TOOL_CALLS"] = str(tmp_path / "tool-calls")
    try:
        yield environ
    finally:
        kill_marked(mark)


def calls(env: dict[str, str]) -> list[str]:
    path = Path(env["TOOL_CALLS"])
    return path.read_text().splitlines() if path.exists() else []


HANG = {
    "name": "hang",
    "target": "night_tools:hang",
    "mutating": True,
    "task_key": "{order_id}:refund",
    "timeout_s": 300,
}


def test_sigterm_ends_the_night_while_a_tool_hangs_and_resume_parks_the_task(
    tmp_path: Path, env: dict[str, str]
) -> None:
    spec = night(tmp_path, HANG)
    env["NIGHT_TOOL"] = "hang"
    run = tmp_path / "RUN"
    proc = start_cli(overnight("run", spec, "--run-dir", run, "--quiet"), env, tmp_path)
    try:
        wait_for(lambda: calls(env) == ["hang"] or proc.poll() is not None, 60, "the tool")
        assert proc.poll() is None, "the night ended before its tool was called"
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.returncode is None:
            kill_group(proc)

    assert code == 2
    assert took < 10, f"the stop took {took:.1f} s while the tool slept for 600"
    result = load_result(run)
    assert result["stop_reason"] == "TIME_LIMIT:sigterm" and result["resumable"] is True
    assert result["plan"]["in_progress"] == "refund_4471"
    [effect] = result["effects"]
    assert effect["state"] == "unknown" and "sigterm" in effect["error"]

    # The effect may have happened: the resume verifies the task and parks it for a person.
    code = run_cli(overnight("resume", run, "--quiet"), env, tmp_path, timeout=60)

    assert code == 3
    result = load_result(run)
    [parked] = result["plan"]["parked"]
    assert parked["id"] == "refund_4471" and "unknown outcome" in parked["reason"]
    assert calls(env) == ["hang"], "a call of unknown outcome was made again"


def test_a_tool_past_its_timeout_is_left_behind_and_the_night_goes_on(
    tmp_path: Path, env: dict[str, str]
) -> None:
    spec = night(tmp_path, {**HANG, "timeout_s": 1})
    env["NIGHT_TOOL"] = "hang"
    run = tmp_path / "RUN"
    start = time.monotonic()

    code = run_cli(overnight("run", spec, "--run-dir", run, "--quiet"), env, tmp_path, timeout=120)

    took = time.monotonic() - start
    assert code == 3  # the queue ran out with the goal unmet
    assert took < 60, f"the night took {took:.0f} s; its tool was given up on after 1 s"
    result = load_result(run)
    [parked] = result["plan"]["parked"]
    [effect] = result["effects"]
    assert parked["reason"].startswith(f"`hang` (key {effect['key']}) has an unknown outcome: ")
    assert effect["state"] == "unknown" and "no answer within 1 s" in effect["error"]
    assert calls(env) == ["hang"]


@pytest.mark.parametrize("mutating", [False, True], ids=["read_only", "mutating"])
def test_a_tool_calling_sys_exit_is_a_failed_call_not_the_end_of_the_process(
    tmp_path: Path, env: dict[str, str], mutating: bool
) -> None:
    tool: dict[str, Any] = {"name": "leave", "target": "night_tools:leave", "mutating": mutating}
    if mutating:
        tool["task_key"] = "{order_id}:lookup"
    spec = night(tmp_path, tool)
    env["NIGHT_TOOL"] = "leave"
    run = tmp_path / "RUN"

    code = run_cli(overnight("run", spec, "--run-dir", run, "--quiet"), env, tmp_path)

    assert code == 3, "the night must end by its own verdict, not by the tool's exit"
    result = load_result(run)
    assert result["stop_reason"] == "QUEUE_EMPTY_GOAL_UNMET"
    assert calls(env) == ["leave"]
    trace = [json.loads(x) for x in (run / "trace.jsonl").read_text().splitlines()]
    said = [r for r in trace if r.get("kind") == "tool_call" and r.get("tool") == "leave"]
    assert [r["error"] for r in said] == [True]
    if mutating:
        assert [e["state"] for e in result["effects"]] == ["unknown"]
