"""The billing night end to end: the CLI as a real process, the billing service as another,
real git, a real SQLite ledger. The money cap ends the night between the email and the
ticket note; a resume finishes it; a second delivery of the same night is refused by the
ledger; a run killed after a confirmed refund replays it instead of calling again."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.effects.billing import (
    ALL_TASKS,
    CUSTOMER,
    ORDER,
    effect_rows,
    make_workspace,
    night_env,
    posts,
    result_of,
    running_service,
)
from tests.helpers.kills import (
    kill_everything,
    kill_marked,
    overnight,
    run_cli,
    start_cli,
    wait_for,
)

DONE_BEFORE_CAP = ["verify_charge", "issue_refund", "notify_customer"]


def trace_of(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "trace.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def review(run_dir: Path, env: dict[str, str], cwd: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        overnight("review", "--runs", run_dir, "--json"),
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    items: list[dict[str, Any]] = json.loads(out.stdout)
    return items


def test_the_cap_fires_after_the_refund_and_the_email_and_a_resume_finishes(
    tmp_path: Path,
) -> None:
    workspace = make_workspace(tmp_path)
    run = tmp_path / "run"
    with running_service(tmp_path / "state.json") as service:
        env, mark = night_env(service.url)
        try:
            code = run_cli(
                overnight("run", workspace / "night.toml", "--run-dir", run), env, tmp_path
            )
            assert code == 2, (run / "trace.jsonl").read_text()[-3000:]
            r = result_of(run)
            assert r["stop_reason"] == "BUDGET_EXHAUSTED:money" and r["resumable"] is True
            assert r["plan"]["done"] == DONE_BEFORE_CAP  # in the order they ran
            assert r["plan"]["remaining"] == ["write_ticket_note", "close_ticket"]
            assert r["plan"]["in_progress"] is None and r["plan"]["parked"] == []
            # The arithmetic in night.toml: three tasks at $0.009075, over the $0.025 finish
            # line, and no call refused on the way (the stop fell between tasks).
            money = r["budgets"]["cost_usd"]
            assert money["at_stop"] == pytest.approx(0.027225)
            assert money["stop_at"] == pytest.approx(0.025) and money["refused_at"] is None

            state = service.state()
            [refund], [email] = state["refunds"], state["emails"]
            assert state["notes"] == [] and state["closed"] == []
            by_tool = {e["tool"]: e for e in r["effects"]}
            assert sorted(by_tool) == ["issue_refund", "send_email"]
            assert all(
                e["state"] == "confirmed" and e["run_id"] == r["run_id"] for e in r["effects"]
            )
            assert by_tool["issue_refund"]["detail"]["id"] == refund["id"]
            assert by_tool["issue_refund"]["task_key"] == f"{ORDER}:refund"
            assert by_tool["issue_refund"]["key"] == refund["idempotency_key"]
            assert by_tool["send_email"]["detail"]["id"] == email["id"]
            assert by_tool["send_email"]["task_key"] == f"{CUSTOMER}:refund_issued"

            report = subprocess.run(
                overnight("report", run), env=env, capture_output=True, text=True, check=True
            ).stdout
            assert "External effects (2)" in report and refund["id"] in report
            assert review(run, env, tmp_path) == []  # a clean budget stop needs no person

            code = run_cli(overnight("resume", run, "--usd", "0.15", "--quiet"), env, tmp_path)
            assert code == 0, (run / "trace.jsonl").read_text()[-3000:]
        finally:
            kill_marked(mark)
        r = result_of(run)
        assert r["stop_reason"] == "GOAL_MET" and r["plan"]["done"] == ALL_TASKS
        state = service.state()
        assert [x["id"] for x in state["refunds"]] == [refund["id"]]
        assert [x["id"] for x in state["emails"]] == [email["id"]]
        assert len(posts(state, "/refunds")) == 1 and len(posts(state, "/emails")) == 1
        assert len(state["notes"]) == 1 and state["tickets"]["88231"]["status"] == "closed"
        assert [e["tool"] for e in r["effects"]] == [
            "issue_refund",
            "send_email",
            "write_ticket_note",
            "close_ticket",
        ]
        assert {e["state"] for e in r["effects"]} == {"confirmed"}


def deliver_twice(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The same night as two fresh runs (a queue's redelivery), one ledger between them."""
    workspace = make_workspace(tmp_path)
    with running_service(tmp_path / "state.json") as service:
        env, mark = night_env(service.url)
        try:
            night = workspace / "night.toml"
            for name in ("first", "second"):
                code = run_cli(overnight("run", night, "--run-dir", tmp_path / name), env, tmp_path)
                assert code == 2, (tmp_path / name / "trace.jsonl").read_text()[-3000:]
        finally:
            kill_marked(mark)
        state = service.state()
    return result_of(tmp_path / "first"), result_of(tmp_path / "second"), state


def test_a_second_delivery_is_refused_by_the_ledger(tmp_path: Path) -> None:
    first, second, state = deliver_twice(tmp_path)
    assert len(state["refunds"]) == 1 and len(state["emails"]) == 1
    assert len(posts(state, "/refunds")) == 1 and len(posts(state, "/emails")) == 1
    [refund] = state["refunds"]
    assert refund["idempotency_key"].startswith(first["run_id"] + ":")

    # The second run did not crash: it ended as the first did, the refund task verified
    # against the provider (the refund exists), nothing of its own was written to the
    # ledger, and its result reports the refusals (state "refused", naming the first run).
    assert second["stop_reason"] == "BUDGET_EXHAUSTED:money"
    assert second["plan"]["done"] == DONE_BEFORE_CAP
    assert second["run_id"] != first["run_id"]
    rows = effect_rows(tmp_path / "billing-effects.sqlite")
    assert {r.run_id for r in rows} == {first["run_id"]}
    assert {e["state"] for e in second["effects"]} == {"refused"}
    assert {e["earlier"]["run_id"] for e in second["effects"]} == {first["run_id"]}

    # What the model of the second run was told when it asked for the refund.
    trace = trace_of(tmp_path / "second")
    refused = [e for e in trace if e.get("kind") == "tool_call" and e.get("tool") == "issue_refund"]
    assert [e["error"] for e in refused] == [True]
    said = [
        e["text"]
        for e in trace
        if e.get("kind") == "model_call" and "issue_refund did not go through" in e.get("text", "")
    ]
    assert len(said) == 1
    assert "refused" in said[0] and f"{ORDER}:refund" in said[0] and first["run_id"] in said[0]
    assert "send_email did not go through: refused" in json.dumps(trace)


def test_the_refusal_is_in_the_second_runs_result(tmp_path: Path) -> None:
    first, second, _state = deliver_twice(tmp_path)
    refusals = [e for e in second["effects"] if e.get("task_key") == f"{ORDER}:refund"]
    assert refusals and first["run_id"] in json.dumps(refusals)


HANGING_MODEL = '''
"""The billing model for a task with two effects: it hangs (until killed) on the call after
the refund, once; it logs every execute request it answers."""

import json
import os
import time
from pathlib import Path

from overnight.messages.types import TextBlock, ToolUseBlock
from refund_model import CALLS, EARLIER, BillingModel, _last_tool_result, _task_and_step

PLAN = [CALLS["issue_refund"], CALLS["notify_customer"]]


class TwoEffects(BillingModel):
    def answer(self, request):
        if request.purpose != "execute":
            return super().answer(request)
        task_id, step, first = _task_and_step(request)
        last = _last_tool_result(request)
        with open(os.environ["REQUEST_LOG"], "a") as log:
            log.write(json.dumps({"step": step, "first": first, "last": last}) + "\\n")
        marker = Path(os.environ["HANG_MARKER"])
        if step == 1 and not marker.exists():
            marker.write_text(str(os.getpid()))
            time.sleep(3600)  # the night is killed here, after the refund was confirmed
        plan = list(PLAN)
        if self.heed_earlier and EARLIER in first and "issue_refund(" in first:
            plan = plan[1:]
        if step < len(plan):
            tool, args = plan[step]
            return [ToolUseBlock(id=f"toolu_{step}_{self.calls}", name=tool, input=args)], "act"
        return [TextBlock(text="Refunded order 4471 and emailed the customer.")], "report"


model = TwoEffects(heed_earlier=os.environ.get("HEED_EARLIER") == "1")
'''

COUNTED_TOOLS = '''
"""The example's refund tool, counting every time it is really called."""

import os

import billing_tools


def issue_refund(args, idempotency_key):
    with open(os.environ["TOOL_LOG"], "a") as log:
        log.write(f"{idempotency_key}\\n")
    return billing_tools.issue_refund(args, idempotency_key)
'''


def two_effects_night(spec: dict[str, Any]) -> None:
    spec["tasks"] = [
        {
            "id": "refund_and_notify",
            "title": "refund order 4471 and tell the customer",
            "brief": "Refund order 4471 in full (2400 cents) with issue_refund, then send "
            f"{CUSTOMER} the refund_issued email with send_email. Each once.",
            "verify": "python3 scripts/check.py refund && python3 scripts/check.py email",
        }
    ]
    spec["predicate"]["command"] = (
        "python3 scripts/check.py refund && python3 scripts/check.py email"
    )
    spec["model"]["target"] = "hanging_model:model"
    spec["budget"] = {"usd": 1.0, "hours": 0.25}
    for tool in spec["tools"]["external"]:
        if tool["name"] == "issue_refund":
            tool["target"] = "counted_tools:issue_refund"


@pytest.mark.parametrize(
    "heed", [False, True], ids=["model_repeats_the_call", "model_heeds_the_note"]
)
def test_a_confirmed_refund_is_not_called_again_after_a_kill(tmp_path: Path, heed: bool) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "hanging_model.py").write_text(HANGING_MODEL)
    (lib / "counted_tools.py").write_text(COUNTED_TOOLS)
    workspace = make_workspace(tmp_path, two_effects_night)
    run, marker = tmp_path / "run", tmp_path / "hung"
    requests_log, tool_log = tmp_path / "requests.jsonl", tmp_path / "tool.log"
    with running_service(tmp_path / "state.json") as service:
        env, mark = night_env(service.url, lib)
        env |= {
            "HANG_MARKER": str(marker),
            "REQUEST_LOG": str(requests_log),
            "TOOL_LOG": str(tool_log),
            "HEED_EARLIER": "1" if heed else "0",
        }
        proc = start_cli(
            overnight("run", workspace / "night.toml", "--run-dir", run), env, tmp_path
        )
        try:
            wait_for(marker.exists, 60, "the model to hang after the refund")
            [row] = effect_rows(tmp_path / "billing-effects.sqlite")
            assert (row.tool, row.state) == ("issue_refund", "confirmed")
            kill_everything(proc, mark)  # SIGKILL: no result, the task left in flight
            assert not (run / "result.json").exists()
            code = run_cli(overnight("resume", run, "--quiet"), env, tmp_path)
            assert code == 0, (run / "trace.jsonl").read_text()[-3000:]
        finally:
            if proc.poll() is None:
                kill_everything(proc, mark)
            kill_marked(mark)
        state = service.state()

    # The tool function ran once; the service saw one POST /refunds, and one email.
    assert tool_log.read_text().splitlines() == [row.step_key]
    assert len(posts(state, "/refunds")) == 1 and len(state["refunds"]) == 1
    assert len(state["emails"]) == 1
    r = result_of(run)
    assert r["stop_reason"] == "GOAL_MET" and r["plan"]["done"] == ["refund_and_notify"]
    assert r["resumes"] == 1
    assert [(e["tool"], e["state"]) for e in r["effects"]] == [
        ("issue_refund", "confirmed"),
        ("send_email", "confirmed"),
    ]
    assert r["effects"][0]["detail"]["id"] == state["refunds"][0]["id"]

    # The resumed execution was told what was done; what it then did depends on the model.
    seen = [json.loads(line) for line in requests_log.read_text().splitlines()]
    resumed = seen[2:]  # the first process answered step 0 and hung at step 1
    assert all("Already done in an earlier attempt: issue_refund(" in s["first"] for s in resumed)
    assert state["refunds"][0]["id"] in resumed[0]["first"]
    results = [str(s["last"]["content"]) for s in resumed if s["last"] is not None]
    replays = [c for c in results if "the tool was not called again" in c]
    if heed:
        assert replays == []  # it did not ask again
    else:
        [replay] = replays  # it asked again and got the recorded answer
        assert state["refunds"][0]["id"] in replay
