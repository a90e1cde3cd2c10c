"""``run_command``: run an allowlisted command in the worktree.

The command is checked by ``overnight.tools.shell.check_command`` (no shell syntax, never
git, one of the configured prefixes), and its words are then quoted again one by one before
``/bin/sh`` sees them, so even a character the check missed reaches the program as a
literal: there is no globbing, no variable expansion, no substitution. The model sees a
bounded part of the output; the full output of a long command is kept in the run's artifacts.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from overnight import process
from overnight.core.errors import RunError
from overnight.seams import ToolContext, ToolError, ToolOutcome
from overnight.tools.args import str_arg
from overnight.tools.paths import real_root, tool_places
from overnight.tools.shell import check_command, parse_command


def artifact_name(call_id: str) -> str:
    """A file name for the artifacts of call ``call_id`` (any text)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", call_id).lstrip(".")
    return name[:120] or "call"


def _head_and_tail(
    path: Path, budget: int, place: Callable[[str], str] | None = None
) -> tuple[str, str, int]:
    """The output in ``path`` for the model, with ``place`` applied before it is cut:
    ``(all of it, "", total)`` when it fits in ``budget`` characters, else ``(first quarter,
    last three quarters, total)`` of the budget; ``total`` is the output's length in
    characters."""
    head_budget = budget // 4
    tail_budget = budget - head_budget
    whole: list[str] | None = []
    head = ""
    tail = ""
    total = 0
    with open(path, "rb") as handle:
        for text in process.decoded(handle, place):
            total += len(text)
            if whole is not None:
                whole.append(text)
                if total > budget:
                    whole = None
            if len(head) < head_budget:
                head += text[: head_budget - len(head)]
            tail = (tail + text)[-tail_budget:] if tail_budget else ""
    if whole is not None:
        return "".join(whole), "", total
    return head, tail, total


class RunCommandTool:
    """Runs allowlisted commands in the worktree; see the module docstring for the rules."""

    name = "run_command"
    mutating = True

    def __init__(
        self,
        commands: Sequence[str] = (),
        *,
        timeout_s: float = 300.0,
        max_output_chars: int = 8000,
    ) -> None:
        self.prefixes: list[tuple[str, ...]] = [tuple(parse_command(c)) for c in commands]
        self.timeout_s = timeout_s
        self.max_output_chars = max_output_chars
        allowed = ", ".join(f"`{shlex.join(p)}`" for p in self.prefixes) or "none"
        self.description = (
            "Run one command in the repository root and get its exit code and output (stdout "
            "and stderr together). Only commands that start with one of these are allowed: "
            f"{allowed}. There is no shell: `;`, `&&`, `||`, pipes, redirections, `$VAR`, "
            "`$(...)` and backquotes are refused, and words are passed literally (no globbing, "
            "no variable expansion); quote arguments as in a POSIX shell. git is not "
            "available: overnight commits your work itself. Secrets such as API keys are not "
            f"in the environment. Times out after {timeout_s:g} s (less if the run has less "
            f"time left); output over {max_output_chars} characters is cut in the middle."
        )
        self.input_schema: Mapping[str, Any] = {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The command line, e.g. `pytest -q tests/test_x.py`.",
                },
                "timeout_s": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": f"Seconds before the command is killed (at most {timeout_s:g}).",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        }

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        words = self.check(str_arg(args, "command"))
        timeout = self._timeout(args, ctx)
        stopping = ctx.stop_requested()
        if stopping is not None:
            raise ToolError(f"the run is stopping ({stopping}); the command was not started")
        top = real_root(ctx.root)
        line = shlex.join(words)
        log = ctx.artifacts / f"{artifact_name(ctx.call_id)}.log"
        try:
            confine = ctx.confine()
            result = process.run_command(
                words if confine is not None else line,
                cwd=top,
                timeout_s=timeout,
                env=None if confine is not None else process.scrubbed_env(),
                confine=confine,
                should_stop=ctx.stop_requested,
                log_path=log,
                max_output=self.max_output_chars,
            )
            head, tail, total = _head_and_tail(log, self.max_output_chars, tool_places(ctx))
        except (RunError, OSError) as exc:
            raise ToolError(f"the command could not be run: {exc}") from None

        if result.timed_out:
            status = (
                f"exit code: none; timed out after {timeout:g} s, so the command and every "
                "process it started were killed"
            )
        elif result.interrupted:
            status = "exit code: none; stopped because the run is ending"
        else:
            status = f"exit code {result.exit_code}"
        parts = [f"$ {line}", f"{status} ({result.seconds:.1f} s)"]
        artifact: str | None = None
        cut = total - len(head) - len(tail)
        if cut > 0:
            artifact = str(log)
            body = (
                f"{head}\n[... {cut} of {total} characters cut here; the full output is "
                f"kept in the run's artifacts as {log.name} ...]\n{tail}"
            )
        else:
            body = head
            with contextlib.suppress(OSError):
                log.unlink(missing_ok=True)
        body = body.removesuffix("\n")
        parts.append(body if body else "(no output)")
        return ToolOutcome(
            "\n".join(parts),
            is_error=result.timed_out or result.interrupted,
            artifact=artifact,
            repeat_key="\n".join([f"$ {line}", status, head, tail]),
        )

    def check(self, command: str) -> list[str]:
        """The words of ``command`` if it may run; a ToolError saying why not otherwise."""
        if not self.prefixes:
            parse_command(command)
            raise ToolError("run_command is not enabled: no command is allowed in this run")
        return check_command(command, self.prefixes)

    def _timeout(self, args: Mapping[str, Any], ctx: ToolContext) -> float:
        requested = args.get("timeout_s")
        if requested is None:
            requested = self.timeout_s
        if isinstance(requested, bool) or not isinstance(requested, int | float):
            raise ToolError(f"timeout_s must be a number of seconds, got {requested!r}")
        if not requested > 0:
            raise ToolError(f"timeout_s must be positive, got {requested}")
        timeout = min(float(requested), self.timeout_s, ctx.seconds_left())
        if not timeout > 0:
            raise ToolError("the run has no time left for a command")
        return timeout
