"""Clean checkouts made ready: exactly a commit's files, then the spec's set-up command
(``[predicate] setup``: a code generator, an in-place build) run in them, sandboxed like the
checks, before anything is judged there. The agent's worktree gets the same set-up when the
night starts and each time it is written afresh from the branch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from overnight.config.spec import PredicateSpec
from overnight.core.evidence import RunReport
from overnight.core.text import clip
from overnight.night.worktree import Worktree
from overnight.process import CommandResult, Confinement, placed_output
from overnight.store.trace import Trace


class NoTimeLeft(Exception):
    """A verify or a predicate that would start, or was cut, at the night's time limit. Its
    task stays IN_PROGRESS: the stop check ends the night ``TIME_LIMIT:wall_clock`` and a
    resume with more time verifies the task (never executes it again)."""


@dataclass(frozen=True)
class RanCommand:
    """A command the harness ran, and the timeout it ran under."""

    result: CommandResult
    timeout_s: float
    cut_at_time_limit: bool
    """It timed out with no time left: the night's clock cut it, not its own timeout."""
    tests: RunReport | None = None
    """What the harness's reporter saw, for a command that runs pytest."""


def ran_fields(ran: RanCommand, confine: Confinement | None) -> dict[str, object]:
    """What the trace says of a command the harness ran."""
    result = ran.result
    return {
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "cut_at_time_limit": ran.cut_at_time_limit,
        "seconds": round(result.seconds, 3),
        "sandboxed": confine is not None,
    }


class RunCheck(Protocol):
    """How the night runs a check: in ``cwd``, bounded by the time left (``clip``), sandboxed
    when ``confine`` is given; ``tests``: with the harness's reporter, ``complete``: as a
    base record."""

    def __call__(
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
    ) -> RanCommand: ...


class SetupFailed(Exception):
    """The set-up command did not succeed in a checkout: what is judged there would not be
    the project as it is meant to run."""


class Checkouts:
    """A night's clean checkouts, set up with the ``predicate``'s set-up command."""

    def __init__(
        self,
        predicate: PredicateSpec,
        worktree: Worktree,
        trace: Trace,
        run: RunCheck,
        confinement: Callable[..., Confinement | None],
        log_name: Callable[[str], str],
    ) -> None:
        self.command = predicate.setup
        self.timeout_s = predicate.setup_timeout_s
        self.worktree = worktree
        self.trace = trace
        self.run = run
        self.confinement = confinement
        self.log_name = log_name

    def clean(self, commit: str | None) -> Path:
        """A fresh checkout of ``commit`` (None: the branch), set up. Raises ``SetupFailed``."""
        where = self.worktree.clean_checkout(commit)
        self.set_up(where, "checkout")
        return where

    def set_up(self, where: Path, place: str) -> None:
        """Run the set-up command in ``where`` (a checkout, or the worktree); nothing when the
        spec names none."""
        if self.command is None:
            return
        ran = self.run(
            self.command,
            self.timeout_s,
            self.log_name(f"setup-{place}"),
            clip=True,
            cwd=where,
            confine=self.confinement(),
        )
        result = ran.result
        self.trace.event(
            "tool_call",
            tool="setup",
            place=place,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            seconds=round(result.seconds, 3),
        )
        if result.exit_code != 0 or result.timed_out:
            said = (
                f"timed out after {ran.timeout_s:g} s"
                if result.timed_out
                else (f"exited {result.exit_code}")
            )
            raise SetupFailed(
                f"the set-up command `{self.command}` {said} in the {place}: "
                f"{clip(placed_output(result, self.worktree.places()), 1500)}".strip()
            )
