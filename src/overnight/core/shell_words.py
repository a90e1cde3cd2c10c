"""Command lines split into words the way a POSIX shell would (quotes and backslashes), with
every piece of shell syntax refused: a command is one program with plain arguments.

Refused outside quotes: ``;``, ``&``, ``|``, ``<``, ``>``, ``(``, ``)``, ``$``, backquotes
and line breaks; inside double quotes: ``$`` and backquotes, which a shell would expand
there. Control characters are refused anywhere.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Sequence

#: Shell operators refused outside quotes, with how the refusal names them.
SHELL_OPERATORS: dict[str, str] = {
    ";": "';' (command separator)",
    "&": "'&' (background job or &&)",
    "|": "'|' (pipe or ||)",
    "<": "'<' (redirection)",
    ">": "'>' (redirection)",
    "(": "'(' (subshell)",
    ")": "')' (subshell)",
    "$": "'$' (variable or command substitution)",
    "`": "'`' (command substitution)",
    "\n": "a line break (second command)",
    "\r": "a carriage return",
}
#: Characters a shell would still expand inside double quotes.
DOUBLE_QUOTE_EXPANSIONS = ("$", "`")


class ShellSyntaxError(ValueError):
    """A command line that is not one program with plain arguments; the message names the
    offending character, an unclosed quote, or an empty command."""


def split_command(command: str) -> list[str]:
    """The words of ``command``; a ``ShellSyntaxError`` when it holds shell syntax."""
    for c in command:
        if c not in "\t\n\r" and (ord(c) < 0x20 or ord(c) == 0x7F):
            raise ShellSyntaxError(
                f"the command contains the control character {c!r}; write plain text only"
            )
    quote: str | None = None
    i = 0
    while i < len(command):
        c = command[i]
        if quote is None:
            if c == "\\":
                i += 2
                continue
            if c in ("'", '"'):
                quote = c
            elif c in SHELL_OPERATORS:
                raise ShellSyntaxError(
                    f"the command contains {SHELL_OPERATORS[c]}; run_command runs one program "
                    "with its arguments and no shell syntax: no ; && || | redirections $VAR "
                    "$(...) or backquotes. Run one command per call and quote arguments that "
                    "contain such characters in single quotes"
                )
        elif quote == "'":
            if c == "'":
                quote = None
        else:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                quote = None
            elif c in DOUBLE_QUOTE_EXPANSIONS:
                raise ShellSyntaxError(
                    f"the command contains {c!r} inside double quotes, where a shell would "
                    "expand it; nothing is expanded here: use single quotes for a literal "
                    f"{c!r}"
                )
        i += 1
    if quote is not None:
        raise ShellSyntaxError(f"the command has an unclosed {quote} quote")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise ShellSyntaxError(f"the command cannot be split into words: {exc}") from None
    if not words:
        raise ShellSyntaxError("the command is empty")
    return words


def is_git_command(words: Sequence[str]) -> bool:
    """Whether ``words`` run git itself (``git``, ``/usr/bin/git``, ``git-lfs``...)."""
    program = posixpath.basename(words[0]) if words else ""
    return program == "git" or program.startswith("git-")
