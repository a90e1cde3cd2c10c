"""Which executor carries out a task: the night asks, the composition decided.

A command task (``command = ...``) is carried out by ``ShellTaskExecutor``: its command run
in the worktree through the context's ``run_shell``, sandboxed as every command the model may
have shaped. An agent task (``brief = ...``) by the spec's executor: the built-in agent, a
CLI agent (``overnight.executors``) or a Python ``TaskExecutor``. The night names none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from overnight.core.tasks import Task
from overnight.seams import ExecContext, ExecResult, TaskExecutor


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
