"""The check of a model-written command (a ``run_command`` call, a planned task's verify)
against the run's allowed prefixes.

A command runs no shell syntax at all: it is split into words by
``overnight.core.shell_words.split_command``, which refuses every shell operator, and it runs only
if its first words equal one of the configured prefixes. ``git`` never runs, whatever the
configuration says: the repository's history belongs to overnight.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from overnight.core.shell_words import ShellSyntaxError, is_git_command, split_command
from overnight.seams import ToolError


def parse_command(command: str) -> list[str]:
    """Split ``command`` into words, refusing shell syntax.

    Raises ``ToolError`` naming the offending character, an unclosed quote, or an empty
    command.
    """
    try:
        return split_command(command)
    except ShellSyntaxError as exc:
        raise ToolError(str(exc)) from None


def check_command(command: str, prefixes: Sequence[Sequence[str]]) -> list[str]:
    """The words of ``command`` if it is one allowed program with plain arguments: no shell
    syntax, no control characters, never git, and starting with one of ``prefixes`` (word by
    word). A ``ToolError`` saying why not otherwise."""
    words = parse_command(command)
    if is_git_command(words):
        raise ToolError(
            "git is not available: overnight manages version control itself (it commits "
            "your work after each task and reverts a failed one). Leave the history alone "
            "and change the files; use list_files, read_file and search_text to look around"
        )
    if not any(tuple(words[: len(p)]) == tuple(p) for p in prefixes):
        if not prefixes:
            raise ToolError("no command is allowed in this run ([tools] commands is empty)")
        allowed = ", ".join(shlex.join(p) for p in prefixes)
        raise ToolError(
            f"{words[0]!r} is not an allowed command here; commands must start with one "
            f"of: {allowed}"
        )
    return words
