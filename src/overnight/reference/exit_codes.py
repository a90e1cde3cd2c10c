"""The reference page of exit codes, read from the tables that decide them: the seven endings
(``overnight.core.endings``), the command line's own codes, and each command's line
(``overnight.cli.parser.EXITS``)."""

from __future__ import annotations

from overnight.cli.handlers import EXIT_NO_RESULT
from overnight.cli.parser import EXIT_USAGE, EXITS
from overnight.core.endings import (
    ALERT,
    CLASS,
    EXIT_CODE,
    PRIORITY,
    REOPENED_BY_REVIEW,
    RESUMABLE,
    RESUMABLE_BY_CAUSE,
)
from overnight.reference.markup import header, heading, table


def _resumable(value: bool | None) -> str:
    return "by cause (below)" if value is None else "yes" if value else "no"


def exit_codes_page() -> str:
    codes: dict[int, list[str]] = {}
    for ending in PRIORITY:
        codes.setdefault(EXIT_CODE[ending], []).append(f"`{ending}`")
    lines = [
        *header("Exit codes", "`overnight.core.endings` and the command line's parser"),
        "A script at 9am needs only the exit code and `result.json`. A night's exit code is "
        "its ending's; the command line adds its own for what is not a night.",
        "",
        *table(
            ["exit", "means"],
            [
                *([str(code), " or ".join(names)] for code, names in sorted(codes.items())),
                [
                    str(EXIT_USAGE),
                    "a usage or spec error: nothing was written (never 2, which means partial)",
                ],
                [str(EXIT_NO_RESULT), "the run has no result yet"],
            ],
        ),
        heading(2, "The seven endings", "endings"),
        "",
        "In the order the stop check decides them: the first that holds is the ending.",
        "",
        *table(
            ["ending", "class", "exit", "resumable", "alert"],
            (
                [f"`{e}`", str(CLASS[e]), str(EXIT_CODE[e]), _resumable(RESUMABLE[e]), ALERT[e]]
                for e in PRIORITY
            ),
        ),
        "`" + "` and `".join(str(e) for e in REOPENED_BY_REVIEW) + "` become resumable while a "
        "task is held for a person's answer about an effect of unknown outcome: once the "
        "review queue is resolved, a resume runs the task again.",
        "",
        heading(2, "Causes of UNRECOVERABLE_ERROR", "causes"),
        "",
        *table(
            ["cause", "resumable"],
            ([f"`{cause}`", _resumable(ok)] for cause, ok in RESUMABLE_BY_CAUSE.items()),
        ),
        heading(2, "Each command", "commands"),
        "",
        *table(
            ["command", "exit"],
            (
                [f"[`overnight {c}`](commands.md#{c.replace(' ', '-')})", what]
                for c, what in EXITS.items()
            ),
        ),
    ]
    return "\n".join(lines).rstrip() + "\n"
