"""The model seam: what a fake (or any callable) may return, and how it is read and priced."""

import json
from pathlib import Path
from typing import Any

import pytest

from overnight.core.budget import Price, Usage
from overnight.core.errors import ConfigError, InvalidModelOutput, ModelCallFailed
from overnight.messages.answers import PlanAnswer
from overnight.messages.types import (
    ModelRequest,
    ModelResponse,
    TextBlock,
    coerce_response,
    estimate_input_tokens,
    usage_from_anthropic,
)
from overnight.models.seam import CallableModel, python_model
from overnight.models.structured import parse_answer
from overnight.seams import ModelClient
from overnight.testing import ScriptedModel, text_answer, tool_answer
from tests.helpers.nights import command_task, make_spec, run_night

OPUS = Price(5.0, 25.0, 0.5, 6.25, 10.0)


def anthropic_message(**usage: Any) -> dict[str, Any]:
    return {
        "id": "msg_x",
        "type": "message",
        "role": "assistant",
        "model": "fake-opus",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
        ],
        "stop_reason": "tool_use",
        "usage": usage,
    }


def test_dict_response_is_read_like_the_messages_api() -> None:
    raw = anthropic_message(
        input_tokens=500,
        output_tokens=40,
        cache_read_input_tokens=20_000,
        cache_creation_input_tokens=3_500,
        cache_creation={"ephemeral_5m_input_tokens": 3_000, "ephemeral_1h_input_tokens": 500},
    )
    r = coerce_response(raw)
    assert r.text() == "Looking."
    assert [(u.name, u.input) for u in r.tool_uses()] == [("read_file", {"path": "a"})]
    assert r.stop_reason == "tool_use"
    assert r.usage == Usage(
        input=500, output=40, cache_read=20_000, cache_write_5m=3_000, cache_write_1h=500
    )
    # 1-hour writes are priced apart from 5-minute ones
    expected = (500 * 5 + 40 * 25 + 20_000 * 0.5 + 3_000 * 6.25 + 500 * 10.0) / 1e6
    assert r.usage.cost(OPUS) == pytest.approx(expected)


def test_older_usage_shape_and_missing_cache_fields() -> None:
    assert usage_from_anthropic(
        {"input_tokens": 18, "output_tokens": 100, "cache_creation_input_tokens": 2055}
    ) == Usage(input=18, output=100, cache_write_5m=2055)
    assert usage_from_anthropic({"input_tokens": 3, "output_tokens": 1}) == Usage(3, 1)
    assert usage_from_anthropic(None) == Usage()
    assert (
        usage_from_anthropic({"input_tokens": 1, "cache_read_input_tokens": None}).cache_read == 0
    )


@pytest.mark.parametrize(
    "bad",
    [
        None,
        3,
        "text",
        ["list"],
        {"content": "nope"},
        {"content": [], "usage": {"input_tokens": -1}},
    ],
)
def test_malformed_returns_are_a_clear_model_failure(bad: object) -> None:
    with pytest.raises(ModelCallFailed):
        coerce_response(bad)


def test_response_objects_pass_through() -> None:
    r = ModelResponse(content=[TextBlock(text="hi")], usage=Usage(input=1, output=2))
    assert coerce_response(r) is r


def test_structured_answer_from_tool_use_or_text() -> None:
    plan = {
        "reasoning": "r",
        "tasks": [{"id": "t_1", "title": "x", "brief": "do", "verify": "true"}],
    }
    a = parse_answer(
        coerce_response(tool_answer("submit_plan", plan)), PlanAnswer, "submit_plan", "plan"
    )
    b = parse_answer(
        coerce_response(text_answer("Here:\n```json\n" + json.dumps(plan) + "\n```")),
        PlanAnswer,
        "submit_plan",
        "plan",
    )
    assert a == b and a.tasks[0].id == "t_1"


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        (text_answer("no json here"), "no JSON object"),
        (tool_answer("submit_plan", {"reasoning": "r", "tasks": []}), "tasks"),
        (
            tool_answer(
                "submit_plan",
                {
                    "reasoning": "r",
                    "tasks": [{"id": "bad id!", "title": "", "brief": "b", "verify": "v"}],
                },
            ),
            "tasks.0.id",
        ),
        (text_answer('{"reasoning": "r"}'), "tasks"),
    ],
)
def test_invalid_structured_answers_name_the_problem(answer: dict[str, Any], needle: str) -> None:
    with pytest.raises(InvalidModelOutput) as info:
        parse_answer(coerce_response(answer), PlanAnswer, "submit_plan", "plan")
    assert needle in str(info.value)


def test_input_estimate_is_an_upper_bound_on_bytes() -> None:
    req = ModelRequest(
        model="m",
        purpose="plan",
        system="é" * 10,
        messages=[{"role": "user", "content": "x" * 100}],
        max_tokens=5,
    )
    assert estimate_input_tokens(req) >= 20 + 100


def test_python_provider_resolves_callables_and_clients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mymodels.py").write_text(
        "from overnight.testing import ScriptedModel\n"
        "client = ScriptedModel()\n"
        "def fn(request):\n    return {'content': [{'type': 'text', 'text': request.purpose}]}\n"
        "not_callable = 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert isinstance(python_model("mymodels:client"), ModelClient)
    wrapped = python_model("mymodels:fn")
    assert isinstance(wrapped, CallableModel)
    req = ModelRequest(model="m", purpose="drift", system="", messages=[], max_tokens=1)
    assert coerce_response(wrapped.complete(req)).text() == "drift"
    for target, needle in [
        ("mymodels:not_callable", "neither"),
        ("mymodels:absent", "no attribute"),
        ("mymodels", "module:attr"),
        ("absent_mod_q:x", "cannot import"),
    ]:
        with pytest.raises(ConfigError) as info:
            python_model(target)
        assert info.value.field == "model.target" and needle in str(info.value)


def test_model_that_raises_mid_night_is_classified_and_money_released(
    repo: Path, tmp_path: Path
) -> None:
    def explode(_request: ModelRequest) -> dict[str, Any]:
        raise ConnectionError("provider went away")

    tasks = [command_task(f"t_{i}", "true", "true") for i in range(2)]
    spec = make_spec(repo, tasks=tasks, run={"drift_every": 1})
    _rd, r = run_night(spec, tmp_path / "run", model=ScriptedModel(drift=explode))
    assert r.stop_reason == "UNRECOVERABLE_ERROR:model_error"
    assert r.exit_code == 4 and r.resumable is True
    assert "provider went away" in r.message
    # the refused/failed call was released, not billed at its worst case
    assert r.budgets.cost_usd.at_stop == 0.0
    assert r.budgets.cost_usd.used == r.wrapup.cost_usd  # only the closing summary


def test_plan_call_seeds_the_queue(repo: Path, tmp_path: Path) -> None:
    from overnight.testing import ScriptedExecutor
    from overnight.testing.fakes import write_file

    plan = {
        "reasoning": "two steps",
        "tasks": [
            {
                "id": "p_1",
                "title": "one",
                "brief": "write one",
                "verify": "test -f one.txt",
                "value": 2,
            },
            {
                "id": "p_2",
                "title": "two",
                "brief": "write two",
                "verify": "test -f two.txt",
                "value": 1,
            },
        ],
    }
    model = ScriptedModel(plan=plan)
    executor = ScriptedExecutor(
        {"p_1": [write_file("one.txt", "1")], "p_2": [write_file("two.txt", "2")]}
    )
    spec = make_spec(
        repo,
        tasks=[],
        predicate="test -f one.txt -a -f two.txt",
        executor={"target": "unused:unused"},
    )
    _, r = run_night(spec, tmp_path / "run", model=model, executor=executor)
    assert r.stop_reason == "GOAL_MET"
    assert [v.id for v in r.verified] == ["p_1", "p_2"]
    assert model.purposes()[0] == "plan"
    assert executor.executed == [("p_1", 1), ("p_2", 1)]
