"""How a night ends: every ending reached through the real harness, and the tables behind them.

Nights run in-process with a fake model, a scripted executor, real git and a fake clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from overnight.clock import FakeClock
from overnight.core.budget import MONEY
from overnight.core.endings import (
    CLASS,
    ENDING_TABLES,
    PRIORITY,
    RESUMABLE_BY_CAUSE,
    Ending,
    Outcome,
    Stop,
    agrees_with_budgets,
    classify_exception,
    describe,
    verify_tables,
)
from overnight.core.errors import BudgetRefused, GoalMutated, RunError, TableError
from overnight.core.goal import Goal
from overnight.core.state import RunState
from overnight.core.tasks import Task
from overnight.messages.types import ModelRequest
from overnight.night import worktree as ws
from overnight.night.compose import compose
from overnight.night.night import Night
from overnight.night.runs import night_rules
from overnight.night.signals import Signals
from overnight.seams import ExecContext
from overnight.store.journal import read_journal
from overnight.store.rundir import RunDir
from overnight.testing import ScriptedExecutor, ScriptedModel, text_answer, usage_dict
from overnight.testing.fakes import Step, advance, model_call, write_file
from tests.helpers.nights import (
    command_task,
    git,
    load_result,
    make_spec,
    resume_night,
    run_night,
)

#: Output-only prices: a call's worst case is exactly max_tokens x $25/M.
OUTPUT_ONLY_PRICES = {
    "fake-opus": {
        "input": 0.0,
        "output": 25.0,
        "cache_read": 0.0,
        "cache_write_5m": 0.0,
        "cache_write_1h": 0.0,
    }
}
QUIET_RUN = {"replan": False, "drift_every": 1000}


def agent_tasks(n: int, verify: str = "true", prefix: str = "a") -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}{i:03d}", "title": f"agent {i}", "brief": f"do part {i}", "verify": verify}
        for i in range(n)
    ]


def raising(exc: BaseException) -> Step:
    def step(_task: Task, _ctx: ExecContext) -> None:
        raise exc

    return step


def branch_subjects(repo: Path, branch: str) -> list[str]:
    return git(repo, "log", "--format=%s", f"main..{branch}").splitlines()


# -- (1) the goal comes first ------------------------------------------------------------------


def test_goal_met_outranks_an_exhausted_budget(repo: Path, tmp_path: Path) -> None:
    tasks = [command_task(f"c{i}", f"echo {i} > c{i}.txt", "true") for i in range(3)]
    # steps = 2 puts the steps line at 1: the first night stops after one task.
    spec = make_spec(repo, predicate="test -f goal-met", tasks=tasks, budget={"steps": 2})
    rd, first = run_night(spec, tmp_path / "run", model=ScriptedModel())
    assert first.stop_reason == "BUDGET_EXHAUSTED:steps"
    # The goal is now met (by someone else); the steps budget is still exhausted.
    # The predicate judges the branch's commit, so the change is committed there.
    (rd.worktree / "goal-met").write_text("yes")
    git(rd.worktree, "add", "goal-met")
    git(rd.worktree, "commit", "-qm", "goal met elsewhere")
    _, result = resume_night(rd.path, model=ScriptedModel())

    assert (result.stop_reason, result.status, result.exit_code) == ("GOAL_MET", "SUCCESS", 0)
    assert result.budgets.steps.used == 1
    assert result.budgets.view()["steps"].exhausted  # the budget alone would have said stop
    assert agrees_with_budgets(result.stop_reason, result.budgets.view())
    assert result.plan.remaining == ["c1", "c2"]
    assert [v.id for v in result.verified] == ["c0"]
    assert branch_subjects(repo, result.branch.name) == ["goal met elsewhere", "c0: task c0"]
    assert load_result(rd.path)["stop_reason"] == "GOAL_MET"


def test_goal_met_outranks_a_refused_reservation_already_on_the_books(
    repo: Path, tmp_path: Path
) -> None:
    """The harness's own loop, with the ledger having refused a call before the first lap."""
    tasks = [command_task(f"c{i}", f"echo {i} > c{i}.txt", "true") for i in range(3)]
    spec = make_spec(repo, usd=1.0, predicate="true", tasks=tasks)
    rd = RunDir(tmp_path / "run")
    rd.path.mkdir()
    goal = Goal(spec.goal)
    branch = "overnight/goal-first"
    state = RunState(
        run_id="goal-first",
        goal_text=goal.text,
        goal_sha=goal.sha256,
        branch=branch,
        base_commit=ws.create_worktree(repo, rd.worktree, branch),
        queue=spec.seed_tasks(),
    )
    clock = FakeClock()
    signals = Signals()
    parts = compose(
        spec,
        rd,
        state,
        clock,
        signals,
        goal=goal,
        expected_goal_sha=goal.sha256,
        model=ScriptedModel(),
    )
    night = Night(night_rules(spec), rd, state, goal, signals, parts)
    try:
        with pytest.raises(BudgetRefused):
            night.ledger.reserve("fake-opus", 10_000, 64_000)  # $1.65 against $1.00
        assert night.ledger.blocked == "money"
        stop = night.drive()
        result = night.finish(stop)
    finally:
        night.close()

    assert stop == Stop(Ending.GOAL_MET)
    assert (result.status, result.exit_code) == ("SUCCESS", 0)
    assert result.budgets.cost_usd.refused_at == pytest.approx(1.65)
    assert result.budgets.cost_usd.at_stop == 0.0
    assert result.plan.remaining == ["c0", "c1", "c2"]
    assert state.laps == 0


# -- (2) the queue drains -------------------------------------------------------------------------


def test_three_command_tasks_drain_with_the_goal_unmet(repo: Path, tmp_path: Path) -> None:
    tasks = [command_task(f"c{i}", f"echo {i} > c{i}.txt", f"test -f c{i}.txt") for i in range(3)]
    spec = make_spec(repo, predicate="test -f never.txt", tasks=tasks, model=False)
    _rd, result = run_night(spec, tmp_path / "run")

    assert result.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"
    assert (result.status, result.exit_code) == ("FAILURE", 3)
    assert result.resumable is False
    assert [v.id for v in result.verified] == ["c0", "c1", "c2"]
    assert result.plan.remaining == []
    assert result.predicate is not None and result.predicate.met is False
    subjects = branch_subjects(repo, result.branch.name)
    assert subjects == ["c2: task c2", "c1: task c1", "c0: task c0"]
    assert agrees_with_budgets(result.stop_reason, result.budgets.view())


# -- (3) the adversarial budget ------------------------------------------------------------------


def adversarial_night(repo: Path, run_dir: Path, **budget: float) -> Any:
    """200 agent tasks, each one call reserved at exactly $1.00 and billed $0.75."""
    spec = make_spec(
        repo,
        usd=28.0,
        tasks=agent_tasks(200),
        budget=budget,
        prices=OUTPUT_ONLY_PRICES,
        run=QUIET_RUN,
    )
    model = ScriptedModel(
        execute=text_answer("did the part", usage_dict(input=300, output=30_000)),
        usage=usage_dict(input=300, output=100),
    )
    executor = ScriptedExecutor(default=[model_call(max_tokens=40_000)])
    rd, result = run_night(spec, run_dir, model=model, executor=executor)
    return rd, result, model, executor


def test_bare_ledger_stops_by_refusal_before_spent_reaches_the_cap(
    repo: Path, tmp_path: Path
) -> None:
    rd, result, model, _ex = adversarial_night(
        repo, tmp_path / "run", finish_at=1.0, enforce_at=1.0
    )

    assert result.stop_reason == "BUDGET_EXHAUSTED:money"
    assert (result.status, result.exit_code) == ("PARTIAL", 2)
    money = result.budgets.cost_usd
    assert money.at_stop == 27.75  # 37 calls at $0.75
    assert money.at_stop < 28.00  # spent never reaches the cap ...
    assert money.refused_at == 28.75  # ... the refusal is what stops the run
    assert (money.limit, money.stop_at, money.enforced_at) == (28.0, 28.0, 28.0)
    assert agrees_with_budgets(result.stop_reason, result.budgets.view())
    # Without the refusal flag the budgets block could not explain this stop.
    unflagged = {**result.budgets.view()}
    unflagged[MONEY] = money.model_copy(update={"refused_at": None}).reading()
    assert not agrees_with_budgets(result.stop_reason, unflagged)

    assert len(result.verified) == 37
    assert result.plan.in_progress == "a037"  # the refused call's task is left for resume
    assert len(result.plan.remaining) == 200 - 38
    assert model.purposes().count("execute") == 37  # the refused call never reached the model
    assert result.spend.total_usd <= 28.0
    assert result.spend.by_purpose["execute"] == 27.75
    assert result.wrapup.source == "model"
    reservations = [r for r in read_journal(rd.spend) if r["kind"] == "reserve"]
    assert len(reservations) == 38  # 37 execute calls and the summary: no record for the refusal


def test_default_bands_stop_at_the_90_percent_band_without_a_refusal(
    repo: Path, tmp_path: Path
) -> None:
    _rd, result, _model, _ex = adversarial_night(repo, tmp_path / "run")

    assert result.stop_reason == "BUDGET_EXHAUSTED:money"
    assert result.exit_code == 2
    money = result.budgets.cost_usd
    assert money.stop_at == pytest.approx(25.20)
    assert money.enforced_at == pytest.approx(25.76)
    assert money.refused_at is None
    assert 25.20 <= money.at_stop <= money.enforced_at
    assert money.at_stop == 25.5  # 34 calls
    assert result.plan.in_progress is None  # the last task finished and was verified
    assert len(result.verified) == 34
    assert agrees_with_budgets(result.stop_reason, result.budgets.view())
    assert result.spend.total_usd <= 28.0


# -- (4) exceptions inside a lap -----------------------------------------------------------------


def test_an_unexpected_exception_is_an_internal_error(repo: Path, tmp_path: Path) -> None:
    spec = make_spec(repo, tasks=agent_tasks(2), run=QUIET_RUN)
    executor = ScriptedExecutor(default=[raising(RuntimeError("goal text mutated"))])
    rd, result = run_night(spec, tmp_path / "run", model=ScriptedModel(), executor=executor)

    assert result.stop_reason == "UNRECOVERABLE_ERROR:internal_error"
    assert (result.status, result.exit_code) == ("FAILURE", 4)
    assert "goal text mutated" in result.message
    assert result.resumable is False
    assert executor.executed == [("a000", 1)]
    assert load_result(rd.path)["exit_code"] == 4


def test_goal_mutated_inside_a_lap_is_not_resumable(repo: Path, tmp_path: Path) -> None:
    spec = make_spec(repo, tasks=agent_tasks(2), run=QUIET_RUN)
    executor = ScriptedExecutor(default=[raising(GoalMutated("goal text mutated"))])
    _rd, result = run_night(spec, tmp_path / "run", model=ScriptedModel(), executor=executor)

    assert result.stop_reason == "UNRECOVERABLE_ERROR:goal_mutated"
    assert result.exit_code == 4
    assert result.resumable is False
    assert result.message == "goal text mutated"


def test_a_model_that_raises_ends_the_run_resumably(repo: Path, tmp_path: Path) -> None:
    def broken(_request: ModelRequest) -> dict[str, Any]:
        raise ConnectionError("provider unreachable")

    spec = make_spec(repo, tasks=agent_tasks(2), run=QUIET_RUN)
    model = ScriptedModel(execute=broken)
    executor = ScriptedExecutor(default=[model_call(max_tokens=1_000)])
    rd, result = run_night(spec, tmp_path / "run", model=model, executor=executor)

    assert result.stop_reason == "UNRECOVERABLE_ERROR:model_error"
    assert result.exit_code == 4
    assert result.resumable is RESUMABLE_BY_CAUSE["model_error"] is True
    assert "provider unreachable" in result.message
    kinds = [r["kind"] for r in read_journal(rd.spend) if r.get("purpose") != "summarize"]
    assert kinds[:2] == ["reserve", "release"]  # the failed call's reservation is released
    assert result.budgets.cost_usd.at_stop == 0.0


def test_a_table_error_inside_a_lap_escapes_the_harness(repo: Path, tmp_path: Path) -> None:
    spec = make_spec(repo, tasks=agent_tasks(1), run=QUIET_RUN)
    executor = ScriptedExecutor(default=[raising(TableError("CLASS lost an ending"))])
    with pytest.raises(TableError, match="CLASS lost an ending"):
        run_night(spec, tmp_path / "run", model=ScriptedModel(), executor=executor)
    assert not (tmp_path / "run" / "result.json").exists()


# -- (5) a stop the tables do not know ----------------------------------------------------------


def test_describe_refuses_a_stop_missing_from_the_class_table() -> None:
    mutated = dict(CLASS)
    del mutated[Ending.DRIFT_DETECTED]
    with pytest.raises(TableError, match="DRIFT_DETECTED"):
        describe(Stop(Ending.DRIFT_DETECTED), classes=mutated)
    # The real table is untouched and still describes it.
    assert describe(Stop(Ending.DRIFT_DETECTED)).outcome is Outcome.FAILURE


def test_classify_exception_reraises_a_table_error() -> None:
    error = TableError("unclassified stop: SOMETHING")
    with pytest.raises(TableError) as info:
        classify_exception(error)
    assert info.value is error


def test_every_run_error_cause_has_a_resumability_decision() -> None:
    soft = {"budget_refused", "interrupted"}
    causes = {cls.cause for cls in _subclasses(RunError)} | {RunError.cause}
    assert causes - soft <= set(RESUMABLE_BY_CAUSE)
    for cause in causes - soft:
        verdict = describe(Stop(Ending.UNRECOVERABLE_ERROR, cause))
        assert verdict.resumable is RESUMABLE_BY_CAUSE[cause]


def _subclasses(cls: type) -> list[type]:
    out: list[type] = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


# -- (6) the tables agree with the endings, both ways ----------------------------------------------


def test_verify_tables_refuses_an_ending_with_no_class() -> None:
    endings = [*Ending, "EXTRA_ENDING"]
    with pytest.raises(TableError, match=r"CLASS has no entry for \['EXTRA_ENDING'\]"):
        verify_tables(endings, {"CLASS": CLASS})


def test_verify_tables_refuses_a_class_entry_no_ending_produces() -> None:
    with pytest.raises(TableError, match=r"entries no ending produces: \['GHOST'\]"):
        verify_tables(Ending, {"CLASS": [*CLASS, "GHOST"]})


def test_verify_tables_refuses_an_ending_listed_twice() -> None:
    with pytest.raises(TableError, match="twice"):
        verify_tables(Ending, {"PRIORITY": [*PRIORITY, Ending.GOAL_MET]})


def test_the_shipped_tables_pass() -> None:
    assert set(ENDING_TABLES) == {"PRIORITY", "CLASS", "EXIT_CODE", "RESUMABLE", "ALERT"}
    verify_tables(Ending, ENDING_TABLES)
    assert len(Ending) == 7


# -- no progress, and the wall clock ---------------------------------------------------------------


def test_five_parked_tasks_in_a_row_end_no_progress_with_more_queued(
    repo: Path, tmp_path: Path
) -> None:
    tasks = [command_task(f"c{i}", f"echo {i} > c{i}.txt", "false") for i in range(7)]
    spec = make_spec(repo, tasks=tasks, model=False, run={"retries": 0})
    _rd, result = run_night(spec, tmp_path / "run")

    assert result.stop_reason == "NO_PROGRESS"
    assert (result.status, result.exit_code) == ("FAILURE", 3)
    assert [p.id for p in result.plan.parked] == ["c0", "c1", "c2", "c3", "c4"]
    assert result.plan.remaining == ["c5", "c6"]
    assert result.verified == []
    assert branch_subjects(repo, result.branch.name) == []
    assert agrees_with_budgets(result.stop_reason, result.budgets.view())


def test_a_slow_night_ends_time_limit_past_92_percent_of_its_hours(
    repo: Path, tmp_path: Path
) -> None:
    spec = make_spec(repo, hours=1.0, tasks=agent_tasks(6), run=QUIET_RUN)
    executor = ScriptedExecutor(default=[advance(1_000.0)])
    clock = FakeClock()
    _rd, result = run_night(
        spec, tmp_path / "run", model=ScriptedModel(), executor=executor, clock=clock
    )

    assert result.stop_reason == "TIME_LIMIT:wall_clock"
    assert (result.status, result.exit_code) == ("PARTIAL", 2)
    seconds = result.budgets.seconds
    assert seconds.limit == 3600.0
    assert seconds.stop_at == pytest.approx(0.92 * 3600)
    assert seconds.used >= seconds.stop_at
    # 3,000 s < 3,312 s; the fourth task crosses the line, and no time is left to verify it:
    # it stays in flight for a resume with more time.
    assert len(result.verified) == 3
    assert result.plan.in_progress == "a003"
    assert result.plan.remaining == ["a004", "a005"]
    assert agrees_with_budgets(result.stop_reason, result.budgets.view())


def test_goal_reached_on_the_last_dollar_is_success_even_if_the_drift_check_is_refused(
    repo: Path, tmp_path: Path
) -> None:
    """The task that meets the goal spends up to 85% of the cap; the drift check due after it
    cannot be afforded. The goal predicate must still run, and the run end GOAL_MET."""
    model = ScriptedModel(execute=text_answer("done", usage_dict(input=100, output=34_000)))
    executor = ScriptedExecutor(
        {"a000": [model_call(max_tokens=34_000), write_file("goal.txt", "reached\n")]}
    )
    spec = make_spec(
        repo,
        usd=1.0,
        predicate="test -f goal.txt",
        tasks=agent_tasks(2),
        run={"drift_every": 1, "replan": False},
    )
    _rd, result = run_night(spec, tmp_path / "run", model=model, executor=executor)

    assert [v.id for v in result.verified] == ["a000"]
    assert result.stop_reason == "GOAL_MET"
    assert (result.status, result.exit_code) == ("SUCCESS", 0)
    assert result.predicate is not None and result.predicate.met
