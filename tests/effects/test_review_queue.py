"""The review queue: what a person must look at, and resolutions that are recorded, not
deleted."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from overnight.cli.main import main
from overnight.messages.types import ModelRequest
from overnight.testing import FunctionModel, text_answer, tool_answer, usage_dict
from tests.helpers.nights import make_spec, run_night

TOOLS = '''
from overnight.effects import ToolFailure

CALLS = []


def flaky_refund(args, idempotency_key):
    """Refund an order (the provider times out)."""
    CALLS.append((dict(args), idempotency_key))
    raise ToolFailure("timed out after 30 s", retryable=True)
'''


def agent_model() -> FunctionModel:
    def answer(request: ModelRequest) -> dict[str, Any]:
        if request.purpose == "summarize":
            return text_answer("closing note")
        turns = sum(1 for m in request.messages if m["role"] == "assistant")
        if turns == 0:
            return tool_answer(
                "refund",
                {"order_id": "4471", "amount_cents": 2400},
                usage_dict(input=900, output=80),
            )
        return text_answer("The refund timed out; stopping.", usage_dict(input=1200, output=40))

    return FunctionModel(answer)


@pytest.fixture
def tools_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    (tmp_path / "review_tools.py").write_text(TOOLS)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("review_tools", None)
    import review_tools

    return review_tools


def test_unknown_effect_parks_the_task_and_lands_in_the_queue(
    repo: Path, tmp_path: Path, tools_module: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    external = [
        {
            "name": "refund",
            "target": "review_tools:flaky_refund",
            "mutating": True,
            "task_key": "{order_id}:refund",
            "input_schema": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "amount_cents": {"type": "integer"}},
            },
        }
    ]
    spec = make_spec(
        repo,
        predicate="false",
        tasks=[{"id": "refund_4471", "brief": "refund it", "verify": "false"}],
        tools={"allow": ["read_file"], "external": external},
        run={"replan": False},
    )
    _rd, r = run_night(spec, tmp_path / "runs" / "r1", model=agent_model())
    assert len(tools_module.CALLS) == 1  # no retry of an effect that may have happened
    [effect] = r.effects
    assert effect["state"] == "unknown" and effect["task_key"] == "4471:refund"
    assert tools_module.CALLS[0][1] == effect["key"]  # the provider got the run-step key
    [parked] = r.plan.parked
    assert "unknown outcome" in parked.reason

    db = tmp_path / "review.sqlite"
    runs = str(tmp_path / "runs")
    assert main(["review", "--runs", runs, "--db", str(db), "--json"]) == 0
    items = {i["id"]: i for i in json.loads(capsys.readouterr().out)}
    effect_id = f"effect:{effect['key']}"
    assert set(items) == {f"run:{r.run_id}", f"parked:{r.run_id}:refund_4471", effect_id}
    assert "4471" in items[effect_id]["summary"]

    resolve = ["review", "resolve", effect_id, "--note", "checked: no refund at the bank"]
    where = ["--runs", runs, "--db", str(db)]
    assert main([*resolve, *where]) == 64  # a note alone does not say what became of it
    assert "--happened or --not-happened" in capsys.readouterr().err
    assert main([*resolve, "--not-happened", *where]) == 0
    capsys.readouterr()
    assert main(["review", "--runs", runs, "--db", str(db), "--json"]) == 0
    assert effect_id not in {i["id"] for i in json.loads(capsys.readouterr().out)}
    assert main(["review", "--all", "--runs", runs, "--db", str(db), "--json"]) == 0
    everything = {i["id"]: i for i in json.loads(capsys.readouterr().out)}
    assert everything[effect_id]["resolved"] == "not_happened: checked: no refund at the bank"
    assert (
        main(["review", "resolve", "effect:nope", "--note", "x", "--runs", runs, "--db", str(db)])
        == 64
    )
    assert main(["review", "resolve", effect_id, "--runs", runs, "--db", str(db)]) == 64
