"""Run-step keys across executions of one task: a retried execution that repeats a confirmed
call gets the recorded answer; one that skips it (it was told the call is done) must still
be able to make the calls that are left."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from overnight.messages.types import ModelRequest
from overnight.testing import FunctionModel, text_answer, tool_answer, usage_dict
from tests.helpers.nights import make_spec, run_night

TOOLS = '''
import os
from pathlib import Path

CALLS = []


def refund(args, idempotency_key):
    """Refund an order in full."""
    CALLS.append((args["order_id"], idempotency_key))
    with open(os.environ["REFUNDS_FILE"], "a") as fh:
        fh.write(args["order_id"] + "\\n")
    return {"id": "re_" + args["order_id"], "order_id": args["order_id"]}
'''

EXTERNAL = [
    {
        "name": "refund",
        "target": "step_tools:refund",
        "mutating": True,
        "task_key": "{order_id}:refund",
        "input_schema": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    }
]


@pytest.fixture
def tools_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "step_tools.py").write_text(TOOLS)
    monkeypatch.syspath_prepend(str(lib))
    (tmp_path / "ledger").mkdir()
    monkeypatch.setenv("REFUNDS_FILE", str(tmp_path / "ledger" / "refunds.txt"))
    sys.modules.pop("step_tools", None)
    import step_tools

    return step_tools


def two_refunds_model(*, heeds: bool) -> FunctionModel:
    """Refunds 4471 and stops (an early stop); asked again, it refunds what is left: only
    4472 when it heeds the "already done" note, both again when it does not."""

    def answer(request: ModelRequest) -> dict[str, Any]:
        if request.purpose == "summarize":
            return text_answer("closing note")
        first = request.messages[0]["content"]
        first = first if isinstance(first, str) else str(first)
        retried = "Already done in an earlier attempt" in first
        todo = ["4471", "4472"] if retried else ["4471"]
        if retried and heeds:
            todo = [o for o in todo if f"order_id={o}" not in first]
        step = sum(1 for m in request.messages if m["role"] == "assistant")
        usage = usage_dict(input=900, output=60)
        if step < len(todo):
            return tool_answer("refund", {"order_id": todo[step]}, usage)
        return text_answer("Refunds requested.", usage)

    return FunctionModel(answer)


def night(repo: Path, tmp_path: Path) -> Any:
    refunds = tmp_path / "ledger" / "refunds.txt"
    check = f"grep -qx 4471 {refunds} && grep -qx 4472 {refunds}"
    return make_spec(
        repo,
        predicate=check,
        tasks=[{"id": "refund_both", "brief": "refund 4471 and 4472", "verify": check}],
        tools={"allow": [], "external": EXTERNAL},
        run={"replan": False, "retries": 1},
        # the check reads what the tool wrote outside the worktree: a sandboxed verify sees
        # only what the spec lets it read
        sandbox={"readable": [str(refunds.parent)]},
    )


def test_a_retry_that_repeats_a_confirmed_call_gets_the_recorded_answer(
    repo: Path, tmp_path: Path, tools_module: Any
) -> None:
    _rd, r = run_night(
        night(repo, tmp_path), tmp_path / "run", model=two_refunds_model(heeds=False)
    )
    assert r.stop_reason == "GOAL_MET"
    assert [order for order, _key in tools_module.CALLS] == ["4471", "4472"]  # 4471 once
    assert [(e["args"]["order_id"], e["state"]) for e in r.effects] == [
        ("4471", "confirmed"),
        ("4472", "confirmed"),
    ]


def test_a_retry_that_skips_a_confirmed_call_can_make_the_next_one(
    repo: Path, tmp_path: Path, tools_module: Any
) -> None:
    _rd, r = run_night(night(repo, tmp_path), tmp_path / "run", model=two_refunds_model(heeds=True))
    assert [order for order, _key in tools_module.CALLS] == ["4471", "4472"]
    assert r.stop_reason == "GOAL_MET"
