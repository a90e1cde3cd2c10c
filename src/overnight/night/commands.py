"""The commands a night runs: a command task's command, the checks (a verify, the predicate,
a base record, a set-up) and the agent's ``run_command``, each sandboxed as the night's policy
says, bounded by the time left, logged in the run's artifacts under a name no earlier process
used, and its process group noted so that a process killed outright has it ended by the next.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from overnight.core.errors import Interrupted
from overnight.core.state import RunState
from overnight.core.tasks import CommandRun
from overnight.night.checkouts import NoTimeLeft, RanCommand, ran_fields
from overnight.night.signals import Signals
from overnight.night.testrun import Reporter, check_placement, pytest_evidence, with_check_additions
from overnight.process import (
    CommandResult,
    Confinement,
    end_orphaned_group,
    process_identity,
    run_command,
)
from overnight.sandbox.policy import SandboxPolicy
from overnight.store.atomic import private_dir
from overnight.store.rundir import RunDir
from overnight.store.trace import Trace


class NightCommands:
    """How one night runs commands (see the module docstring). ``pytest_plugins``: the
    plugins a check that runs pytest loads (``[predicate] pytest_plugins``)."""

    def __init__(
        self,
        pytest_plugins: list[str],
        run_dir: RunDir,
        state: RunState,
        sandbox: SandboxPolicy,
        signals: Signals,
        trace: Trace,
        seconds_left: Callable[[], float],
    ) -> None:
        self.pytest_plugins = pytest_plugins
        self.run_dir = run_dir
        self.state = state
        self.sandbox = sandbox
        self.signals = signals
        self.trace = trace
        self.seconds_left = seconds_left
        sandbox.record = self.count

    def run_shell(self, task_id: str, command: str, timeout_s: float, log_stem: str) -> CommandRun:
        """A command task's command, in the worktree, sandboxed once the model has worked."""
        confine = self.confinement()
        ran = self.run(
            command,
            timeout_s,
            self.log_name(log_stem),
            clip=True,
            cwd=self.run_dir.worktree,
            confine=confine,
        )
        result = ran.result
        self.trace.event("tool_call", tool="command", task=task_id, **ran_fields(ran, confine))
        return CommandRun(
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            timeout_s=round(ran.timeout_s, 3),
            seconds=round(result.seconds, 3),
            log=str(result.log_path) if result.log_path else None,
        )

    def confinement(self, *, model_written: bool = False, tool: bool = False) -> Confinement | None:
        return self.sandbox.confinement(
            agent_worked=self.state.agent_worked, model_written=model_written, tool=tool
        )

    def tool_confinement(self) -> Confinement | None:
        """The agent's ``run_command``: sandboxed, with the worktree's layout on the path."""
        confine = self.confinement(tool=True)
        return None if confine is None else with_check_additions(confine, [self.run_dir.worktree])

    def count(self, sandboxed: bool) -> None:
        self.state.count_command(sandboxed=sandboxed)

    def run(
        self,
        command: str | list[str],
        timeout_s: float,
        log: str,
        *,
        clip: bool,
        cwd: Path,
        confine: Confinement | None,
        tests: bool = False,
        complete: bool = False,
    ) -> RanCommand:
        """Run a command in ``cwd``, sandboxed when ``confine`` is given, with the checkout's
        layout on ``PYTHONPATH`` (``overnight.night.testrun``); ``tests``: a pytest command,
        run with the harness's reporter. ``clip`` bounds it by the time left: it is not
        started when none is left (``NoTimeLeft``)."""
        if clip:
            left = self.seconds_left()
            if left <= 0:
                raise NoTimeLeft("no time was left to start a command")
            timeout_s = min(timeout_s, left)
        private_dir(self.run_dir.artifacts)
        plugins = self.pytest_plugins
        evidence = pytest_evidence(plugins, complete=complete) if tests else None
        with evidence or contextlib.nullcontext() as reporter:
            result = self._run_with(command, timeout_s, log, cwd, confine, reporter)
            seen = reporter.read() if reporter is not None else None
        if result.interrupted:
            raise Interrupted(self.signals.requested or "signal")
        cut = clip and result.timed_out and self.seconds_left() <= 0
        return RanCommand(result, timeout_s, cut, seen)

    def _run_with(
        self,
        command: str | list[str],
        timeout_s: float,
        log: str,
        cwd: Path,
        confine: Confinement | None,
        reporter: Reporter | None,
    ) -> CommandResult:
        confine, env = check_placement(confine, [cwd], reporter)
        try:
            return run_command(
                command,
                cwd=cwd,
                timeout_s=timeout_s,
                env=env,
                confine=confine,
                should_stop=self.signals.check,
                log_path=self.run_dir.artifacts / log,
                on_spawn=self.note_command_group,
                pass_fds=(reporter.fd,) if reporter is not None else (),
            )
        finally:
            self.run_dir.command_group.unlink(missing_ok=True)

    def log_name(self, stem: str, suffix: str = ".log") -> str:
        """``stem + suffix`` in the artifacts, or, when an earlier process of the run already
        wrote that file, the first ``stem-N + suffix`` that is free: no log is overwritten."""
        name, n = f"{stem}{suffix}", 1
        while (self.run_dir.artifacts / name).exists():
            n += 1
            name = f"{stem}-{n}{suffix}"
        return name

    def note_command_group(self, pgid: int) -> None:
        """Remember the running command's process group: if this process is killed outright,
        the group outlives it, and the next process ends it (``end_leftover_command``).
        Best effort: a note that cannot be written (a full disk) must not stop the command."""
        with contextlib.suppress(OSError):
            self.run_dir.command_group.write_text(f"{pgid} {process_identity(pgid) or ''}\n")

    def end_leftover_command(self) -> None:
        """A process killed with kill -9 cannot end the command it was running: end it now,
        before the task it belongs to is verified, so that nothing runs behind the verify."""
        path = self.run_dir.command_group
        try:
            pgid, _, identity = path.read_text().strip().partition(" ")
            ended = bool(identity) and end_orphaned_group(int(pgid), identity)
        except (OSError, ValueError):
            return
        if ended:
            self.trace.event("decision", decision="ended_leftover_command", pgid=int(pgid))
        path.unlink(missing_ok=True)
