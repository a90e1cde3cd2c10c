"""External tools check their arguments against ``input_schema`` (a real JSON Schema
validator) before the effects ledger sees them: one order is one refund, however the model
spells its id."""

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


def refund(args, idempotency_key):
    """Refund an order in full."""
    with open(os.environ["REFUNDS_FILE"], "a") as fh:
        fh.write(repr(args["order_id"]) + "\\n")
    return {"id": "re_" + str(args["order_id"])}
'''


def external(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": "refund",
            "target": "schema_tools:refund",
            "mutating": True,
            "task_key": "{order_id}:refund",
            "input_schema": schema,
        }
    ]


@pytest.fixture
def refunds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "schema_tools.py").write_text(TOOLS)
    monkeypatch.syspath_prepend(str(lib))
    sys.modules.pop("schema_tools", None)
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    monkeypatch.setenv("REFUNDS_FILE", str(ledger / "refunds.txt"))
    return ledger / "refunds.txt"


def spelling_model(ids: list[Any], seen: list[str]) -> FunctionModel:
    """Calls refund once per spelling in ``ids``, then stops; keeps the tool results."""

    def answer(request: ModelRequest) -> dict[str, Any]:
        if request.purpose == "summarize":
            return text_answer("closing note")
        last = request.messages[-1]
        if isinstance(last["content"], list):
            seen.extend(str(b) for b in last["content"] if b.get("type") == "tool_result")
        step = sum(1 for m in request.messages if m["role"] == "assistant")
        usage = usage_dict(input=900, output=60)
        if step < len(ids):
            return tool_answer("refund", {"order_id": ids[step]}, usage)
        return text_answer("done", usage)

    return FunctionModel(answer)


def night(repo: Path, refunds: Path, schema: dict[str, Any]) -> Any:
    return make_spec(
        repo,
        predicate="false",
        tasks=[{"id": "refund", "brief": "refund order 4471", "verify": "true"}],
        tools={"allow": [], "external": external(schema)},
        run={"replan": False, "retries": 0},
        agent={"max_calls": 10},
        sandbox={"readable": [str(refunds.parent)]},
    )


STRICT = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "pattern": "^[0-9]+$"}},
    "required": ["order_id"],
    "additionalProperties": False,
}


def test_spellings_the_schema_refuses_never_reach_the_ledger(
    repo: Path, tmp_path: Path, refunds: Path
) -> None:
    seen: list[str] = []
    model = spelling_model(["4471", 4471.0, " 4471", 4471, "4471"], seen)
    _rd, r = run_night(night(repo, refunds, STRICT), tmp_path / "run", model=model)
    assert refunds.read_text().splitlines() == ["'4471'"]  # one refund
    refused = [s for s in seen if "invalid arguments for refund" in s]
    assert len(refused) == 3  # 4471.0, " 4471", 4471
    assert sum("must be a string" in s for s in refused) == 2
    assert any("' 4471' does not match '^[0-9]+$'" in s for s in refused)
    # Only the valid calls reach the ledger: the first is the refund, the repeat is refused.
    assert [e["state"] for e in r.effects] == ["confirmed", "refused"]


def test_an_integer_and_its_float_spelling_are_one_effect(
    repo: Path, tmp_path: Path, refunds: Path
) -> None:
    # JSON Schema's integer accepts 4471.0: it must name the same task key as 4471.
    schema = {
        "type": "object",
        "properties": {"order_id": {"type": "integer", "minimum": 1}},
        "required": ["order_id"],
    }
    seen: list[str] = []
    model = spelling_model([4471, 4471.0, 0], seen)
    _rd, r = run_night(night(repo, refunds, schema), tmp_path / "run", model=model)
    assert refunds.read_text().splitlines() == ["4471"]
    assert any("invalid arguments for refund" in s and "at least 1" in s for s in seen)
    assert [e["state"] for e in r.effects] == ["confirmed", "refused"]  # 4471.0: the same key


def test_an_input_schema_that_is_not_json_schema_is_a_spec_error(repo: Path, refunds: Path) -> None:
    from overnight.core.errors import ConfigError

    with pytest.raises(ConfigError, match="not a valid JSON Schema"):
        night(repo, refunds, {"type": "object", "properties": {"order_id": {"type": "strng"}}})
