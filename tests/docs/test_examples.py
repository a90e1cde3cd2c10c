"""Every example the README and the docs show is run: each TOML block loads, as a whole spec,
as a table set into a minimal one, or as a scripted model's turns; each command line shown
names a command, and options, the parser has."""

from __future__ import annotations

import argparse
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from overnight.cli.parser import build_parser
from overnight.config.model_script import load_script
from tests.docs.pages import README, all_blocks, pages, prose
from tests.docs.test_schema import check_fields, page_specs


def test_every_toml_block_of_the_docs_is_a_spec_or_a_script_that_loads(tmp_path: Path) -> None:
    specs = page_specs(tmp_path)
    turns = [b for b in all_blocks("toml") if {"plan", "execute"} & tomllib.loads(b.text).keys()]
    assert len(specs) + len(turns) == len(all_blocks("toml")) >= 12
    for where, data in specs:
        assert check_fields(data, tmp_path) == set(), where
    assert turns, "the scripted model's turns.toml is shown somewhere"
    for block in turns:
        path = tmp_path / "shown-turns.toml"
        path.write_text(block.text, encoding="utf-8")
        assert load_script(path).turns("plan"), block.where


#: A command line in a shell block or a code span: ``overnight ...`` or ``.venv/bin/overnight``.
COMMAND = re.compile(r"(?:^|[\s`&;(])(?:\.venv/bin/)?overnight(?![\w.-])((?: [^`#&|;\n]*)?)")


def command_lines() -> list[tuple[str, str]]:
    """Every ``overnight`` command line the README and the pages show: in a shell block, or in
    an inline code span of the prose."""
    found = []
    for block in all_blocks("sh"):
        for line in block.text.splitlines():
            for m in COMMAND.finditer(line.split(" # ", 1)[0]):
                found.append((block.where, m.group(1).strip()))
    for page in pages():
        for span in re.findall(r"`([^`\n]+)`", prose(page)):
            if span.startswith("overnight "):
                found.append((str(page.name), span.removeprefix("overnight ").strip()))
    return found


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def resolve(words: list[str]) -> tuple[list[str], argparse.ArgumentParser, list[str]]:
    """The command a line names (its words), its parser, and the rest of the line."""
    parser, named = build_parser(), []
    while words and words[0] in _subcommands(parser):
        parser = _subcommands(parser)[words[0]]
        named.append(words.pop(0))
    return named, parser, words


def test_every_command_line_shown_names_a_command_and_options_the_parser_has() -> None:
    lines = command_lines()
    assert len(lines) >= 30
    shown = set()
    for where, line in lines:
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        named, parser, rest = resolve(words)
        if not named:
            # `overnight --version`, or a placeholder for any command: `overnight COMMAND --help`
            assert rest == [] or rest[0].startswith("-") or rest[0].isupper(), (where, line)
        options = {o for a in parser._actions for o in a.option_strings}
        for word in rest:
            for flag in word.strip("[]").split("|"):  # `--happened|--not-happened`: either
                flag = flag.split("=", 1)[0]
                if flag.startswith("--"):
                    assert flag in options, f"{where}: `overnight {line}`: {flag} is no option"
        shown.add(" ".join(named))
    # the README's own lines are among them
    assert {"demo", "init", "check", "run"} <= shown


def test_the_command_check_would_catch_a_flag_the_parser_lacks() -> None:
    named, parser, rest = resolve(["run", "night.toml", "--dry"])
    options = {o for a in parser._actions for o in a.option_strings}
    assert named == ["run"] and rest == ["night.toml", "--dry"]
    assert "--dry" not in options and "--json" in options
    assert resolve(["fleet", "submit", "x.toml"])[0] == ["fleet", "submit"]


@pytest.mark.parametrize("page", [README], ids=["README"])
def test_the_readme_shows_the_two_set_up_commands(page: Path) -> None:
    (setup, *_) = [b for b in all_blocks("sh") if b.page == page]
    lines = [line for line in setup.text.splitlines() if line.strip()]
    assert len(lines) == 2 and all(line.startswith("scripts/setup") for line in lines)
