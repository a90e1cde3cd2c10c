"""``overnight estimate night.toml``: the night the spec describes, checked against its cap.

The spec's ``[[tasks]]`` decide how many agent tasks there are (a ``brief``) and how many cost
nothing (a ``command``); ``agent.max_calls`` is the calls per task; no model call verifies a
task; the harness's own calls are counted as the harness makes them. Small nights price
without tripping a lever setting nobody set, a night with no model call costs $0 with no
price, and the derived total is compared with ``budget.usd`` at its enforcement line.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from overnight.cli.main import main
from overnight.config.spec import load_spec, parse_spec
from overnight.estimate import (
    SEED_EXAMPLE,
    Workload,
    compactions_per_task,
    estimate,
    resolve_workload,
    spec_defaults,
    workload_flags,
)
from overnight.testing.fakes import ScriptedModel, tool_answer
from tests.helpers.nights import cli_env, command_task, run_night, spec_data
from tests.helpers.toml import dumps

BASE: dict[str, Any] = {
    "goal": "g",
    "budget": {"usd": 28.0},
    "predicate": {"command": "true"},
    "model": {"provider": "anthropic", "name": "claude-opus-5"},
    "prices": {
        "claude-opus-5": {"input": 5.0, "output": 25.0},
        "claude-sonnet-5": {"input": 3.0, "output": 15.0},
    },
    "agent": {"min_cacheable_tokens": 512},
}

#: The reference night's counts, where the night a spec describes differs from it.
REFERENCE: dict[str, Any] = {
    "verify_calls_per_task": 1,
    "replans": 12,
    "compactions": 6,
    "compaction_input_tokens": 50_000,
    "plans": 0,
    "summaries": 0,
    "drift_after_last_task": True,
}


def brief(tid: str) -> dict[str, Any]:
    return {"id": tid, "brief": f"do {tid}", "verify": "true"}


def command(tid: str) -> dict[str, Any]:
    return {"id": tid, "command": f"echo {tid}", "verify": "true"}


def night(tmp_path: Path, *, model: bool = True, **sections: Any) -> Path:
    """A night.toml on disk: ``BASE`` with ``sections`` merged in table by table."""
    data = copy.deepcopy(BASE)
    if not model:
        del data["model"], data["prices"]
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key].update(value)
        else:
            data[key] = value
    path = tmp_path / "night.toml"
    path.write_text(dumps(data), encoding="utf-8")
    return path


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["estimate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def priced(path: Path | None, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = run([*([str(path)] if path else []), "--json", *args], capsys)
    assert code == 0, err
    printed: dict[str, Any] = json.loads(out)
    return printed


def calls(printed: dict[str, Any]) -> dict[str, int]:
    return {row["kind"]: row["calls"] for row in printed["bill"]}


# --- any number of tasks --------------------------------------------------------------------------


@pytest.mark.parametrize("tasks", [1, 2, 5, 10, 14, 15, 16])
def test_a_small_seed_night_prices_without_a_lever_setting_nobody_set(
    tasks: int, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = priced(None, capsys, "--seed-example", "--tasks", str(tasks))
    assert printed["workload"]["tasks"] == tasks
    effort = next(lv for lv in printed["levers"] if lv["key"] == "low_effort")
    assert effort["applies"] and effort["saving_usd"] > 0
    tiered_output = int(tasks * 0.6 + 0.5) * 4200
    assert 0 < printed["workload"]["low_effort_output_cut_tokens"] <= tiered_output


def test_a_smaller_output_per_task_prices_too(capsys: pytest.CaptureFixture[str]) -> None:
    # 24 tiered tasks x 1k = 24k of output, less than the reference's 40k cut
    printed = priced(None, capsys, "--seed-example", "--output-per-task-tokens", "1000")
    assert printed["workload"]["low_effort_output_cut_tokens"] == 9_524  # 24k x 40/100.8


def test_the_low_effort_row_of_a_small_night(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--seed-example", "--tasks", "10"], capsys)
    assert code == 0
    assert "low effort on the 6 tiered tasks" in out
    assert "10 x 25 / 1000 = $0.25 saved" in out


def test_a_cut_the_user_gives_is_still_checked(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        ["--seed-example", "--tasks", "10", "--low-effort-output-cut-tokens", "40000"], capsys
    )
    assert code == 64 and "estimate.low_effort_output_cut_tokens" in err


# --- the spec's tasks and agent -----------------------------------------------------------------


def test_the_tasks_are_the_specs_and_commands_make_no_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = night(tmp_path, tasks=[brief("a"), brief("b"), command("c")])
    printed = priced(path, capsys)
    assert (printed["workload"]["tasks"], printed["workload"]["command_tasks"]) == (2, 1)
    # 2 agent tasks x 6 calls; the command task is no execution call but is a lap after which
    # the harness replans (after every task but the last); no drift check before the 5th task
    assert calls(printed) == {"task execution": 12, "replan": 2, "closing summary": 1}
    # 2 x (70.5k x $5 + 4.2k x $25) + 2 x (8k x $5 + 1k x $25) + (2k x $5 + 0.3k x $25)
    assert printed["total_usd"] == 1.0625
    # the drift cadence counts command tasks too, and no check follows the last task
    path = night(tmp_path, tasks=[brief("a"), brief("b"), command("c")], run={"drift_every": 1})
    assert calls(priced(path, capsys))["drift check"] == 2


def test_calls_per_task_come_from_agent_max_calls_unless_the_table_says_otherwise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = [brief("a"), brief("b")]
    printed = priced(night(tmp_path, tasks=tasks, agent={"max_calls": 4}), capsys)
    assert calls(printed)["task execution"] == 8
    assert printed["task_output_tokens"] == 2800  # 0.7k per call, as in the reference
    printed = priced(
        night(tmp_path, tasks=tasks, agent={"max_calls": 4}, estimate={"calls_per_task": 5}),
        capsys,
    )
    assert calls(printed)["task execution"] == 10
    printed = priced(
        night(tmp_path, tasks=tasks, agent={"max_calls": 4}, estimate={"calls_per_task": 5}),
        capsys,
        "--calls-per-task",
        "3",
    )
    assert calls(printed)["task execution"] == 6


def test_the_table_overrides_the_task_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = night(tmp_path, tasks=[brief("a"), command("c")], estimate={"tasks": 7})
    printed = priced(path, capsys)
    assert calls(printed)["task execution"] == 42
    assert calls(printed)["replan"] == 7  # 7 agent tasks and the command task: 8 laps
    # a flag for the count moves the derived counts with it
    assert calls(priced(path, capsys, "--tasks", "3"))["replan"] == 3


def test_no_model_call_verifies_a_task(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = [brief("a"), brief("b")]
    assert "verification" not in calls(priced(night(tmp_path, tasks=tasks), capsys))
    # a night whose executor does call a model to check its work says so in [estimate]
    path = night(tmp_path, tasks=tasks, estimate={"verify_calls_per_task": 1})
    assert calls(priced(path, capsys))["verification"] == 2
    # the reference night keeps its 40
    assert calls(priced(None, capsys, "--seed-example"))["verification"] == 40


def test_the_plan_and_the_replans_follow_the_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # no [[tasks]]: the model plans the queue once; the number of tasks is the table's
    printed = priced(night(tmp_path, estimate={"tasks": 3}), capsys)
    assert calls(printed) == {"task execution": 18, "replan": 2, "plan": 1, "closing summary": 1}
    # [[tasks]]: no plan; run.replan = false: no replan
    path = night(tmp_path, tasks=[brief("a"), brief("b")], run={"replan": False})
    assert calls(priced(path, capsys)) == {"task execution": 12, "closing summary": 1}


def test_a_long_task_compacts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 3.5k + 18 x 3.3k = 62.9k passes 60k after the 18th call; restarted at 3.5k + 2k, the
    # 19th and 20th calls stay under it
    tasks = [brief("a"), brief("b")]
    printed = priced(night(tmp_path, tasks=tasks, agent={"max_calls": 20}), capsys)
    row = next(r for r in printed["bill"] if r["kind"] == "compaction")
    assert (row["calls"], row["input_tokens"]) == (2, 120_000)  # each of the 60k it summarizes
    path = night(tmp_path, tasks=tasks, agent={"max_calls": 20, "compact_at_tokens": 100_000})
    assert "compaction" not in calls(priced(path, capsys))
    assert "compaction" not in calls(priced(night(tmp_path, tasks=tasks), capsys))
    # after the first compaction the conversation grows back past 60k 17 calls later
    assert compactions_per_task(Workload(calls_per_task=34, compactions=None)) == 1
    assert compactions_per_task(Workload(calls_per_task=35, compactions=None)) == 2


# --- a night with no model call -----------------------------------------------------------------


def test_a_night_of_command_tasks_costs_nothing_and_needs_no_price(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = night(tmp_path, model=False, tasks=[command("c"), command("d")], budget={"usd": 0.0})
    printed = priced(path, capsys)
    assert printed["total_usd"] == 0
    assert printed["bill"] == [] and printed["total_calls"] == 0
    assert printed["budget"]["covers"] is True
    code, out, err = run([str(path)], capsys)
    assert code == 0 and err == ""
    assert "Night estimate: 2 command tasks, no agent task" in out
    assert "no model calls" in out and "$0.00" in out
    assert "it costs nothing, and any cap covers it" in out


def test_the_same_commands_with_a_model_pay_for_the_harness_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = priced(night(tmp_path, tasks=[command("c"), command("d")]), capsys)
    assert calls(printed) == {"replan": 1, "closing summary": 1}
    assert printed["total_usd"] > 0


def test_agent_tasks_asked_for_still_need_a_price(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = night(tmp_path, model=False, tasks=[command("c")], estimate={"tasks": 2})
    code, _, err = run([str(path)], capsys)
    assert code == 64 and "estimate.main_price" in err and "no price" in err


# --- the cap ------------------------------------------------------------------------------------


def reference_night(tmp_path: Path, **budget: float) -> Path:
    """The reference night's counts in [estimate] (no [[tasks]]: 40 planned tasks), $22.01."""
    return night(tmp_path, estimate=REFERENCE, budget=budget)


def test_a_cap_that_covers_the_night(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    printed = priced(reference_night(tmp_path, usd=28.0), capsys)
    assert round(printed["total_usd"], 2) == 22.01
    check = printed["budget"]
    assert check["covers"] is True and check["past_finish_line"] is False
    assert round(check["enforcement_line_usd"], 2) == 25.76  # 92% of $28
    assert round(check["margin_usd"], 2) == 3.75
    assert round(check["least_cap_usd"], 2) == 23.93  # $22.01 / 0.92, up to the cent
    assert check["recommended_cap_usd"] == 28
    _, out, _ = run([str(reference_night(tmp_path, usd=28.0))], capsys)
    assert "COVERED: the $28.00 cap covers the derived $22.01: $3.75 under its enforcement" in out
    assert "NOT COVERED" not in out


def test_a_cap_below_the_derived_cost_is_said_plainly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = priced(reference_night(tmp_path, usd=10.0), capsys)
    check = printed["budget"]
    assert check["covers"] is False
    assert round(check["margin_usd"], 2) == -12.81  # $9.20 - $22.01
    code, out, _ = run([str(reference_night(tmp_path, usd=10.0))], capsys)
    assert code == 0  # the estimate itself succeeded
    text = " ".join(out.split())
    assert "NOT COVERED: the $10.00 cap is too small for this night" in text
    assert "$12.81 over its enforcement line, $9.20 (92% of the cap)" in text
    assert "Set budget.usd to at least $23.93; $28 is recommended." in text


def test_a_cap_past_the_line_where_no_task_starts_is_only_just(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # $24: enforcement line $22.08 covers $22.01, but from $21.60 no new task starts
    check = priced(reference_night(tmp_path, usd=24.0), capsys)["budget"]
    assert check["covers"] is True and check["past_finish_line"] is True
    _, out, _ = run([str(reference_night(tmp_path, usd=24.0))], capsys)
    assert "only just" in out and "no new task starts" in " ".join(out.split())


def test_the_enforcement_line_is_the_specs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bands = {"notice_at": 0.7, "finish_at": 0.8, "enforce_at": 0.8}
    check = priced(reference_night(tmp_path, usd=28.0, **bands), capsys)["budget"]
    assert check["covers"] is True and round(check["enforcement_line_usd"], 2) == 22.40
    # at 92% a $27 cap would cover $22.01 ($24.84); at the spec's 80% it does not ($21.60)
    check = priced(reference_night(tmp_path, usd=27.0, **bands), capsys)["budget"]
    assert check["covers"] is False and check["enforce_at"] == 0.8


def test_a_cost_exactly_on_the_line_is_covered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bands = {"notice_at": 0.4, "finish_at": 0.5, "enforce_at": 0.5}
    check = priced(reference_night(tmp_path, usd=44.02, **bands), capsys)["budget"]
    assert check["covers"] and check["margin_usd"] == 0
    assert "exactly on its enforcement line" in check["verdict"]
    # at a 50% line the x1.25 hard cap ($28) would not cover: what is recommended does
    assert check["recommended_cap_usd"] == 45
    assert not priced(reference_night(tmp_path, usd=44.01, **bands), capsys)["budget"]["covers"]


def test_a_shortfall_under_a_cent_is_not_shown_as_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 92% of $23.92 is $22.0064: $0.0036 short of $22.01, and both print as $22.01
    check = priced(reference_night(tmp_path, usd=23.92), capsys)["budget"]
    assert check["covers"] is False
    assert "less than $0.01 over its enforcement line" in check["verdict"]
    assert "$0.00" not in check["verdict"]


def test_the_seed_example_is_checked_only_against_a_cap_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert priced(None, capsys, "--seed-example")["budget"] is None
    code, out, _ = run(["--seed-example"], capsys)
    assert code == 0 and "COVERED" not in out
    check = priced(None, capsys, "--seed-example", "--budget-usd", "20")["budget"]
    assert check["covers"] is False and check["cap_usd"] == 20.0


# --- what is printed ------------------------------------------------------------------------------


def test_the_printed_workload_prices_the_same_night(tmp_path: Path) -> None:
    """Every derived count and size is written into the printed workload, so pricing it again
    gives the same night."""
    spec = load_spec(night(tmp_path, tasks=[brief("a"), command("c")], agent={"max_calls": 20}))
    prices = spec.price_table()
    w = resolve_workload({}, {}, spec_defaults(spec), prices.price)
    for workload in (
        SEED_EXAMPLE,
        Workload.model_validate({**SEED_EXAMPLE.model_dump(), "tasks": 7}),
        w,
    ):
        est = estimate(workload)
        again = estimate(Workload.model_validate(est.workload))
        assert again == est
    assert estimate(w).workload["compactions"] == 1
    assert estimate(w).workload["replans"] == 1


def test_count_flags_take_numbers() -> None:
    types = {f.path: f.type for f in workload_flags()}
    assert types[("replans",)] is int and types[("compactions",)] is int
    assert types[("budget_usd",)] is float and types[("output_per_task_tokens",)] is int


def test_estimate_from_the_command_line(tmp_path: Path) -> None:
    path = night(tmp_path, tasks=[brief("a"), brief("b"), command("c")], budget={"usd": 0.5})
    done = subprocess.run(
        [sys.executable, "-m", "overnight", "estimate", str(path)],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Night estimate: 2 tasks x 6 calls per task, plus 1 command task" in done.stdout
    assert "NOT COVERED: the $0.50 cap is too small for this night" in done.stdout


# --- the counts are the calls a night makes -----------------------------------------------------

#: The bill's kinds of call, by the purpose a request carries.
KIND = {
    "execute": "task execution",
    "drift": "drift check",
    "replan": "replan",
    "compact": "compaction",
    "plan": "plan",
    "summarize": "closing summary",
}


def keep_listing(_request: Any) -> dict[str, Any]:
    """An execute answer that asks for another tool call: the task uses every call it has."""
    return tool_answer("list_files", {"path": "."})


@pytest.mark.parametrize("planned", [False, True])
def test_the_counts_are_the_calls_a_night_makes(repo: Path, tmp_path: Path, planned: bool) -> None:
    agent = {"max_calls": 3, "loop_repeats": 10}
    if planned:
        plan = {
            "reasoning": "three steps",
            "tasks": [
                {"id": f"p{i}", "title": f"step {i}", "brief": f"take step {i}", "verify": "true"}
                for i in range(3)
            ],
        }
        data = spec_data(repo, agent=agent, estimate={"tasks": 3})
        model = ScriptedModel(plan=plan, execute=keep_listing)
    else:
        tasks = [
            {"id": "a", "title": "a", "brief": "do a", "verify": "true"},
            {"id": "b", "title": "b", "brief": "do b", "verify": "true"},
            command_task("c", "true", "true"),
            command_task("d", "true", "true"),
        ]
        data = spec_data(repo, tasks=tasks, agent=agent, run={"drift_every": 2})
        model = ScriptedModel(execute=keep_listing)
    spec = parse_spec(data, repo)
    _rd, result = run_night(spec, tmp_path / "run", model=model)
    assert result.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"

    made = Counter(KIND[purpose] for purpose in model.purposes())
    table = spec.estimate.model_dump(exclude_unset=True) if spec.estimate else {}
    w = resolve_workload(table, {}, spec_defaults(spec), spec.price_table().price)
    assert {row.kind: row.calls for row in estimate(w).bill} == dict(made)
    assert made["task execution"] == (9 if planned else 6)
