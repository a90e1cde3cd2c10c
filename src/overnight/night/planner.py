"""The harness's own model calls: the plan that seeds the queue, the replan that extends it,
and the drift check that compares the queue with the goal no tool can reach.

A ``Planner`` is given the gateway (every call reserved, priced and traced), the run's state
and its goal; it changes the state only through the state's transitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from overnight.config.spec import ModelSpec
from overnight.core.drift import DriftVerdict, drift_gate
from overnight.core.errors import InvalidModelOutput
from overnight.core.goal import Goal
from overnight.core.state import RunState
from overnight.core.tasks import ParkedTask, Task
from overnight.messages.answers import (
    DRIFT_TOOL,
    PLAN_TOOL,
    REPLAN_TOOL,
    PlanAnswer,
    PlannedTask,
    ReplanAnswer,
)
from overnight.models.gateway import EventSink, ModelGateway
from overnight.models.structured import ask_structured
from overnight.night.harness_requests import (
    automation_lines,
    drift_request,
    plan_request,
    planned_to_task,
    replan_request,
)
from overnight.seams import ToolError
from overnight.tools.shell import check_command, parse_command


def verify_prefixes(commands: list[str]) -> list[list[str]]:
    """What a model-written verify may start with: the ``run_command`` prefixes."""
    return [parse_command(c) for c in commands]


def check_verifies(tasks: list[PlannedTask], prefixes: list[list[str]]) -> None:
    """A planned task's verify passes the checks ``run_command`` makes, or the answer is
    invalid (asked for again once with the reason, then parked)."""
    for t in tasks:
        try:
            check_command(t.verify, prefixes)
        except ToolError as exc:
            raise InvalidModelOutput(f"task {t.id!r}: its verify is refused: {exc}") from exc


@dataclass(frozen=True)
class PlanRules:
    """What the planner of a night reads of its spec."""

    model: ModelSpec
    """The ``[model]`` the harness asks: its name and ``max_tokens``."""
    commands: list[str]
    """``[tools] commands``: the prefixes a planned task's verify may start with, which the
    plan and the replan requests name."""
    retries: int
    """``[run] retries``: how many times a planned task is tried again."""
    replan: bool
    """``[run] replan``: whether the queue is extended as it is worked through."""


class Planner:
    """Plan, replan and drift check for one night."""

    def __init__(
        self,
        rules: PlanRules,
        state: RunState,
        goal: Goal,
        expected_goal_sha: str,
        gateway: ModelGateway,
        trace: EventSink,
        seconds_used: Callable[[], float],
    ) -> None:
        self.rules = rules
        self.state = state
        self.goal = goal
        self.expected_goal_sha = expected_goal_sha
        self.gateway = gateway
        self.trace = trace
        self.seconds_used = seconds_used
        self.model = rules.model.name
        self.max_tokens = rules.model.max_tokens
        self.prefixes = verify_prefixes(rules.commands)

    def check_verifies(self, tasks: list[PlannedTask]) -> None:
        check_verifies(tasks, self.prefixes)

    def plan(self) -> None:
        """Seed the queue. An invalid plan is asked for again once, then parked with the
        reason (the run then ends QUEUE_EMPTY_GOAL_UNMET, with the reason in the report)."""
        self.state.planned = True
        try:
            answer = ask_structured(
                self.gateway.call,
                plan_request(self.model, self.max_tokens, self.goal.text, self.rules.commands),
                PlanAnswer,
                PLAN_TOOL.name,
                check=lambda a: self.check_verifies(a.tasks),
            )
        except InvalidModelOutput as exc:
            self.park_planning("plan", exc.detail)
            return
        tasks = [planned_to_task(p, "plan", self.rules.retries) for p in answer.tasks]
        added = self.state.add_tasks(tasks)
        self.trace.event("decision", decision="planned", tasks=[t.id for t in added])

    def park_planning(self, what: str, why: str) -> None:
        marker = Task(
            id=f"{what}.{self.state.laps}",
            title=f"{what} the queue",
            brief=self.goal.text,
            verify="false",
            origin="plan",
        )
        self.state.parked.append(
            ParkedTask(task=marker, reason=f"the {what} answer was invalid twice", detail=why)
        )
        self.trace.event("decision", decision=f"{what}_parked", detail=why)

    def should_replan(self, has_executor: bool) -> bool:
        s = self.state
        return self.rules.replan and has_executor and bool(s.queue) and not s.goal_met

    def replan(self) -> None:
        s = self.state
        facts: dict[str, Any] = {
            "done": [c.task.id for c in s.completed],
            "parked": [{"id": p.task.id, "reason": p.reason} for p in s.parked],
            "queue": [{"id": t.id, "title": t.title} for t in s.queue],
            "goal_check": (s.last_predicate.detail[-800:] if s.last_predicate else ""),
        }
        request = replan_request(
            self.model, self.max_tokens, self.goal.text, facts, self.rules.commands
        )
        try:
            answer = ask_structured(
                self.gateway.call,
                request,
                ReplanAnswer,
                REPLAN_TOOL.name,
                check=lambda a: self.check_verifies(a.add),
            )
        except InvalidModelOutput as exc:
            self.park_planning("replan", exc.detail)
            return
        tasks = [planned_to_task(p, "replan", self.rules.retries) for p in answer.add]
        added = s.add_tasks(tasks)
        self.trace.event("decision", decision="replanned", added=[t.id for t in added])

    def drift_check(self) -> None:
        self.goal.assert_intact(self.expected_goal_sha)
        automation = self.state.automation_touched()
        request = drift_request(
            self.model, self.max_tokens, self.goal.text, self.state.queue, automation
        )
        # Asked again once if invalid; a second invalid verdict ends the run (a safety check
        # that cannot be read is not skipped).
        verdict = ask_structured(self.gateway.call, request, DriftVerdict, DRIFT_TOOL.name)
        decision = drift_gate(self.state.queue, verdict)
        shown = automation_lines(automation)
        self.state.apply_drift(verdict, decision, self.seconds_used(), shown)
        self.trace.event(
            "decision",
            decision="drift",
            score=verdict.drift_score,
            action=decision.action,
            pruned=[t.id for t in decision.pruned],
        )
