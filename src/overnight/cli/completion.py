"""``overnight completion {bash,zsh,fish}``: a shell completion script, from the parser itself.

bash's and zsh's are written by ``shtab``; fish's by ``fish_script`` here: a ``complete`` line
per subcommand (its help as the description) and per option of each. A path argument
completes files (a directory argument, directories). Light, as ``--help`` is: the parser
alone, nothing of the product.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from overnight.cli.parser import build_parser

PROG = "overnight"

#: A fish function per question the ``complete`` lines ask of the command line: the words
#: typed so far after ``overnight``, options left out (``__fish_overnight_words``); whether
#: they start with the given words (``__fish_overnight_in``, for the options of a subcommand);
#: whether they are exactly those (``__fish_overnight_after``, for the next subcommand).
FISH_FUNCTIONS = """\
function __fish_overnight_words
    set -l tokens (commandline -opc)
    set -e tokens[1]
    for token in $tokens
        string match -q -- '-*' $token; or echo $token
    end
end

function __fish_overnight_in
    set -l words (__fish_overnight_words)
    test (count $words) -ge (count $argv); or return 1
    set -l i 1
    for arg in $argv
        test "$words[$i]" = "$arg"; or return 1
        set i (math $i + 1)
    end
end

function __fish_overnight_after
    test (count (__fish_overnight_words)) -eq (count $argv); and __fish_overnight_in $argv
end
"""


def cmd_completion(args: argparse.Namespace) -> int:
    parser = build_parser()
    if args.shell == "fish":
        text = fish_script(parser)
    else:
        import shtab

        _mark_paths(parser, shtab.FILE, shtab.DIRECTORY)
        text = shtab.complete(parser, shell=args.shell)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each subcommand's one-line help (``add_parser(help=...)``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {str(a.dest): _text(a.help) for a in action._choices_actions}
    return {}


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """The parser and every subcommand's, with the words that lead to it."""
    yield path, parser
    for name, sub in _subcommands(parser).items():
        yield from _parsers(sub, (*path, name))


def _is_dir(action: argparse.Action) -> bool:
    return action.metavar == "DIR" or action.dest in ("dir", "into", "runs")


def _mark_paths(parser: argparse.ArgumentParser, file: object, directory: object) -> None:
    """Tell shtab which arguments are paths (``type=Path``), and which of them directories."""
    for _, p in _parsers(parser):
        for action in p._actions:
            if action.type is Path:
                action.complete = directory if _is_dir(action) else file  # type: ignore[attr-defined]


def _text(help_text: str | None) -> str:
    """A help string as ``--help`` shows it (``%%`` is ``%``), on one line."""
    return " ".join((help_text or "").replace("%%", "%").split())


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_script(parser: argparse.ArgumentParser) -> str:
    """``complete`` lines for fish: the subcommands after ``overnight`` (and after
    ``overnight fleet``), then each (sub)command's options and the choices of its
    arguments."""
    lines = [
        f"# fish completion for {PROG}: {PROG} completion fish > "
        f"~/.config/fish/completions/{PROG}.fish",
        "",
        FISH_FUNCTIONS,
    ]
    for path, p in _parsers(parser):
        words = " ".join(path)
        if not path:
            leads, where = "__fish_use_subcommand", "__fish_use_subcommand"
        else:
            leads, where = f"__fish_overnight_after {words}", f"__fish_overnight_in {words}"
        helps = _helps(p)
        for name in _subcommands(p):
            lines.append(
                f"complete -c {PROG} -f -n {_fish_quote(leads)} -a {_fish_quote(name)} "
                f"-d {_fish_quote(helps.get(name, ''))}"
            )
        for action in p._actions:
            line = _fish_action(action, where)
            if line is not None:
                lines.append(line)
        lines.append("")
    return "\n".join(lines)


def _fish_action(action: argparse.Action, where: str) -> str | None:
    if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
        return None
    parts = [f"complete -c {PROG} -n {_fish_quote(where)}"]
    if not action.option_strings:  # a positional: only its choices are worth offering
        if not action.choices:
            return None
        parts.append("-f")
    for option in action.option_strings:
        if option.startswith("--"):
            parts.append(f"-l {option[2:]}")
        else:
            parts.append(f"-s {option[1:]}")
    if action.choices:
        parts.append(f"-x -a {_fish_quote(' '.join(str(c) for c in action.choices))}")
    elif action.option_strings and action.nargs != 0:
        parts.append("-r")
        if action.type is Path:
            parts.append("-a '(__fish_complete_directories)'" if _is_dir(action) else "-F")
    if action.help:
        parts.append(f"-d {_fish_quote(_text(action.help))}")
    return " ".join(parts)
