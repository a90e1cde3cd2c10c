"""What a verify's exit says about a task, in the lap and on resume (where the task that was in
flight is verified, never executed again).

Four outcomes. ``partially_applied`` is the one that goes to a human as a half-done task;
``could_not_run`` says the check itself never ran (a configuration problem of the task), so
its answer says nothing about the work.

The mapping of an exit code:

- 0: done; 1: not done (nothing happened);
- 126 (found but not executable) and 127 (command not found), whatever the command: could not
  run;
- 4 (usage error) and 5 (no tests collected), when the command runs pytest: could not run;
- anything else, a signal, or no answer (the harness cut it at its timeout): partially
  applied.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Sequence
from enum import StrEnum


class VerifyOutcome(StrEnum):
    DONE = "done"
    NOT_DONE = "not_done"
    PARTIAL = "partially_applied"
    CANNOT_RUN = "could_not_run"


#: Exit codes of a shell that could not start the command, for any command.
SHELL_CANNOT_RUN: dict[int, str] = {
    126: "found but not executable",
    127: "command not found",
}

#: Exit codes pytest uses when it ran no test at all.
PYTEST_CANNOT_RUN: dict[int, str] = {
    4: "pytest usage error",
    5: "pytest collected no tests",
}


def runs_pytest(command: str | Sequence[str] | None) -> bool:
    """Whether ``command`` starts pytest: ``pytest ...``, ``py.test ...``, ``python -m pytest
    ...`` (any python), possibly after ``env`` assignments."""
    if command is None:
        return False
    if isinstance(command, str):
        try:
            words = shlex.split(command)
        except ValueError:
            return False
    else:
        words = list(command)
    while words and ("=" in words[0] and not words[0].startswith("=")):
        words = words[1:]  # VAR=value prefixes
    if words and posixpath.basename(words[0]) == "env":
        words = [w for w in words[1:] if "=" not in w]
    if not words:
        return False
    program = posixpath.basename(words[0])
    if program in ("pytest", "py.test"):
        return True
    if program.startswith("python"):
        rest = words[1:]
        return len(rest) >= 2 and rest[0] == "-m" and rest[1] in ("pytest", "py.test")
    return False


def cannot_run_reason(
    exit_code: int | None, command: str | Sequence[str] | None = None
) -> str | None:
    """Why a check with this exit could not run (``"exit 127: command not found"``), or None
    when the exit is a verdict."""
    if exit_code is None:
        return None
    why = SHELL_CANNOT_RUN.get(exit_code)
    if why is None and runs_pytest(command):
        why = PYTEST_CANNOT_RUN.get(exit_code)
    return None if why is None else f"exit {exit_code}: {why}"


def outcome_of_exit(
    exit_code: int | None, command: str | Sequence[str] | None = None
) -> VerifyOutcome:
    """0 done, 1 not done, a check that could not run (see the module's mapping), anything
    else or no answer partially applied."""
    if exit_code == 0:
        return VerifyOutcome.DONE
    if exit_code == 1:
        return VerifyOutcome.NOT_DONE
    if cannot_run_reason(exit_code, command) is not None:
        return VerifyOutcome.CANNOT_RUN
    return VerifyOutcome.PARTIAL
