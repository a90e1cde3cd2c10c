"""The harness's own model calls (plan, replan, drift), kept apart from the lap.

``HarnessCalls`` is mixed into ``Night``: the attributes declared below are Night's.
"""

from __future__ import annotations

from typing import Any

from overnight.config.spec import Spec
from overnight.core.drift import DriftVerdict, drift_gate
from overnight.core.errors import InvalidModelOutput
from overnight.core.goal import Goal
from overnight.core.state import RunState
from overnight.core.tasks import ParkedTask, Task
from overnight.models.gateway import ModelGateway
from overnight.models.structured import ask_structured
from overnight.night.prompts import (
    DRIFT_TOOL,
    PLAN_TOOL,
    REPLAN_TOOL,
    PlanAnswer,
    PlannedTask,
    ReplanAnswer,
    drift_request,
    plan_request,
    planned_to_task,
    replan_request,
)
from overnight.seams import TaskExecutor, ToolError
from overnight.store.trace import Trace
from overnight.tools.builtin import check_command, parse_command


class HarnessCalls:
    spec: Spec
    state: RunState
    goal: Goal
    expected_goal_sha: str
    gateway: ModelGateway | None
    executor: TaskExecutor | None
    trace: Trace

    def seconds_used(self) -> float:
        raise NotImplementedError

    def checkpoint(self) -> None:
        raise NotImplementedError

    def verify_prefixes(self) -> list[list[str]]:
        """What a model-written verify may start with: the ``run_command`` prefixes."""
        return [parse_command(c) for c in self.spec.tools.commands]

    def check_verifies(self, tasks: list[PlannedTask]) -> None:
        """A planned task's verify passes the checks ``run_command`` makes, or the answer is
        invalid (asked for again once with the reason, then parked)."""
        prefixes = self.verify_prefixes()
        for t in tasks:
            try:
                check_command(t.verify, prefixes)
            except ToolError as exc:
                raise InvalidModelOutput(f"task {t.id!r}: its verify is refused: {exc}") from exc

    def _model(self) -> tuple[ModelGateway, str, int]:
        assert self.gateway is not None and self.spec.model is not None
        return self.gateway, self.spec.model.name, self.spec.model.max_tokens

    def plan(self) -> None:
        """Seed the queue. An invalid plan is asked for again once, then parked with the
        reason (the run then ends QUEUE_EMPTY_GOAL_UNMET, with the reason in the report)."""
        gateway, name, max_tokens = self._model()
        self.state.planned = True
        try:
            answer = ask_structured(
                gateway.call,
                plan_request(name, max_tokens, self.goal.text, self.spec.tools.commands),
                PlanAnswer,
                PLAN_TOOL.name,
                check=lambda a: self.check_verifies(a.tasks),
            )
        except InvalidModelOutput as exc:
            self.park_planning("plan", exc.detail)
            return
        tasks = [planned_to_task(p, "plan", self.spec.run.retries) for p in answer.tasks]
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

    def should_replan(self) -> bool:
        s = self.state
        return (
            self.spec.run.replan
            and self.gateway is not None
            and self.executor is not None
            and bool(s.queue)
            and not s.goal_met
        )

    def replan(self) -> None:
        gateway, name, max_tokens = self._model()
        s = self.state
        facts: dict[str, Any] = {
            "done": [c.task.id for c in s.completed],
            "parked": [{"id": p.task.id, "reason": p.reason} for p in s.parked],
            "queue": [{"id": t.id, "title": t.title} for t in s.queue],
            "goal_check": (s.last_predicate.detail[-800:] if s.last_predicate else ""),
        }
        request = replan_request(name, max_tokens, self.goal.text, facts, self.spec.tools.commands)
        try:
            answer = ask_structured(
                gateway.call,
                request,
                ReplanAnswer,
                REPLAN_TOOL.name,
                check=lambda a: self.check_verifies(a.add),
            )
        except InvalidModelOutput as exc:
            self.park_planning("replan", exc.detail)
            return
        tasks = [planned_to_task(p, "replan", self.spec.run.retries) for p in answer.add]
        added = s.add_tasks(tasks)
        self.trace.event("decision", decision="replanned", added=[t.id for t in added])

    def drift_check(self) -> None:
        self.goal.assert_intact(self.expected_goal_sha)
        gateway, name, max_tokens = self._model()
        request = drift_request(name, max_tokens, self.goal.text, self.state.queue)
        # Asked again once if invalid; a second invalid verdict ends the run (a safety check
        # that cannot be read is not skipped).
        verdict = ask_structured(gateway.call, request, DriftVerdict, DRIFT_TOOL.name)
        decision = drift_gate(self.state.queue, verdict)
        self.state.apply_drift(verdict, decision, self.seconds_used())
        self.trace.event(
            "decision",
            decision="drift",
            score=verdict.drift_score,
            action=decision.action,
            pruned=[t.id for t in decision.pruned],
        )
        self.checkpoint()
