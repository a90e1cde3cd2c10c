"""CLI agents behind ``TaskExecutor``: Claude Code, Codex CLI, or any CLI named by its command
line, each run headless in the task's worktree, in the sandbox, its model reached only
through the harness's metering proxy (``overnight.executors.runner``).

``check_cli`` finds and checks the CLI at preflight; ``cli_executor`` makes the executor of a
spec's ``[executor]`` section from what it found.
"""

from __future__ import annotations

from pathlib import Path

from overnight.config.spec import ExecutorSpec
from overnight.executors.claude import ClaudeCodeExecutor
from overnight.executors.cli_found import SUPPORTED, CliFound, check_cli
from overnight.executors.codex import CodexExecutor
from overnight.executors.command import CommandExecutor
from overnight.executors.runner import CliExecutor, NoModelAccess, build_prompt


def cli_executor(
    spec: ExecutorSpec,
    found: CliFound | None = None,
    *,
    goal: str = "",
    base_dir: Path | None = None,
) -> CliExecutor:
    """The executor of ``spec`` (a CLI kind), running what ``check_cli`` found (found now,
    relative to ``base_dir``, when not given: ``ConfigError`` when it is missing or not
    supported)."""
    if found is None:
        found = check_cli(spec, Path.cwd() if base_dir is None else base_dir)
    if spec.kind == "claude-code":
        return ClaudeCodeExecutor(spec, found, goal=goal)
    if spec.kind == "codex":
        return CodexExecutor(spec, found, goal=goal)
    if spec.kind == "command":
        return CommandExecutor(spec, found, goal=goal)
    raise ValueError(f"kind {spec.kind!r} is not a CLI agent")


__all__ = [
    "SUPPORTED",
    "ClaudeCodeExecutor",
    "CliExecutor",
    "CliFound",
    "CodexExecutor",
    "CommandExecutor",
    "NoModelAccess",
    "build_prompt",
    "check_cli",
    "cli_executor",
]
