"""The harness's own model calls: plan, replan, drift judge, closing summary.

Each is built from the goal and the queue only (a fresh context, never an agent's transcript),
and each structured answer has a schema it is validated against.
"""

from __future__ import annotations

import json
from typing import Any

from overnight.core.tasks import Task
from overnight.messages.answers import DRIFT_TOOL, PLAN_TOOL, REPLAN_TOOL, PlannedTask
from overnight.messages.types import ModelRequest, Purpose, ToolSpec

DRIFT_SYSTEM = (
    "You audit an unattended run. You are shown the goal it was given and the tasks it now "
    "intends to do. For each task, ask whether finishing it would measurably move the goal "
    "forward; useful-looking work that does not is off-goal. You do not see the reasons the "
    "tasks were created and must not assume they were good. Write your reasoning first, then "
    "list the off-goal task ids, then a score from 0.0 (every task serves the goal) to 1.0 "
    "(none does)."
)

PLAN_SYSTEM = (
    "You plan an unattended night of work toward one goal. Break the goal into small tasks, "
    "each with a brief an engineer could act on and a verify command: a read-only, idempotent "
    "check that exits 0 when the task is done, 1 when nothing was done, and any other "
    "code when the work is half applied. Most valuable tasks get the highest value."
)

VERIFY_RULES = (
    "A verify command is one program with plain arguments (no shell syntax: no pipes, "
    "redirections, ';', '&&', quotes around several commands or variables) and must start "
    "with one of the allowed commands: {allowed}. Any other verify is refused."
)

REPLAN_SYSTEM = (
    "You revise the queue of an unattended run after its goal check failed. Add tasks only if "
    "they are needed to reach the goal and are not already done, parked or queued. Adding "
    "nothing is a valid answer. Each task needs a brief and a verify command (exit 0 done, "
    "1 not done, other partially applied). Tests and test configuration are not yours to "
    "change unless the goal says so."
)

SUMMARY_SYSTEM = (
    "You write the closing note of an unattended run for the engineer who reads it in the "
    "morning. Use only the facts given. Say what was completed and verified, what was left and "
    "why, and what a person should look at first. At most 200 words, plain text, no tools."
)


def _task_line(t: Task) -> dict[str, Any]:
    body = t.command if t.command is not None else t.brief
    return {"id": t.id, "title": t.title, "work": body, "verify": t.verify}


def _one_turn(
    model: str,
    max_tokens: int,
    purpose: Purpose,
    system: str,
    content: str,
    answer: ToolSpec | None = None,
) -> ModelRequest:
    """A request of one user turn; with ``answer``, the model must call that tool to hand in
    its (structured) answer."""
    return ModelRequest(
        model=model,
        purpose=purpose,
        system=system,
        messages=[{"role": "user", "content": content}],
        tools=[] if answer is None else [answer],
        tool_choice=None if answer is None else answer.name,
        max_tokens=max_tokens,
    )


DRIFT_AUTOMATION = (
    "Tasks of this run that changed what runs by itself (CI workflows, git, shell, editor or "
    "agent configuration, commit or install hooks), landed because the spec allows it or "
    "parked for a person: a goal rarely needs such changes, and queued tasks that continue "
    "them deserve a hard look."
)


def drift_request(
    model: str,
    max_tokens: int,
    goal_text: str,
    queue: list[Task],
    automation: list[dict[str, Any]] | None = None,
) -> ModelRequest:
    """The drift judge's request: the goal, the queue, and (when any task changed one) the
    automation paths the night's tasks changed."""
    queue_json = json.dumps([_task_line(t) for t in queue], indent=1)
    content = f"<original_goal>{goal_text}</original_goal>\n<queue>{queue_json}</queue>"
    if automation:
        rows = json.dumps(automation, indent=1)
        content += f"\n<automation_changed>{DRIFT_AUTOMATION}\n{rows}</automation_changed>"
    return _one_turn(model, max_tokens, "drift", DRIFT_SYSTEM, content, DRIFT_TOOL)


def automation_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The automation rows the drift judge is shown, one line per task, for the record."""
    return [f"{r['id']}: {', '.join(r['paths'])} ({r['outcome']})" for r in rows]


def verify_rules(commands: list[str]) -> str:
    allowed = ", ".join(f"`{c}`" for c in commands) or "(none: no verify can be accepted)"
    return VERIFY_RULES.format(allowed=allowed)


def plan_request(
    model: str, max_tokens: int, goal_text: str, commands: list[str] | None = None
) -> ModelRequest:
    system = f"{PLAN_SYSTEM} {verify_rules(commands or [])}"
    return _one_turn(model, max_tokens, "plan", system, f"<goal>{goal_text}</goal>", PLAN_TOOL)


def replan_request(
    model: str,
    max_tokens: int,
    goal_text: str,
    facts: dict[str, Any],
    commands: list[str] | None = None,
) -> ModelRequest:
    system = f"{REPLAN_SYSTEM} {verify_rules(commands or [])}"
    content = f"<goal>{goal_text}</goal>\n<state>{json.dumps(facts, indent=1)}</state>"
    return _one_turn(model, max_tokens, "replan", system, content, REPLAN_TOOL)


def summary_request(model: str, max_tokens: int, facts: dict[str, Any]) -> ModelRequest:
    content = json.dumps(facts, indent=1)
    return _one_turn(model, max_tokens, "summarize", SUMMARY_SYSTEM, content)


def planned_to_task(p: PlannedTask, origin: str, retries: int) -> Task:
    return Task(
        id=p.id,
        title=p.title,
        brief=p.brief,
        verify=p.verify,
        value=p.value,
        mechanical=p.mechanical,
        retries=retries,
        origin="plan" if origin == "plan" else "replan",
    )
