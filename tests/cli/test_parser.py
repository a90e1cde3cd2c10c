"""The command line's parser (``overnight.cli.parser``) and its dispatch table
(``overnight.cli.main``): every subcommand has a handler that exists, and the flags of
``overnight estimate``, written out so that building the parser imports no model, are the
ones ``overnight.estimate.workload_flags`` derives from the workload's fields.

When a workload field changes, write the table again::

    .venv/bin/python -m tests.cli.test_parser > src/overnight/cli/estimate_flags.py
    .venv/bin/ruff format src/overnight/cli/estimate_flags.py
"""

from __future__ import annotations

import argparse
import importlib

import pytest

from overnight.cli.estimate_flags import WORKLOAD_FLAGS
from overnight.cli.main import HANDLERS, main
from overnight.cli.parser import LATEST, build_parser
from overnight.estimate import workload_flags
from overnight.store import index

MODULE_DOC = (
    '"""The flags of ``overnight estimate``, one per workload field, written out so that '
    "building the\nparser imports no model. ``overnight.estimate.workload_flags`` derives "
    "them from ``Workload``'s\nfields; tests/cli/test_parser.py holds the two equal and "
    'writes this table again.\n"""'
)


def _pieces(text: str, width: int = 80) -> list[str]:
    """``text`` cut after spaces into pieces of about ``width`` characters."""
    pieces, current = [], ""
    for word in text.split(" "):
        if current and len(current) + len(word) > width:
            pieces.append(current)
            current = ""
        current += word + " "
    pieces.append(current[:-1])
    assert "".join(pieces) == text
    return pieces


def table_source() -> str:
    """The module ``overnight.cli.estimate_flags`` as ``workload_flags`` says it must be."""
    lines = [
        MODULE_DOC,
        "",
        "from __future__ import annotations",
        "",
        "#: ``(option, path in the workload, type, help)``, in the order of the fields.",
        "WORKLOAD_FLAGS: tuple[tuple[str, tuple[str, ...], type, str], ...] = (",
    ]
    for flag in workload_flags():
        lines += [
            "    (",
            f"        {flag.option!r},",
            f"        {flag.path!r},",
            f"        {flag.type.__name__},",
            *(f"        {piece!r}" for piece in _pieces(flag.help)),
            "    ),",
        ]
    lines.append(")")
    return "\n".join(lines) + "\n"


def test_the_written_out_estimate_flags_are_the_workload_s() -> None:
    derived = [(f.option, f.path, f.type, f.help) for f in workload_flags()]
    assert list(WORKLOAD_FLAGS) == derived, (
        "the workload's fields changed: write the table again (see this module's docstring)"
    )


def test_the_estimate_parser_takes_every_workload_flag_where_the_command_reads_it() -> None:
    args = build_parser().parse_args(["estimate", "--tasks", "3", "--main-price-input", "2.5"])
    for flag in workload_flags():
        expected = {"--tasks": 3, "--main-price-input": 2.5}.get(flag.option)
        assert getattr(args, flag.dest) == expected


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_subcommand_has_a_handler_that_exists() -> None:
    commands = subcommands(build_parser())
    assert set(commands) == set(HANDLERS)
    for command, where in HANDLERS.items():
        module, _, name = where.partition(":")
        assert callable(getattr(importlib.import_module(module), name)), command


def test_the_latest_run_is_named_as_the_index_resolves_it() -> None:
    assert LATEST == index.LATEST


def test_a_usage_error_exits_64(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["run"])
    assert stop.value.code == 64
    assert "overnight: error:" in capsys.readouterr().err


if __name__ == "__main__":
    print(table_source(), end="")
