"""An attempt at a task: which executor carries it out, and what that executor is given.

A command task (``command = ...``) is carried out by ``ShellTaskExecutor``: its command run
in the worktree through the context's ``run_shell``, sandboxed as every command the model may
have shaped. An agent task (``brief = ...``) by the spec's executor: the built-in agent, a
CLI agent (``overnight.executors``) or a Python ``TaskExecutor``, chosen by the composition;
the night names none of them. ``Attempts.execute`` hands the chosen one its ``ExecContext``
and reads back what it did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from overnight.core.budget import Ledger
from overnight.core.errors import Interrupted
from overnight.core.state import RunState
from overnight.core.tasks import CommandRun, Task
from overnight.messages.types import ModelRequest, ModelResponse
from overnight.models.gateway import ModelGateway
from overnight.night.commands import NightCommands
from overnight.night.effect_holds import EffectHolds
from overnight.night.signals import Signals
from overnight.night.timer import RunTimer
from overnight.night.verdict import Verdict, Verdicts
from overnight.proxy.access import NightProxy
from overnight.seams import EffectStore, ExecContext, ExecResult, TaskExecutor
from overnight.store.rundir import RunDir
from overnight.store.trace import Trace


class NoShell(RuntimeError):
    """A command task reached an executor context without a way to run commands."""


class ShellTaskExecutor:
    """A command task: its command, run once per attempt, is the whole of its work."""

    def execute(self, task: Task, ctx: ExecContext) -> ExecResult:
        if task.command is None:
            raise ValueError(f"task {task.id} has no command")
        if ctx.run_shell is None:
            raise NoShell(f"no way to run the command of task {task.id}")
        ran = ctx.run_shell(task.command, task.timeout_s, f"{task.id}.{ctx.attempt}")
        return ExecResult(status="finished", command=ran)


@dataclass(frozen=True)
class TaskExecutors:
    """The executors of a night, one per kind of task."""

    agent: TaskExecutor | None
    """Agent tasks; None when the night has no executor for them (no model)."""
    command: TaskExecutor = field(default_factory=ShellTaskExecutor)
    """Command tasks."""

    def for_task(self, task: Task) -> TaskExecutor | None:
        return self.command if task.command is not None else self.agent


def _no_model(request: ModelRequest) -> ModelResponse:
    raise RuntimeError("this night has no model: a command task cannot call one")


@dataclass(frozen=True)
class Attempted:
    """What an executor reported of one attempt (``looping``, ``gave_up``, ...), and the
    command a command task ran."""

    status: str
    command: CommandRun | None = None


@dataclass
class Attempts:
    """Carries out attempts at a night's tasks with their executors."""

    executors: TaskExecutors
    state: RunState
    run_dir: RunDir
    model_name: str
    gateway: ModelGateway | None
    ledger: Ledger
    effects: EffectStore
    holds: EffectHolds
    verdicts: Verdicts
    commands: NightCommands
    proxy: NightProxy | None
    signals: Signals
    timer: RunTimer
    trace: Trace
    trace_context: Callable[[str], dict[str, str]] = lambda _tool: {}
    """The W3C trace context of a tool call's span to come (``NightSpans``), if exported."""
    refused_edits: dict[str, list[str]] = field(default_factory=dict)
    """Per task, the protected paths its agent tried to write (and was refused)."""

    def execute(self, task: Task, attempt: int, earlier: str = "") -> Attempted:
        """Carry the task out with its executor; what the executor reported."""
        executor = self.executors.for_task(task)
        if executor is None:
            self.trace.event("decision", decision="no_executor", task=task.id)
            return Attempted("gave_up")
        outcome = executor.execute(task, self.context(task, attempt, earlier))
        if outcome.command is not None:
            return Attempted(outcome.status, outcome.command)
        self.trace.event(
            "tool_call",
            tool="executor",
            task=task.id,
            status=outcome.status,
            summary=outcome.summary[:500],
        )
        self.state.add_lessons(outcome.lessons)
        if self.signals.requested:
            raise Interrupted(self.signals.requested)
        refused = self.ledger.refusal()
        if refused is not None:
            # A call of the executor's was refused at a budget line (a CLI's, through the
            # proxy): the lap ends as when the built-in agent's call is refused, the task in
            # flight for a resume with a raised budget to judge.
            raise refused
        return Attempted(outcome.status)

    def context(self, task: Task, attempt: int, earlier: str) -> ExecContext:
        """What an executor is given for one attempt at ``task``."""
        gateway, commands, artifacts = self.gateway, self.commands, self.run_dir.artifacts
        return ExecContext(
            workdir=self.run_dir.worktree,
            artifacts=artifacts,
            model=self.model_name,
            attempt=attempt,
            call_model=gateway.call if gateway is not None else _no_model,
            stop_requested=self.signals.check,
            budget_band=gateway.band if gateway is not None else lambda: "free",
            seconds_left=self.timer.seconds_left,
            now=self.timer.seconds_used,
            note=lambda kind, fields: self.trace.event(kind, **{"task": task.id, **fields}),
            lessons=list(self.state.lessons),
            earlier="\n\n".join(x for x in (self.holds.done_before(task), earlier) if x),
            run_id=self.state.run_id,
            effects=self.effects,
            on_refused=self.state.refused_effects.append,
            tokens_affordable=self.tokens_affordable,
            sleep=self.timer.clock.sleep,
            protected=lambda path: self.protection_for(task.id, path),
            confine=commands.tool_confinement,
            trace_context=self.trace_context,
            model_access=None if self.proxy is None else self.proxy.access_for(task.id),
            task_log=artifacts / commands.log_name(f"{task.id}.{attempt}.agent"),
            run_shell=lambda command, timeout_s, stem: commands.run_shell(
                task.id, command, timeout_s, stem
            ),
        )

    def protection_for(self, task_id: str, path: str) -> str | None:
        """Why ``path`` is protected (the agent's write to it is refused), noted per task."""
        rule = self.verdicts.protection.rule_for(path)
        if rule is not None:
            noted = self.refused_edits.setdefault(task_id, [])
            if path not in noted:
                noted.append(path)
        return rule

    def park_reason(self, task: Task, reason: str) -> str:
        """``reason``, and the protected files the task's agent was refused, if any: what
        happened, not only that the task was not done."""
        refused = self.refused_edits.get(task.id)
        if not refused:
            return reason
        shown = ", ".join(refused[:5]) + (
            f" and {len(refused) - 5} more" if len(refused) > 5 else ""
        )
        return f"{reason}; its edits to protected files were refused: {shown}"

    def tokens_affordable(self, model: str) -> int:
        """Money left before the enforcement line, in output tokens of ``model``."""
        return self.ledger.max_output_tokens(model, 0)


def retry_brief(task: Task, attempt: int, verdict: Verdict) -> str:
    """What the next attempt is told of this one: what the check said, or the findings of
    the repository's own checks its change adds."""
    if verdict.gates is not None and not verdict.gates.passed:
        return verdict.gates.brief(task.verify, attempt)
    return (
        f"Attempt {attempt} of this task did not pass the check `{task.verify}`; "
        f"its edits are still in the worktree. The check said:\n{verdict.detail[-1500:]}"
    )
