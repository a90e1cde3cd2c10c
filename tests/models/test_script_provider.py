"""The ``script`` provider: its file checked when the spec is loaded (a bad one names the file,
the turn and the field, exit 64, nothing written), its answers given in order per purpose and
billed like a provider's, and what it answers once a purpose's turns run out. Also the docs'
example of a ``python`` model (guides/models.md), asked as the harness asks it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overnight.config.model_script import Script, parse_script
from overnight.config.spec import check_model_settings, load_spec
from overnight.core.drift import DriftVerdict
from overnight.core.errors import ConfigError
from overnight.messages.answers import DRIFT_TOOL, PLAN_TOOL, REPLAN_TOOL, PlanAnswer, ReplanAnswer
from overnight.messages.types import ModelRequest, coerce_response, estimate_input_tokens
from overnight.models.providers import build_client
from overnight.models.script_provider import ScriptModel
from overnight.models.structured import parse_answer
from overnight.night.harness_requests import (
    drift_request,
    plan_request,
    replan_request,
    summary_request,
)
from tests.helpers.nights import spec_data, write_spec
from tests.helpers.project import (
    GOAL,
    SCRIPTED_PAGE,
    branches,
    calc_repo,
    doc_block,
    home,
    overnight,
)
from tests.helpers.toml import dumps

PLAN = {
    "reasoning": "one task",
    "tasks": [{"id": "fix", "title": "fix it", "brief": "fix add()", "verify": "true"}],
}


def script_spec(tmp_path: Path, script: str, text: str, **extra: Any) -> Path:
    repo = tmp_path / "repo"
    if not repo.exists():
        calc_repo(repo)
    (tmp_path / script).write_text(text)
    data = spec_data(repo, **extra)
    data["model"] = {"provider": "script", "script": script, "name": "scripted"}
    data["prices"] = {"scripted": {"input": 0.0, "output": 0.0}}
    data["tools"] = {"allow": ["read_file", "edit_file", "run_command"], "commands": ["true"]}
    return write_spec(tmp_path / "night.toml", data)


def load_error(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_spec(path)
    assert caught.value.field == "model.script"
    return str(caught.value)


BAD_SECOND_TURN = """
[[plan]]
tool = "submit_plan"
[plan.input]
reasoning = "one task"
tasks = [{ id = "fix", title = "t", brief = "b", verify = "true" }]

[[execute]]
tool = "read_file"
input = { path = "calc/ops.py" }

[[execute]]
tool = "edit_file"
input = "calc/ops.py"
"""


def test_a_bad_script_file_exits_64_naming_the_file_the_turn_and_the_field(
    tmp_path: Path,
) -> None:
    spec = script_spec(tmp_path, "turns.toml", BAD_SECOND_TURN)
    for command in ("run", "check"):
        done = overnight(command, str(spec))
        assert done.returncode == 64, done.stdout + done.stderr
        said = done.stdout + done.stderr
        assert f"{tmp_path / 'turns.toml'}: [[execute]] turn 2, `input`" in said
        assert "valid dictionary" in said
        assert not home().exists()
        assert branches(tmp_path / "repo") == ["main"]


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (
            {
                "plan": [
                    {"tool": "submit_plan", "input": {"reasoning": "r", "tasks": [{"id": "a"}]}}
                ]
            },
            "[[plan]] turn 1, `input.tasks[0].title`: Field required",
        ),
        (
            {"plan": [{"calls": [{"name": "submit_plan", "input": PLAN}, {"input": {}}]}]},
            "[[plan]] turn 1, `calls[1].name`: Field required",
        ),
        (
            {"plan": [{"tool": "read_file", "input": {}}]},
            "[[plan]] turn 1, `tool`: a plan answer is a `submit_plan` call",
        ),
        (
            {"drift": [{"tool": "submit_drift_verdict", "input": {"reasoning": "r"}}]},
            "[[drift]] turn 1, `input.off_goal_task_ids`: Field required",
        ),
        ({"exeucte": []}, "`exeucte` is not a purpose (did you mean `execute`?)"),
        ({"execute": [{}]}, "[[execute]] turn 1: a turn answers with `text`, a `tool` call"),
        (
            {"execute": [{"text": "x"}, {"tool": "read_file", "calls": [{"name": "x"}]}]},
            "[[execute]] turn 2: give `tool` (with `input`) or `calls`, not both",
        ),
        ({"execute": [{"text": "x", "usage": {"inptu": 3}}]}, "turn 1, `usage.inptu`: unknown"),
        ({"execute": [{"text": "x", "usage": {"output": -1}}]}, "turn 1, `usage.output`"),
        ({"execute": {"text": "x"}}, "`execute`: Input should be a valid list"),
    ],
)
def test_each_problem_names_its_turn_and_field(data: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_script(data, "turns.json")
    assert str(caught.value).startswith("model.script: turns.json: ")
    assert said in str(caught.value)


def test_a_json_script_is_checked_the_same_way(tmp_path: Path) -> None:
    bad = {"plan": [{"tool": "submit_plan", "input": {"reasoning": "r", "tasks": []}}]}
    said = load_error(script_spec(tmp_path, "turns.json", json.dumps(bad)))
    assert "turns.json: [[plan]] turn 1, `input.tasks`" in said
    assert "at least 1 item" in said
    good = script_spec(
        tmp_path, "turns.json", json.dumps({"plan": [{"tool": "submit_plan", "input": PLAN}]})
    )
    model = load_spec(good).model
    assert model is not None and len(model.scripted_turns().plan) == 1


def test_the_file_and_what_it_calls_are_checked_against_the_spec(tmp_path: Path) -> None:
    missing = script_spec(tmp_path, "turns.toml", "")
    (tmp_path / "turns.toml").unlink()
    assert f"the script file {tmp_path / 'turns.toml'} does not exist" in load_error(missing)
    assert "is not valid TOML" in load_error(script_spec(tmp_path, "turns.toml", "[[plan]\n"))
    no_plan = load_error(script_spec(tmp_path, "turns.toml", '[[execute]]\ntext = "done"\n'))
    assert "the script has no [[plan]] turn" in no_plan
    not_allowed = """
[[plan]]
tool = "submit_plan"
input = { reasoning = "r", tasks = [{ id = "a", title = "t", brief = "b", verify = "true" }] }
[[execute]]
tool = "write_file"
input = { path = "x", content = "y" }
"""
    said = load_error(script_spec(tmp_path, "turns.toml", not_allowed))
    assert "[[execute]] turn 1 calls `write_file`, which [tools] allow does not give" in said
    assert 'add "write_file" to [tools] allow' in said


def test_script_belongs_to_the_script_provider(tmp_path: Path) -> None:
    spec = load_spec(script_spec(tmp_path, "turns.toml", doc_block(SCRIPTED_PAGE, "`turns.toml`:")))
    assert spec.model is not None
    check_model_settings(spec.model)
    other = spec.model.model_copy(update={"provider": "anthropic"})
    with pytest.raises(ConfigError, match="script is only used by the script provider"):
        check_model_settings(other)
    with pytest.raises(ConfigError, match="base_url is not used by the script provider"):
        check_model_settings(spec.model.model_copy(update={"base_url": "http://x"}))


def _script(data: dict[str, Any]) -> ScriptModel:
    return ScriptModel(parse_script(data, "turns.toml"))


def execute_request(text: str = "Task fix: fix it") -> ModelRequest:
    return ModelRequest(
        model="scripted",
        purpose="execute",
        system="You carry out one task.",
        messages=[{"role": "user", "content": text}],
        max_tokens=4096,
    )


def test_answers_come_in_order_per_purpose_and_billed_like_a_providers() -> None:
    model = _script(
        {
            "plan": [{"tool": "submit_plan", "input": PLAN}],
            "execute": [
                {"tool": "read_file", "input": {"path": "a.py"}},
                {
                    "text": "two edits",
                    "calls": [
                        {"name": "edit_file", "input": {"path": "a", "old": "1", "new": "2"}},
                        {"name": "run_command", "input": {"command": "true"}},
                    ],
                    "usage": {"input": 7, "cache_read": 5, "cache_write_1h": 3},
                },
                {"text": "finished"},
            ],
        }
    )
    plan = plan_request("scripted", 4096, GOAL, ["true"])
    first = model.complete(plan)
    assert parse_answer(first, PlanAnswer, PLAN_TOOL.name, "plan").tasks[0].id == "fix"
    assert first.stop_reason == "tool_use" and first.model == "scripted"
    # Derived usage: what the request and the answer weigh, within what the call may bill.
    assert 0 < first.usage.input <= estimate_input_tokens(plan)
    assert first.usage.input == estimate_input_tokens(plan) // 4
    assert 0 < first.usage.output <= plan.max_tokens
    assert first.usage_known

    request = execute_request()
    read = model.complete(request)
    assert [(u.name, u.input) for u in read.tool_uses()] == [("read_file", {"path": "a.py"})]
    both = model.complete(request)
    assert both.text() == "two edits"
    assert [u.name for u in both.tool_uses()] == ["edit_file", "run_command"]
    assert len({u.id for u in [*read.tool_uses(), *both.tool_uses()]}) == 3
    assert (both.usage.input, both.usage.cache_read, both.usage.cache_write_1h) == (7, 5, 3)
    assert both.usage.output > 0 and both.usage.cache_write_5m == 0
    last = model.complete(request)
    assert (last.text(), last.tool_uses(), last.stop_reason) == ("finished", [], "end_turn")


def test_what_each_purpose_answers_once_its_turns_run_out() -> None:
    verdict = {"reasoning": "drifting", "off_goal_task_ids": ["x"], "drift_score": 0.4}
    model = _script(
        {
            "plan": [{"tool": "submit_plan", "input": PLAN}],
            "drift": [{"tool": "submit_drift_verdict", "input": verdict}],
            "replan": [
                {
                    "tool": "submit_replan",
                    "input": {"reasoning": "one more", "add": PLAN["tasks"]},
                }
            ],
            "execute": [{"text": "only turn"}],
        }
    )
    plan = plan_request("scripted", 4096, GOAL, ["true"])
    drift = drift_request("scripted", 4096, GOAL, [])
    replan = replan_request("scripted", 4096, GOAL, {}, ["true"])
    for _ in range(2):  # the last plan and drift verdict, again
        assert parse_answer(model.complete(plan), PlanAnswer, PLAN_TOOL.name, "plan") == (
            PlanAnswer.model_validate(PLAN)
        )
        judged = parse_answer(model.complete(drift), DriftVerdict, DRIFT_TOOL.name, "drift")
        assert judged.drift_score == 0.4
    added = [parse_answer(model.complete(replan), ReplanAnswer, REPLAN_TOOL.name, "replan")]
    added.append(parse_answer(model.complete(replan), ReplanAnswer, REPLAN_TOOL.name, "replan"))
    assert [len(a.add) for a in added] == [1, 0]  # then nothing to add
    assert model.complete(execute_request()).text() == "only turn"
    assert model.complete(execute_request()).text() == "done"
    summary = model.complete(summary_request("scripted", 1024, {}))
    assert (summary.text(), summary.stop_reason) == ("done", "end_turn")

    empty = _script({})
    judged = parse_answer(empty.complete(drift), DriftVerdict, DRIFT_TOOL.name, "drift")
    assert (judged.drift_score, judged.off_goal_task_ids) == (0.0, [])


def test_the_spec_builds_a_script_model(tmp_path: Path) -> None:
    spec = load_spec(script_spec(tmp_path, "turns.toml", doc_block(SCRIPTED_PAGE, "`turns.toml`:")))
    assert spec.model is not None
    client = build_client(spec.model)
    answer = client.complete(plan_request("scripted", 4096, GOAL, ["python -m pytest"]))
    planned = parse_answer(answer, PlanAnswer, PLAN_TOOL.name, "plan")
    assert [t.id for t in planned.tasks] == ["fix_add"]
    assert Script.model_validate({}).turns("execute") == []


def test_the_docs_python_model_answers_every_purpose() -> None:
    namespace: dict[str, Any] = {}
    exec(
        doc_block(
            "guides/models.md", '## Your own model in Python: `provider = "python"`', "python"
        ),
        namespace,
    )
    answer = namespace["answer"]
    asked = {
        "plan": (plan_request("m", 4096, GOAL, ["python -m pytest"]), PlanAnswer, PLAN_TOOL),
        "replan": (replan_request("m", 4096, GOAL, {}, ["true"]), ReplanAnswer, REPLAN_TOOL),
        "drift": (drift_request("m", 4096, GOAL, []), DriftVerdict, DRIFT_TOOL),
    }
    for purpose, (request, schema, tool) in asked.items():
        response = coerce_response(answer(request))
        assert response.usage_known and response.usage.input == 1200
        parse_answer(response, schema, tool.name, purpose)
    assert coerce_response(answer(execute_request())).text() == "done"


def test_a_scripted_night_is_metered_at_its_prices(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path / "repo")
    (tmp_path / "turns.toml").write_text(doc_block(SCRIPTED_PAGE, "`turns.toml`:"))
    data = spec_data(repo, predicate="python -m pytest -q")
    data["model"] = {"provider": "script", "script": "turns.toml", "name": "scripted"}
    data["prices"] = {"scripted": {"input": 5.0, "output": 25.0}}
    data["tools"] = {
        "allow": ["read_file", "edit_file", "run_command"],
        "commands": ["python -m pytest"],
    }
    (tmp_path / "night.toml").write_text(dumps(data))
    done = overnight("run", str(tmp_path / "night.toml"), "--quiet", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["stop_reason"] == "GOAL_MET"
    tokens = result["budgets"]["tokens"]["used"]
    spent = result["budgets"]["cost_usd"]["used"]
    # Every turn billed: at $5 / $25 per million tokens, some tokens cost something.
    assert tokens > 0 and 0 < spent < tokens * 25 / 1e6 + 1e-9
