"""The reference page of the command line, read from the parser itself
(``overnight.cli.parser.build_parser``): every command and subcommand, its usage, each
argument and option with its help, choices and default, and what its exit code says."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from overnight.cli.parser import build_parser
from overnight.reference.markup import header, heading, table
from overnight.reference.model_fields import anchor_of

#: Wide enough that argparse never wraps a usage line: the page wraps nothing itself.
UNWRAPPED = 10_000


def _subparsers(
    parser: argparse.ArgumentParser,
) -> Iterator[argparse._SubParsersAction[argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield action


def commands(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    """Each subcommand, depth first in the order the parser declares them: the words that
    name it, its one-line help, its parser."""
    for action in _subparsers(parser):
        helps = {str(a.dest): a.help or "" for a in action._choices_actions}
        for name, sub in action.choices.items():
            yield (*words, name), helps.get(name, ""), sub
            yield from commands(sub, (*words, name))


def usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=UNWRAPPED)
    formatter.add_usage(
        parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="usage: "
    )
    return formatter.format_help().strip()


def _name(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The argument as its usage writes it: ``RUN``, ``--events {jsonl}``, ``-h, --help``."""
    formatter = argparse.HelpFormatter(parser.prog, width=UNWRAPPED)
    if not action.option_strings:
        return f"`{formatter._metavar_formatter(action, action.dest)(1)[0]}`"
    value = ""
    if action.nargs != 0:
        default = formatter._get_default_metavar_for_optional(action)
        value = " " + formatter._format_args(action, default)
    return ", ".join(f"`{option}{value}`" for option in action.option_strings)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    return argparse.HelpFormatter(parser.prog)._expand_help(action)


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, False, [], ""):
        return ""
    return f"`{action.default}`"


def arguments(parser: argparse.ArgumentParser) -> list[list[str]]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        rows.append([_name(parser, action), _help(parser, action), _default(action)])
    return rows


def command_line_page() -> str:
    parser = build_parser()
    lines = [
        *header("Commands", "the command line's parser (`overnight.cli.parser`)"),
        "Every command, subcommand and option of `overnight`, as `overnight COMMAND --help` "
        "shows it. A RUN is a run directory or a run id from `overnight list` (its unique "
        "start is enough). What the exit codes mean across commands is in "
        "[Exit codes](exit-codes.md).",
        "",
        "```",
        usage(parser),
        "```",
        "",
    ]
    rows = [[f"[`{' '.join(w)}`](#{anchor_of(' '.join(w))})", h] for w, h, _ in commands(parser)]
    lines += table(["command", "what it does"], rows)
    for words, help_text, sub in commands(parser):
        name = " ".join(words)
        lines += [heading(2, f"`overnight {name}`", anchor_of(name)), ""]
        if help_text:
            lines += [help_text[0].upper() + help_text[1:] + ".", ""]
        if sub.description:
            lines += [sub.description, ""]
        lines += ["```", usage(sub), "```", ""]
        rows = arguments(sub)
        if rows:
            lines += table(["argument", "what it is", "default"], rows)
        if sub.epilog:
            lines += [f"**Exit**: {sub.epilog.removeprefix('exit: ')}.", ""]
    return "\n".join(lines).rstrip() + "\n"
