"""``overnight estimate``: the reference night's figures, derived from token counts.

Every figure is asserted as computed by the code, rounded the way the figures are quoted: money
to the cent, tokens to one decimal of k.
"""

from __future__ import annotations

import json
import math
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from overnight.cli.main import main
from overnight.config.spec import parse_spec
from overnight.core.errors import ConfigError
from overnight.estimate import (
    SEED_EXAMPLE,
    Lever,
    Workload,
    bill,
    cached_call_tokens,
    call_input_tokens,
    check_budget,
    estimate,
    hard_cap,
    levers,
    low_effort_cut,
    output_per_task,
    recommend,
    task_input_tokens,
    tiered_tasks,
    total_usd,
    workload_flags,
)


def seed(**changes: Any) -> Workload:
    """The reference workload with some fields changed, validated like a spec would be."""
    return Workload.model_validate({**SEED_EXAMPLE.model_dump(), **changes})


def k(tokens: float) -> float:
    return round(tokens / 1000, 1)


def lever(w: Workload, key: str) -> Lever:
    return next(lv for lv in levers(w) if lv.key == key)


# --- step 1: per-task input -------------------------------------------------------------------


def test_per_call_input_grows_by_the_resent_history() -> None:
    assert [k(t) for t in call_input_tokens(SEED_EXAMPLE)] == [3.5, 6.8, 10.1, 13.4, 16.7, 20.0]
    assert k(task_input_tokens(SEED_EXAMPLE)) == 70.5
    est = estimate(SEED_EXAMPLE)
    assert est.night_input_tokens == 2_820_000  # 2.82M
    assert est.night_output_tokens == 168_000


def test_the_quadratic_term() -> None:
    four = seed(calls_per_task=4)
    assert k(task_input_tokens(four)) == 33.8
    # each extra call costs its whole context, so the step between task sizes keeps growing
    sums = [task_input_tokens(four, n) for n in range(1, 8)]
    steps = [k(b - a) for a, b in pairwise(sums)]
    assert steps == [6.8, 10.1, 13.4, 16.7, 20.0, 23.3]
    assert k(task_input_tokens(four, 7) - task_input_tokens(four, 6)) == 23.3  # not 3.3k
    assert k(estimate(SEED_EXAMPLE).next_call_input_tokens) == 23.3
    assert k(estimate(four).next_call_input_tokens) == 16.7


# --- step 2: the bill ---------------------------------------------------------------------------


def test_bill_per_call_kind_and_total() -> None:
    rows = bill(SEED_EXAMPLE)
    assert [(r.kind, r.calls, round(r.cost_usd, 2)) for r in rows] == [
        ("task execution", 240, 18.30),
        ("verification", 40, 0.78),
        ("drift check", 8, 0.35),
        ("replan", 12, 0.78),
        ("compaction", 6, 1.80),
    ]
    est = estimate(SEED_EXAMPLE)
    assert est.total_calls == 306
    assert round(est.total_usd, 2) == round(total_usd(SEED_EXAMPLE), 2) == 22.01
    assert round(est.task_share) == 83
    task = rows[0]
    assert (round(task.input_usd, 2), round(task.output_usd, 2)) == (14.10, 4.20)


# --- the levers, each alone ---------------------------------------------------------------------


def test_caching_lever() -> None:
    effective = [round(float(t) / 1000, 3) for t in cached_call_tokens(SEED_EXAMPLE)]
    assert effective == [4.375, 4.475, 4.805, 5.135, 5.465, 5.795]
    cache = lever(SEED_EXAMPLE, "caching")
    assert cache.applies
    assert cache.task_input_tokens is not None and round(cache.task_input_tokens / 1000, 2) == 30.05
    assert round(cache.task_row_usd, 2) == 10.21
    assert round(cache.total_usd, 2) == 13.92
    assert round(cache.saving_usd, 2) == 8.09
    assert round(cache.saving_pct) == 37
    # it states the TTL it depends on, and what missing it costs
    assert "5-minute TTL" in cache.name
    assert any("under the 5-minute TTL" in note for note in cache.notes)
    assert cache.ttl_miss_total_usd is not None and cache.ttl_miss_total_usd > 22.01


def test_caching_collapses_below_the_minimum_cacheable_length() -> None:
    floor = seed(min_cacheable_tokens=4096)  # above the 3.5k first call
    cache = lever(floor, "caching")
    assert not cache.applies
    assert round(cache.total_usd, 2) == 22.01
    assert cache.saving_usd == 0
    assert cache.per_call_input_tokens == tuple(float(t) for t in call_input_tokens(floor))
    assert any("collapses to no saving" in n and "4,096" in n for n in cache.notes)
    # at exactly the first call's size the prefix is cacheable
    assert lever(seed(min_cacheable_tokens=3500), "caching").applies


def test_loop_cap_lever() -> None:
    cap = lever(SEED_EXAMPLE, "loop_cap")
    assert cap.task_input_tokens is not None and k(cap.task_input_tokens) == 33.8
    assert cap.task_output_tokens is not None and k(cap.task_output_tokens) == 2.8
    assert round(cap.task_row_usd, 2) == 9.56
    assert round(cap.total_usd, 2) == 13.27
    assert round(cap.saving_usd, 2) == 8.74
    assert round(cap.saving_pct, 1) == 39.7
    assert not lever(seed(calls_per_task=4), "loop_cap").applies


def test_tiering_and_low_effort_levers() -> None:
    tier = lever(SEED_EXAMPLE, "tiering")
    assert round(tier.task_row_usd, 2) == 13.91
    assert round(tier.total_usd, 2) == 17.62
    assert round(tier.saving_pct) == 20
    effort = lever(SEED_EXAMPLE, "low_effort")
    assert round(effort.saving_usd, 2) == 1.00
    assert round(effort.total_usd, 2) == 21.01
    # without a cheaper model there is nothing to tier to
    alone = lever(seed(cheap_model=None, cheap_price=None), "tiering")
    assert not alone.applies and alone.saving_usd == 0


def test_a_cut_larger_than_the_tiered_output_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        # given by the user: 6 tiered tasks x 4.2k = 25.2k < the 40k cut
        seed(tasks=10, low_effort_output_cut_tokens=40_000)
    assert info.value.field == "estimate.low_effort_output_cut_tokens"


def test_the_cut_not_given_follows_the_tiered_output() -> None:
    # the reference's 40k of its 24 tiered tasks' 100.8k, for any number of tasks
    assert low_effort_cut(SEED_EXAMPLE) == 40_000
    assert low_effort_cut(seed(tasks=10)) == 10_000  # 6 tiered x 4.2k x 40/100.8
    assert round(lever(seed(tasks=10), "low_effort").saving_usd, 2) == 0.25
    for tasks in range(1, 41):
        w = seed(tasks=tasks)
        assert 0 < low_effort_cut(w) <= tiered_tasks(w) * output_per_task(w), tasks


# --- the recommendation ---------------------------------------------------------------------------


def test_recommendation() -> None:
    rec = recommend(SEED_EXAMPLE)
    assert rec.hard_cap_usd == hard_cap(SEED_EXAMPLE) == 28
    assert round(rec.headroom_usd, 2) == 5.99
    assert rec.verified_tasks == 30
    assert round(rec.cost_per_verified_task_usd, 2) == 0.73
    assert (k(rec.task_input_tokens), k(rec.task_output_tokens)) == (70.5, 4.2)
    assert rec.calls_per_task == 6
    # the rule: derived x cap_factor, rounded up to a whole dollar (27.5125 -> 28); it covers
    # the night where every cached call misses the TTL
    assert hard_cap(seed(cap_factor=1.1)) == 25
    # ...raised so the derived total stays under the 90% line: x1.0 would give $23, on which
    # $22.01 is 95.7%, past the enforcement line; $22.01 / 0.9 = $24.46 -> $25
    assert hard_cap(seed(cap_factor=1.0)) == 25
    assert "raised to $22.01 / 0.9" in recommend(seed(cap_factor=1.0)).cap_rule
    miss = lever(SEED_EXAMPLE, "caching").ttl_miss_total_usd
    assert miss is not None and miss < rec.hard_cap_usd


@pytest.mark.parametrize(
    ("cap_factor", "finish_at", "enforce_at"),
    [(1.25, 0.9, 0.92), (1.0, 0.9, 0.92), (1.25, 0.5, 0.5), (1.25, 0.3, 0.95), (3.0, 0.8, 0.8)],
)
def test_the_recommended_cap_passes_its_own_budget_check(
    cap_factor: float, finish_at: float, enforce_at: float
) -> None:
    w = seed(cap_factor=cap_factor, finish_at=finish_at, enforce_at=enforce_at)
    rec = recommend(w)
    cap = rec.hard_cap_usd
    check = check_budget(w.model_copy(update={"budget_usd": float(cap)}))
    assert check is not None and check.covers and not check.past_finish_line
    assert check.recommended_cap_usd == cap
    # a dollar less fails one of the two lines, or the factor made the cap
    below = check_budget(w.model_copy(update={"budget_usd": float(cap - 1)}))
    assert below is not None
    by_factor = math.ceil(rec.derived_usd * cap_factor - 1e-9)
    assert (not below.covers or below.past_finish_line) or cap == by_factor


# --- the spec -------------------------------------------------------------------------------------

SPEC = """
goal = "g"
[budget]
usd = 28
[predicate]
command = "true"
[model]
provider = "anthropic"
name = "claude-opus-5"
[prices.claude-opus-5]
input = 5.0
output = 25.0
[prices.claude-sonnet-5]
input = 3.0
output = 15.0
[agent]
mechanical_model = "claude-sonnet-5"
min_cacheable_tokens = 512
"""


def write_spec(tmp_path: Path, estimate_table: str = "") -> Path:
    path = tmp_path / "night.toml"
    path.write_text(SPEC + estimate_table, encoding="utf-8")
    return path


def test_spec_holds_an_estimate_table(tmp_path: Path) -> None:
    spec = parse_spec(
        {"goal": "g", "budget": {"usd": 28}, "predicate": {"command": "true"}}, tmp_path
    )
    assert spec.estimate is None
    data = {
        "goal": "g",
        "budget": {"usd": 28},
        "predicate": {"command": "true"},
        "estimate": {"tasks": 20, "main_price": {"input": 5, "output": 25}},
    }
    spec = parse_spec(data, tmp_path)
    assert spec.estimate is not None and spec.estimate.tasks == 20
    with pytest.raises(ConfigError) as info:
        parse_spec({**data, "estimate": {"taks": 20}}, tmp_path)
    assert info.value.field == "estimate.taks"


# --- the command --------------------------------------------------------------------------------


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["estimate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_text_prints_derivation_levers_and_recommendation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(["--seed-example"], capsys)
    assert code == 0
    for line in (
        "input(1) = 3.5k + 0 x 3.3k =  3.5k",
        "input(6) = 3.5k + 5 x 3.3k = 20.0k",
        "per task     70.5k input, 4.2k output",
        "x 40 tasks  2,820k input, 168k output",
        "a 7th call would add 23.3k",
        "(2,820 x 5 + 168 x 25) / 1000  $18.30",
        "(60 x 5 + 2 x 25) / 1000        $0.35",
        "(300 x 5 + 12 x 25) / 1000      $1.80",
        "total             306",
        "$22.01",
        "lever                                 new total  saving $  saving %",
        "prompt caching (gaps < 5-minute TTL)     $13.92     $8.09     36.8%",
        "loop cap at 4 calls                      $13.27     $8.74     39.7%",
        "24 tasks (60%) on claude-sonnet-5        $17.62     $4.39     20.0%",
        "low effort on the 24 tiered tasks        $21.01     $1.00      4.5%",
        "30.05k per",
        "hard cap           $28 = $22.01 x 1.25 = $27.51, rounded up to a whole dollar",
        "headroom           $28.00 - $22.01 = $5.99",
        "per verified task  $22.01 / 30 = $0.73",
        "task token budget  70.5k in / 4.2k out per 6-call task",
    ):
        assert line in out, line
    # the order: derivation, bill, levers, recommendation
    marks = ["input(1)", "task execution ", "lever ", "Recommendation:"]
    assert [out.index(m) for m in marks] == sorted(out.index(m) for m in marks)


def test_cli_json_is_the_function_result(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--seed-example", "--json"], capsys)
    assert code == 0
    printed = json.loads(out)
    assert printed == json.loads(json.dumps(estimate(SEED_EXAMPLE).as_dict()))
    assert round(printed["total_usd"], 2) == 22.01
    assert printed["recommendation"]["hard_cap_usd"] == 28


#: Where the night a spec describes differs from the reference night: the reference prices a
#: model call to verify each task, 12 replans, 6 compactions of 50k, a drift check after the
#: last task, and no plan or summary.
REFERENCE_COUNTS = (
    "verify_calls_per_task = 1\nreplans = 12\ncompactions = 6\n"
    "compaction_input_tokens = 50_000\nplans = 0\nsummaries = 0\ndrift_after_last_task = true\n"
)


def test_cli_reads_the_spec_and_its_prices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the reference night's counts in [estimate]: priced from [prices], cache floor from [agent]
    code, out, _ = run(
        [str(write_spec(tmp_path, "[estimate]\n" + REFERENCE_COUNTS)), "--json"], capsys
    )
    assert code == 0
    from_spec = json.loads(out)
    assert round(from_spec["total_usd"], 2) == 22.01
    assert [round(lv["total_usd"], 2) for lv in from_spec["levers"]] == [13.92, 13.27, 17.62, 21.01]
    # the table and then the flags override, field by field
    counts = REFERENCE_COUNTS.replace("replans = 12", "replans = 0")
    path = write_spec(tmp_path, "[estimate]\ntasks = 20\n" + counts)
    code, out, _ = run(
        [str(path), "--calls-per-task", "4", "--main-price-output", "30", "--json"], capsys
    )
    assert code == 0
    w = seed(tasks=20, replans=0, calls_per_task=4, main_price={"input": 5.0, "output": 30.0})
    assert json.loads(out)["total_usd"] == pytest.approx(total_usd(w))
    assert json.loads(out)["workload"]["main_model"] == "claude-opus-5"


def test_every_workload_field_has_a_flag_and_a_docstring() -> None:
    paths = {f.path for f in workload_flags()}
    for name, info in Workload.model_fields.items():
        assert info.description, name
        if name.endswith("_price"):
            assert {(name, "input"), (name, "output")} <= paths
        else:
            assert (name,) in paths


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--seed-example", "--tasks", "abc"], "--tasks"),
        (["--seed-example", "--tasks", "0"], "estimate.tasks"),
        (["--seed-example", "--verify-pass-rate", "1.5"], "estimate.verify_pass_rate"),
        (["--seed-example", "--no-such-flag"], "--no-such-flag"),
        (["--tasks", "40"], "estimate.main_price"),  # nothing to price the calls with
        (["--main-price-input", "5"], "estimate.main_price.output"),
    ],
)
def test_bad_input_exits_64_naming_the_field(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        code = main(["estimate", *args])
        raise SystemExit(code)
    assert exit_info.value.code == 64
    assert named in capsys.readouterr().err


def test_bad_spec_table_exits_64(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run([str(write_spec(tmp_path, "[estimate]\ntaks = 3\n"))], capsys)
    assert code == 64 and "estimate.taks" in err
    code, _, err = run([str(write_spec(tmp_path)), "--seed-example"], capsys)
    assert code == 64 and "--seed-example" in err
