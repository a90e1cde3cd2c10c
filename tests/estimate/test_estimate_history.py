"""``overnight estimate`` learns from recorded nights: the demo's own spec after one demo
night, the range by resampling recorded tasks, the chance the cap stops the night, the
recommended cap, and a planned night with no history asking for its task count."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from overnight.cli.demo import run_demo
from overnight.cli.main import main
from overnight.core.budget import Price, to_nanos
from overnight.estimate.learned import (
    Night,
    NightPrices,
    Settings,
    bill_nights,
    learn,
    simulate,
)
from overnight.night.workload import CallFacts, TaskFacts, WorkloadFacts, Workspace
from tests.agent.test_demo import demo


def estimate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["estimate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def bill_of(where: Path) -> float:
    data: dict[str, Any] = json.loads((where / "run" / "result.json").read_text())
    return float(data["spend"]["total_usd"])


def test_after_one_demo_night_the_next_is_estimated_within_a_quarter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two nights as a user runs them: `overnight demo --dir` twice, one OVERNIGHT_HOME.
    assert demo(tmp_path / "one").returncode == 0
    first_id = json.loads((tmp_path / "one" / "run" / "run.json").read_text())["run_id"]
    # The next night's spec is a fresh copy of the demo: another directory, the same project.
    assert demo(tmp_path / "two").returncode == 0
    second = bill_of(tmp_path / "two")
    code, out, _ = estimate(
        capsys, str(tmp_path / "one" / "workspace" / "night.toml"), "--json", "--from", first_id
    )
    assert code == 0
    learned = json.loads(out)
    assert [r["run_id"] for r in learned["runs"]] == [first_id]
    assert abs(learned["median_usd"] - second) <= 0.25 * second
    assert learned["median_usd"] <= learned["p90_usd"] <= learned["recommended_cap_usd"]
    assert learned["chance_stopped_early"] == 0.0  # $3 for a $0.10 night
    # Without --from the same workspace's runs are found, and not learned from: a demo night
    # is scripted (its model a fake), and says nothing of what a real model costs.
    code, text, _ = estimate(
        capsys, str(tmp_path / "two" / "workspace" / "night.toml"), "--tasks", "3"
    )
    assert code == 0, text
    assert "learned from" not in text
    assert "2 scripted, python or replayed night(s) not counted" in text


def test_a_planned_night_with_no_history_asks_for_its_task_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_demo(tmp_path / "d", quiet=True) == 0
    capsys.readouterr()
    spec = tmp_path / "elsewhere" / "night.toml"
    spec.parent.mkdir()
    shutil.copy(tmp_path / "d" / "workspace" / "night.toml", spec)  # not a git repository
    code, _, err = estimate(capsys, str(spec))
    assert code == 64 and "--tasks" in err and "guess" in err
    assert "40" not in err
    code, out, _ = estimate(capsys, str(spec), "--tasks", "3", "--json")
    assert code == 0
    printed = json.loads(out)
    assert printed["workload"]["tasks"] == 3
    assert printed["history"] == {"used": False, "why": "no recorded run of this workspace"}
    # --no-history on the demo's own workspace keeps the derivation, and still asks.
    own = str(tmp_path / "d" / "workspace" / "night.toml")
    assert estimate(capsys, own, "--no-history")[0] == 64
    code, out, _ = estimate(capsys, own, "--no-history", "--tasks", "2")
    assert code == 0 and "No history to learn from (--no-history)" in out


# --- the arithmetic, on hand-made records --------------------------------------------------------

PRICE = Price(input=5.0, output=25.0, cache_read=0.5, cache_write_5m=6.25, cache_write_1h=10.0)
CHEAP = Price(input=1.0, output=5.0, cache_read=0.1, cache_write_5m=1.25, cache_write_1h=2.0)


def call(purpose: str, input: int, output: int, at: float = 0.0, **cache: int) -> CallFacts:
    usage_usd = (input * 5 + output * 25 + cache.get("cache_read", 0) * 0.5) / 1e6 + cache.get(
        "cache_write_5m", 0
    ) * 6.25 / 1e6
    return CallFacts(
        purpose=purpose, model="m", input=input, output=output, usd=usage_usd, at=at, **cache
    )


def run_of(run_id: str, task_inputs: list[list[int]]) -> WorkloadFacts:
    tasks = tuple(
        TaskFacts(
            id=f"t{i}",
            outcome="verified",
            calls=tuple(call("execute", n, 100, at=10.0 * j) for j, n in enumerate(inputs)),
        )
        for i, inputs in enumerate(task_inputs)
    )
    return WorkloadFacts(
        run_id=run_id,
        workspace=Workspace(path="/w"),
        models=("m",),
        tasks_attempted=len(tasks),
        tasks_verified=len(tasks),
        night_calls=(call("plan", 1000, 100), call("summarize", 2000, 100)),
        tasks=tasks,
    )


def prices(cheap: bool = False) -> NightPrices:
    return NightPrices(
        price_of=lambda name: CHEAP if name == "cheap" else PRICE,
        model="m",
        cheap_model="cheap" if cheap else None,
    )


def test_identical_tasks_give_a_point_range_of_the_nights_count() -> None:
    run = run_of("r", [[1000, 2000]] * 3)
    task = to_nanos(call("execute", 1000, 100).usd) + to_nanos(call("execute", 2000, 100).usd)
    night_calls = sum(to_nanos(c.usd) for c in run.night_calls)
    e = learn([run], "given", prices(), Settings(tasks=5, tasks_from="--tasks", budget_usd=None))
    assert to_nanos(e.median_usd) == to_nanos(e.p90_usd) == night_calls + 5 * task
    assert e.chance_stopped_early is None
    assert [(r.run_id, r.tasks) for r in e.runs] == [("r", 3)]


def test_the_range_widens_with_the_tasks_it_draws_from() -> None:
    run = run_of("r", [[1000], [1000], [1000], [50_000]])
    nights = bill_nights([run], prices())
    draws = simulate(nights, 4, trials=2000)
    ordered = sorted(draws.totals)
    median, p90 = ordered[999], ordered[1799]
    assert median < p90  # one task in four is fifty times the others
    # Each draw is the plan, four of the recorded tasks and the summary.
    t = nights[0].tasks
    possible = {nights[0].opening + nights[0].summary + k * t[3] + (4 - k) * t[0] for k in range(5)}
    assert set(draws.totals) <= possible


def test_the_chance_the_cap_stops_the_night_and_the_cap_recommended() -> None:
    run = run_of("r", [[1000, 2000], [3000], [1000, 1000, 1000]])
    bill = sum(to_nanos(c.usd) for c in run.all_calls) / 1e9
    small = Settings(tasks=3, tasks_from="--tasks", budget_usd=bill / 4)
    assert learn([run], "given", prices(), small).chance_stopped_early == 1.0
    big = Settings(tasks=3, tasks_from="--tasks", budget_usd=bill * 100)
    e = learn([run], "given", prices(), big)
    assert e.chance_stopped_early == 0.0
    # The p90 night's work fits under the finish line of the cap recommended...
    summary = to_nanos(run.night_calls[1].usd) / 1e9
    assert (e.p90_usd - summary) <= e.recommended_cap_usd * 0.90
    # ...and a cap at it stops few nights; a cent under the p90 stops more.
    at_cap = Settings(tasks=3, tasks_from="--tasks", budget_usd=e.recommended_cap_usd)
    under = Settings(tasks=3, tasks_from="--tasks", budget_usd=e.p90_usd * 0.8)
    stopped_at_cap = learn([run], "given", prices(), at_cap).chance_stopped_early
    stopped_under = learn([run], "given", prices(), under).chance_stopped_early
    assert stopped_at_cap is not None and stopped_under is not None
    assert stopped_at_cap <= 0.1 < stopped_under


def test_levers_are_priced_on_the_recorded_tokens() -> None:
    run = run_of("r", [[1000] * 6, [1000] * 6])
    s = Settings(tasks=2, tasks_from="--tasks", budget_usd=None, loop_cap_calls=4)
    e = learn([run], "given", prices(cheap=True), s)
    one = to_nanos(call("execute", 1000, 100).usd)
    # the loop cap drops each task's 5th and 6th calls, whichever tasks are drawn
    loop = next(lever for lever in e.levers if "loop cap" in lever.name)
    assert to_nanos(loop.saving_usd) == 2 * 2 * one
    # the recording has no cache: the caching row is derived from its call times
    caching = next(lever for lever in e.levers if "caching" in lever.name)
    assert "derived" in caching.note
    # 60% of the recorded tasks (one of two) on the cheaper model: its tokens at $1/$5
    cheap = next(lever for lever in e.levers if lever.name.startswith("60% of the tasks"))
    per_task_saving = 6 * (one - (1000 * 1 + 100 * 5) * 1000)
    assert to_nanos(cheap.saving_usd) in (0, per_task_saving, 2 * per_task_saving)
    low = next(lever for lever in e.levers if lever.name.startswith("low effort"))
    assert low.saving_usd >= cheap.saving_usd


def test_a_night_of_unequal_draws_is_not_the_seed() -> None:
    nights = [Night("a", 10, 5, (100, 200), 2)]
    draws = simulate(nights, 1, trials=100)
    assert set(draws.totals) <= {115, 215}
