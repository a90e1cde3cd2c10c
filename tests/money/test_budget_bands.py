"""The money bands: a notice from 70%, no new task from 90%, the wrap-up reserve above 92%.

Every call goes through the real gateway and ledger; the fake model records each request it
receives together with what had been spent before it (the sum of the bills it returned).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from overnight.config.spec import parse_spec
from overnight.core.budget import Price, Usage
from overnight.core.tasks import Task
from overnight.messages.types import ModelRequest, coerce_response
from overnight.night.signals import Signals
from overnight.seams import ExecContext
from overnight.testing import ScriptedExecutor, ScriptedModel, text_answer, tool_answer, usage_dict
from overnight.testing.fakes import model_call
from tests.helpers.nights import git, make_spec, resume_night, run_night, spec_data

OPUS = Price(input=5.0, output=25.0, cache_read=0.5, cache_write_5m=6.25, cache_write_1h=10.0)
OUTPUT_ONLY = Price(input=0.0, output=25.0, cache_read=0.0, cache_write_5m=0.0, cache_write_1h=0.0)
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
NOTICE = "[budget]"


@dataclass
class Seen:
    purpose: str
    spent_before: float
    request: ModelRequest


@dataclass
class RecordingModel:
    """Answers by purpose and keeps every request with the spend that preceded it."""

    price: Price
    answers: dict[str, Any]
    spent: float = 0.0
    seen: list[Seen] = field(default_factory=list)

    def complete(self, request: ModelRequest) -> dict[str, Any]:
        self.seen.append(Seen(request.purpose, self.spent, request))
        answer = self.answers[request.purpose]
        raw: dict[str, Any] = answer(request) if callable(answer) else answer
        self.spent += coerce_response(raw).usage.cost(self.price)
        return raw

    def of(self, purpose: str) -> list[Seen]:
        return [s for s in self.seen if s.purpose == purpose]


def last_block(request: ModelRequest) -> Any:
    content = request.messages[-1]["content"]
    return content[-1] if isinstance(content, list) else {"type": "text", "text": content}


def has_notice(request: ModelRequest) -> bool:
    return last_block(request).get("text", "").startswith(NOTICE)


def mentions_notice(request: ModelRequest) -> bool:
    return NOTICE in request.system or any(NOTICE in str(m) for m in request.messages)


def agent_tasks(n: int, verify: str = "true") -> list[dict[str, Any]]:
    return [
        {"id": f"a{i:02d}", "title": f"agent {i}", "brief": f"do part {i}", "verify": verify}
        for i in range(n)
    ]


def spend_exactly(request: ModelRequest) -> dict[str, Any]:
    """An execute answer that uses every token it was allowed."""
    return text_answer("done", usage_dict(output=request.max_tokens))


# -- 70%: the notice -------------------------------------------------------------------------------


def test_execute_calls_from_70_percent_end_with_a_notice_and_keep_their_system_prompt(
    repo: Path, tmp_path: Path
) -> None:
    small = usage_dict(input=300, output=100)
    model = RecordingModel(
        OPUS,
        {
            "execute": text_answer("done", usage_dict(input=100, output=2_000)),
            "drift": tool_answer(
                "submit_drift_verdict",
                {"reasoning": "on goal", "off_goal_task_ids": [], "drift_score": 0.0},
                small,
            ),
            "replan": tool_answer("submit_replan", {"reasoning": "enough", "add": []}, small),
            "summarize": text_answer("closing note", small),
        },
    )
    spec = make_spec(repo, usd=1.0, tasks=agent_tasks(20), run={"drift_every": 1})
    executor = ScriptedExecutor(default=[model_call(max_tokens=2_000)])
    _rd, result = run_night(spec, tmp_path / "run", model=model, executor=executor)

    assert result.stop_reason == "BUDGET_EXHAUSTED:money"
    executes = model.of("execute")
    below = [s for s in executes if s.spent_before < 0.70]
    above = [s for s in executes if s.spent_before >= 0.70]
    assert len(below) >= 5 and len(above) >= 2

    for s in below:
        assert not mentions_notice(s.request)
        assert s.request.messages[-1]["content"].endswith("\nwork on the task")
    for s in above:
        block = last_block(s.request)
        assert block["type"] == "text" and block["text"].startswith(NOTICE)
        assert "% of the money for this night is spent" in block["text"]
        assert "of $1.00" in block["text"]
        # The notice follows everything else: the original text is untouched before it.
        content = s.request.messages[-1]["content"]
        assert len(content) == 2 and content[0]["type"] == "text"
        assert content[0]["text"].endswith("\nwork on the task")
        assert NOTICE not in content[0]["text"]
        # The system prompt is byte-identical to one sent below the band.
        assert s.request.system.encode() == below[0].request.system.encode()
        assert NOTICE not in s.request.system

    # The harness's own calls never carry a notice, in either band.
    for purpose in ("drift", "replan"):
        calls = model.of(purpose)
        assert any(s.spent_before >= 0.70 for s in calls), purpose
        assert any(s.spent_before < 0.70 for s in calls), purpose
        assert not any(mentions_notice(s.request) for s in calls), purpose
    assert not any(mentions_notice(s.request) for s in model.of("summarize"))


def test_the_notice_never_leaks_into_the_executors_own_conversation(
    repo: Path, tmp_path: Path
) -> None:
    """An executor that resends one conversation on every call must not find notices piling
    up in it: each request carries one notice at most, appended to a copy."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "the task, at length"}]}
    ]

    def resend(_task: Task, ctx: ExecContext) -> None:
        ctx.call_model(
            ModelRequest(
                model=ctx.model,
                purpose="execute",
                system="You carry out one task in a repository.",
                messages=history,
                max_tokens=2_500,
            )
        )

    model = ScriptedModel(execute=spend_exactly, usage=usage_dict(input=200, output=100))
    executor = ScriptedExecutor(default=[resend] * 20)
    spec = make_spec(repo, usd=1.0, tasks=agent_tasks(1), prices=OUTPUT_ONLY_PRICES, run=QUIET_RUN)
    _rd, result = run_night(spec, tmp_path / "run", model=model, executor=executor)

    assert result.stop_reason == "BUDGET_EXHAUSTED:money"  # the 15th call would cross 92%
    executes = [r for r in model.calls if r.purpose == "execute"]
    assert len(executes) == 14
    noticed = [r for r in executes if has_notice(r)]
    assert len(noticed) == 2  # made at $0.75 and $0.8125
    for request in executes:
        assert str(request.messages).count(NOTICE) == (1 if request in noticed else 0)
    assert history == [
        {"role": "user", "content": [{"type": "text", "text": "the task, at length"}]}
    ]


def test_a_plan_call_made_above_70_percent_gets_no_notice(repo: Path, tmp_path: Path) -> None:
    """The first process is told to stop before it plans and spends past 70% on its closing
    summary; the resumed process plans inside the notice band, then executes a task there."""
    data = spec_data(repo, usd=0.70)
    data["model"].update(max_tokens=1_000, summary_max_tokens=20_000)
    data["executor"] = {"target": "unused:unused"}
    spec = parse_spec(data, repo)
    first = RecordingModel(
        OPUS,
        {"summarize": text_answer("closing note", usage_dict(input=500, output=20_000))},
    )
    rd, result = run_night(
        spec,
        tmp_path / "run",
        model=first,
        executor=ScriptedExecutor(),
        signals=Signals(requested="sigterm"),
    )
    assert result.stop_reason == "TIME_LIMIT:sigterm"
    assert result.resumable
    assert [s.purpose for s in first.seen] == ["summarize"]
    carried = result.spend.total_usd
    assert 0.70 <= carried / 0.70 < 0.90

    plan = {
        "reasoning": "one step",
        "tasks": [{"id": "p1", "title": "the step", "brief": "take the step", "verify": "true"}],
    }
    second = RecordingModel(
        OPUS,
        {
            "plan": tool_answer("submit_plan", plan, usage_dict(input=500, output=300)),
            "execute": text_answer("done", usage_dict(input=100, output=100)),
            "summarize": text_answer("closing note", usage_dict(input=500, output=200)),
        },
    )
    executor = ScriptedExecutor(default=[model_call(max_tokens=500)])
    _rd, resumed = resume_night(rd.path, model=second, executor=executor)

    assert resumed.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"
    assert [s.purpose for s in second.seen] == ["plan", "execute", "summarize"]
    planned, executed = second.seen[0], second.seen[1]
    assert (carried + planned.spent_before) / 0.70 >= 0.70
    assert not mentions_notice(planned.request)
    assert has_notice(executed.request)
    assert resumed.spend.total_usd <= 0.70


# -- 90%: no new task ----------------------------------------------------------------------------


def test_from_90_percent_no_new_task_starts_and_the_one_in_flight_is_finished(
    repo: Path, tmp_path: Path
) -> None:
    # Each task: two calls of $0.50 and one of $0.0025 (output-only prices, cap $10).
    steps = [
        model_call(max_tokens=20_000),
        model_call(max_tokens=20_000),
        model_call(100),
        write_task_file,  # a change, so a verified task is a commit
    ]
    model = ScriptedModel(execute=spend_exactly, usage=usage_dict(input=200, output=100))
    executor = ScriptedExecutor(default=steps)
    spec = make_spec(
        repo, usd=10.0, tasks=agent_tasks(12), prices=OUTPUT_ONLY_PRICES, run=QUIET_RUN
    )
    _rd, result = run_night(spec, tmp_path / "run", model=model, executor=executor)

    assert result.stop_reason == "BUDGET_EXHAUSTED:money"
    money = result.budgets.cost_usd
    assert money.refused_at is None  # stopped by the band, not by a refusal
    assert money.stop_at == pytest.approx(9.0)
    assert money.at_stop == pytest.approx(9 * 1.0025)
    # The ninth task crossed 90% on its second call, made its third call anyway, and was
    # verified and committed; nothing after it started.
    executes = [r for r in model.calls if r.purpose == "execute"]
    assert len(executes) == 27
    assert "no new task will start" in last_block(executes[-1])["text"]
    assert "no new task" not in str(executes[-2].messages)
    assert [v.id for v in result.verified] == [f"a{i:02d}" for i in range(9)]
    assert result.plan.in_progress is None
    assert result.plan.remaining == ["a09", "a10", "a11"]
    assert [t for t, _attempt in executor.executed] == [f"a{i:02d}" for i in range(9)]
    subjects = git(repo, "log", "--format=%s", f"main..{result.branch.name}").splitlines()
    assert subjects[0] == "a08: agent 8"


def write_task_file(task: Task, ctx: ExecContext) -> None:
    (ctx.workdir / f"{task.id}.txt").write_text(task.title + "\n")


# -- 92% and above: the wrap-up reserve ---------------------------------------------------------


def test_the_summary_is_paid_from_the_reserve_after_spend_reached_the_enforcement_line(
    repo: Path, tmp_path: Path
) -> None:
    # Four calls of $5.75 bring spend to exactly $23.00: the enforcement line of a $25 cap.
    model = ScriptedModel(
        execute=spend_exactly,
        summarize=lambda r: text_answer("closing note", usage_dict(input=900, output=500)),
    )
    executor = ScriptedExecutor(default=[model_call(max_tokens=230_000)])
    spec = make_spec(repo, usd=25.0, tasks=agent_tasks(6), prices=OUTPUT_ONLY_PRICES, run=QUIET_RUN)
    _rd, result = run_night(spec, tmp_path / "run", model=model, executor=executor)

    money = result.budgets.cost_usd
    assert result.stop_reason == "BUDGET_EXHAUSTED:money"
    assert money.enforced_at == pytest.approx(23.0)
    assert money.at_stop == pytest.approx(money.enforced_at)
    assert money.used == result.spend.total_usd  # the summary included
    assert money.refused_at is None
    assert result.wrapup.source == "model"
    assert result.wrapup.cost_usd == pytest.approx(500 * 25 / 1e6)
    assert result.partial_output == "closing note"
    assert money.enforced_at < result.spend.total_usd <= 25.0
    assert result.spend.by_purpose["summarize"] == pytest.approx(result.wrapup.cost_usd)


def test_a_failing_summary_call_falls_back_to_the_structured_rendering(
    repo: Path, tmp_path: Path
) -> None:
    def down(_request: ModelRequest) -> dict[str, Any]:
        raise RuntimeError("summary service down")

    tasks = [
        {"id": "c0", "title": "first", "command": "echo 0 > c0.txt", "verify": "test -f c0.txt"},
        {"id": "c1", "title": "second", "command": "true", "verify": "false", "retries": 0},
        {"id": "c2", "title": "third", "command": "echo 2 > c2.txt", "verify": "test -f c2.txt"},
        {"id": "c3", "title": "fourth", "command": "true", "verify": "exit 3"},
    ]
    model = ScriptedModel(summarize=down)
    spec = make_spec(repo, tasks=tasks, run={"replan": False})
    _rd, result = run_night(spec, tmp_path / "run", model=model)

    assert result.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"
    assert result.wrapup.source == "structured"
    assert result.wrapup.error is not None and "summary service down" in result.wrapup.error
    text = result.partial_output
    assert "Verified and committed: c0 (" in text and ", c2 (" in text
    assert "c1: not done after 1 attempt(s)" in text
    assert "c3: verify reports a partially applied state" in text
    assert "QUEUE_EMPTY_GOAL_UNMET" in text
    assert model.purposes() == ["summarize"]
    assert result.wrapup.cost_usd == 0.0


def test_a_reserve_too_small_for_the_summary_falls_back_without_crossing_the_cap(
    repo: Path, tmp_path: Path
) -> None:
    model = ScriptedModel(
        execute=text_answer("done", usage_dict(input=100, output=400)),
        summarize="a summary that should never be asked for",
    )
    executor = ScriptedExecutor(default=[model_call(max_tokens=400)])
    spec = make_spec(repo, usd=0.02, tasks=agent_tasks(3), run=QUIET_RUN)
    _rd, result = run_night(spec, tmp_path / "run", model=model, executor=executor)

    assert result.stop_reason == "BUDGET_EXHAUSTED:money"
    assert result.wrapup.source == "structured"
    assert result.wrapup.error is not None and "BudgetRefused" in result.wrapup.error
    assert "summarize" not in model.purposes()  # refused before the call was made
    assert result.spend.total_usd == pytest.approx(Usage(input=100, output=400).cost(OPUS))
    assert result.spend.total_usd <= 0.02
    assert "Verified and committed: a00 (" in result.partial_output
    assert "Not started: a02." in result.partial_output
    assert "Left in flight (resume verifies it): a01." in result.partial_output


def test_a_tiny_cap_with_no_model_spend_still_falls_back(repo: Path, tmp_path: Path) -> None:
    tasks = [{"id": "c0", "title": "only", "command": "true", "verify": "true"}]
    model = ScriptedModel()
    spec = make_spec(repo, usd=0.005, tasks=tasks)
    _rd, result = run_night(spec, tmp_path / "run", model=model)

    assert result.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"
    assert result.wrapup.source == "structured"
    assert model.calls == []
    assert result.spend.total_usd == 0.0
    assert "Verified and committed: c0 (" in result.partial_output
