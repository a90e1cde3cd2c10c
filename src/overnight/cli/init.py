"""``overnight init [DIR]``: write a commented ``night.toml`` for the project in DIR, its goal
predicate found from the project's own test set-up, then run ``overnight check`` on it.

Nothing is written when the goal or the predicate cannot be found; a check that fails after
the file is written is reported (and the exit code is the check's), the file kept.

For a pytest predicate, the installed plugins that provide the options and ini keys of the
project's pytest configuration (``--cov`` in ``addopts``, ``asyncio_mode``) are found in the
project's Python and written as ``[predicate] pytest_plugins``, with a comment saying which
option needs which: the harness runs pytest with plugin autoload off, so without them the
first night could not start.

A version file a build plugin generates and git ignores (setuptools-scm's ``write_to`` or
``version_file``, hatch-vcs's ``version-file``) is absent from every clean checkout, where
the package then cannot be imported: when the checkout holds one, ``[predicate] setup`` is
written to make it with the same text in each clean checkout.
"""

from __future__ import annotations

import argparse
import configparser
import json
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from overnight.cli.check import check_night, exit_code, render
from overnight.config.spec_schema import shipped_schema_path
from overnight.core.errors import ConfigError
from overnight.core.resume import runs_pytest
from overnight.core.text import printable
from overnight.gates.discovery import FoundGate, discover_gates, install_hint, modules_of
from overnight.night.plugins import (
    Advice,
    advise,
    installed_plugins,
    names_options,
    project_python,
    read_config,
    toml_list,
)

SPEC_NAME = "night.toml"
SCRIPT_NAME = "turns.toml"

#: Per provider: the model named when --model is not given, and where its key comes from.
MODELS: dict[str, tuple[str, str]] = {
    "anthropic": ("claude-opus-4-5", "its key is read from ANTHROPIC_API_KEY"),
    "openai": ("gpt-5", "its key is read from OPENAI_API_KEY"),
    "script": ("scripted", f"no key: its answers are read from {SCRIPT_NAME}"),
}

TOOLS = ("read_file", "list_files", "search_text", "edit_file", "write_file", "run_command")


@dataclass(frozen=True)
class Predicate:
    command: str
    """The goal predicate."""
    prefix: str
    """What ``run_command`` (and every verify the model writes) may start with."""
    found_from: str
    """What in the project it was found from."""


def _python() -> str:
    return "python" if shutil.which("python") else "python3"


def _pytest(found_from: str) -> Predicate:
    python = _python()
    return Predicate(f"{python} -m pytest -q", f"{python} -m pytest", found_from)


def _pytest_config(where: Path) -> str | None:
    """The file holding the project's pytest configuration, if it has one."""
    if (where / "pytest.ini").is_file():
        return "pytest.ini"
    try:
        pyproject = tomllib.loads((where / "pyproject.toml").read_text(encoding="utf-8"))
        if "ini_options" in pyproject.get("tool", {}).get("pytest", {}):
            return "pyproject.toml [tool.pytest.ini_options]"
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        pass
    for name, section in (("setup.cfg", "tool:pytest"), ("tox.ini", "pytest")):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(where / name, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue
        if parser.has_section(section):
            return f"{name} [{section}]"
    return None


def _test_dir(where: Path) -> str | None:
    for name in ("tests", "test"):
        folder = where / name
        if folder.is_dir() and next(folder.rglob("test_*.py"), None) is not None:
            return f"{name}/ (test_*.py files)"
    return None


def _make_test(where: Path) -> str | None:
    for name in ("GNUmakefile", "makefile", "Makefile"):
        try:
            text = (where / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if re.search(r"^test\s*:(?!=)", text, re.MULTILINE):
            return f"{name} (a test: target)"
    return None


def find_predicate(where: Path) -> Predicate | None:
    """The project's test command: pytest when it has pytest configuration or a tests/ (or
    test/) folder of test_*.py files, else tox when it has a tox.ini and tox is installed, else
    ``make test`` when a Makefile has a test target."""
    found = _pytest_config(where) or _test_dir(where)
    if found is not None:
        return _pytest(found)
    if (where / "tox.ini").is_file() and shutil.which("tox"):
        return Predicate("tox -q", "tox", "tox.ini (tox is on PATH)")
    found = _make_test(where)
    if found is not None:
        return Predicate("make test", "make test", found)
    return None


def _given_predicate(command: str) -> Predicate:
    words = command.split()
    if not words:
        raise ConfigError("--predicate", "the command is empty", 'e.g. --predicate "pytest -q"')
    prefix = " ".join(words[:3]) if words[1:2] == ["-m"] else words[0]
    return Predicate(command, prefix, "--predicate")


def find_plugins(where: Path, predicate: Predicate) -> Advice | None:
    """The installed pytest plugins that provide what the project's pytest configuration (and
    the predicate's own options) name, found in the Python the predicate starts; None when
    the predicate is not pytest or names nothing a plugin could provide."""
    if not runs_pytest(predicate.command):
        return None
    config = read_config(where)
    if not names_options(config, predicate.command):
        return None
    advice = advise(installed_plugins(project_python(predicate.command)), config, predicate.command)
    return advice or None


def _comment(text: str) -> list[str]:
    return textwrap.wrap(text, 90, initial_indent="# ", subsequent_indent="# ")


#: The largest generated file whose text a set-up command carries.
_SETUP_TEXT_LIMIT = 4096


@dataclass(frozen=True)
class SetUp:
    """A set-up command that writes a generated file git ignores, and what it is for."""

    path: str
    command: str | None
    """None: the file is not in the checkout, so its text is unknown (said in a comment)."""
    found_from: str


def _generated_version_files(where: Path) -> list[tuple[str, str]]:
    """``(path, where it is named)`` of the version files pyproject.toml has a build plugin
    write."""
    try:
        data = tomllib.loads((where / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    tool = data.get("tool", {}) if isinstance(data.get("tool"), dict) else {}
    found: list[tuple[str, str]] = []
    scm = tool.get("setuptools_scm")
    if isinstance(scm, dict):
        for key in ("version_file", "write_to"):
            if isinstance(scm.get(key), str):
                found.append((scm[key], f"pyproject.toml [tool.setuptools_scm] {key}"))
                break
    hooks = tool.get("hatch", {}).get("build", {}).get("hooks", {}) if "hatch" in tool else {}
    vcs = hooks.get("vcs") if isinstance(hooks, dict) else None
    if isinstance(vcs, dict) and isinstance(vcs.get("version-file"), str):
        found.append((vcs["version-file"], "pyproject.toml [tool.hatch.build.hooks.vcs]"))
    return found


def find_setup(where: Path, predicate: Predicate) -> SetUp | None:
    """The set-up a clean checkout needs for a generated version file git does not track,
    writing the text the checkout holds; None when there is none."""
    for rel, named in _generated_version_files(where):
        path = rel.strip().lstrip("./")
        if not path or ".." in path.split("/"):
            continue
        if _tracked(where, path):
            continue
        target = where / path
        try:
            text = target.read_text(encoding="utf-8") if target.is_file() else None
        except (OSError, UnicodeDecodeError):
            text = None
        if text is None or len(text) > _SETUP_TEXT_LIMIT:
            return SetUp(path, None, named)
        words = predicate.command.split()
        python = words[0] if words and words[0].startswith("python") else "python3"
        code = (
            f"import pathlib; p = pathlib.Path({path!r}); "
            f"p.parent.mkdir(parents=True, exist_ok=True); p.write_text({text!r})"
        )
        return SetUp(path, f"{python} -c {shlex.quote(code)}", named)
    return None


def _tracked(where: Path, path: str) -> bool:
    done = subprocess.run(
        ["git", "-C", str(where), "ls-files", "--error-unmatch", "--", path],
        capture_output=True,
        check=False,
        timeout=60,
    )
    return done.returncode == 0


def _setup_lines(setup: SetUp | None) -> list[str]:
    if setup is None:
        return []
    if setup.command is None:
        return _comment(
            f"{setup.path} is generated ({setup.found_from}) and git does not track it, so a "
            "clean checkout lacks it: name the command that writes it, e.g. "
            'setup = "python gen_version.py".'
        )
    return [
        *_comment(
            f"{setup.path} is generated ({setup.found_from}) and git does not track it, so a "
            "clean checkout lacks it: this writes it, with the text your checkout has, in "
            "every clean checkout before a check runs."
        ),
        f"setup = {_string(setup.command)}",
    ]


def _plugins_lines(plugins: Advice | None, found_from: str) -> list[str]:
    """``pytest_plugins`` with the comment saying why, and what no installed plugin has."""
    if plugins is None:
        return []
    lines: list[str] = []
    names = plugins.plugins()
    if names:
        needs = "; ".join(n.said() for n in plugins.needs)
        lines += _comment(
            "The installed pytest plugins the tests need: the harness runs pytest with plugin "
            f"autoload off and loads only these (with -p). Found from {found_from}: {needs}."
        )
    if plugins.missing:
        lines += _comment(
            f"Not found: {plugins.missing_said()}. Install it and add its name here, or take "
            "it out of the configuration."
        )
    if names:
        lines.append(f"pytest_plugins = {toml_list(names)}")
    return lines


def _string(text: str) -> str:
    """``text`` as a TOML basic string."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _ask_goal() -> str:
    if not sys.stdin.isatty():
        raise ConfigError(
            "--goal",
            "no goal was given, and there is no terminal to ask for one",
            'pass --goal "what the night should achieve"',
        )
    goal = input("The night's goal, in one sentence: ").strip()
    if not goal:
        raise ConfigError("--goal", "the goal is empty", 'pass --goal "what the night should do"')
    return goal


def schema_line() -> str:
    """The ``#:schema`` line Taplo reads: the schema shipped in the installed package, as a
    ``file://`` URL, so that an editor checks the file offline against the schema of the
    overnight that will run it. To the spec's loader it is a comment."""
    return f"#:schema {shipped_schema_path().as_uri()}"


def spec_text(
    goal: str,
    predicate: Predicate,
    usd: float,
    hours: float,
    provider: str,
    model: str,
    plugins: Advice | None = None,
    config_file: str | None = None,
    setup: SetUp | None = None,
    gates: Sequence[FoundGate] = (),
    missing_gates: Sequence[FoundGate] = (),
) -> str:
    """The commented ``night.toml``; ``plugins``: the pytest plugins to write, found from
    ``config_file``; ``setup``: the set-up a clean checkout needs; ``gates``: the checks the
    repository configures; ``missing_gates``: those whose program is not installed."""
    lines = [
        schema_line(),
        "# What one unattended night should do in this repository, written by `overnight init`.",
        "# `overnight check night.toml` runs every check a night makes before it spends",
        "# anything; `overnight run night.toml` starts the night. Every setting is described in",
        "# the night.toml reference (docs/reference/night-toml.md); the line above points",
        "# editors that read JSON Schema (Taplo, Even Better TOML) at the file's schema.",
        "",
        "# The goal, in plain words: the model plans tasks toward it. The harness holds it, and",
        "# the verdict is never the model's: the predicate below decides whether it is met.",
        f"goal = {_string(goal)}",
        "# The git repository the night works on, relative to this file. The night starts from",
        "# its committed HEAD and puts each verified task on a branch of its own,",
        "# overnight/<run-id>; your checkout is never changed.",
        'workspace = "."',
        "",
        "[budget]",
        "# Hard cap in dollars, never crossed: each model call's worst case is reserved before it",
        "# is sent. `overnight estimate night.toml` says what the night will cost.",
        f"usd = {usd!r}",
        "# Wall-clock limit in hours, waits and tools included.",
        f"hours = {hours!r}",
        "",
        "[predicate]",
        "# The goal check, run by the harness on a clean checkout of the night's branch: exit 0",
        f"# means the goal is met. Found from {predicate.found_from}; change it to the",
        "# command that says the work is done.",
        f"command = {_string(predicate.command)}",
        "# Seconds before one run of it is stopped (and counted as not met).",
        "timeout_s = 600",
        *_plugins_lines(plugins, config_file or "the predicate's options"),
        *_setup_lines(setup),
        "",
        "[model]",
        "# Where model calls go: anthropic (key from ANTHROPIC_API_KEY), openai (OPENAI_API_KEY),",
        '# openai-compatible (a server at base_url = "..."), python (a callable, target =',
        '# "module:attr") or script (answers read from a file, script = "turns.toml").',
        f"# This one: {provider}, {MODELS[provider][1]}.",
        f"provider = {_string(provider)}",
    ]
    if provider == "script":
        lines += [
            "# The scripted answers, in order per purpose (docs/guides/scripted-model.md).",
            f"script = {_string(SCRIPT_NAME)}",
        ]
    lines += [
        "# The model's name, sent to the provider and priced from its published rates (or from",
        "# a [prices.<name>] table).",
        f"name = {_string(model)}",
    ]
    if provider == "script":
        lines += [
            "",
            f"[prices.{model}]",
            "# $ per million tokens: the scripted model is metered like a real one, at no cost.",
            "input = 0.0",
            "output = 0.0",
        ]
    allowed = ", ".join(_string(t) for t in TOOLS)
    lines += [
        "",
        "[tools]",
        "# The agent's tools: read_file, list_files and search_text read the night's worktree;",
        "# edit_file and write_file change it (never the files that judge the work: the tests",
        "# and their configuration); run_command runs the commands below, in the sandbox.",
        f"allow = [{allowed}]",
        "# Command prefixes run_command accepts, compared word by word; every verify command",
        "# the model writes must start with one of them. git can never be one.",
        f"commands = [{_string(predicate.prefix)}]",
        "",
        "[estimate]",
        "# How many tasks you expect the model to plan: `overnight estimate` and `overnight",
        "# check` price a night of this many against budget.usd.",
        "tasks = 5",
        "",
        *_gates_lines(gates),
        *_missing_gates_lines(missing_gates),
    ]
    return "\n".join(lines)


def gates_to_write(
    where: Path, predicate: Predicate, installed: Callable[[str], bool] | None = None
) -> tuple[list[FoundGate], list[FoundGate]]:
    """The gates ``where`` configures, split into those whose program the tests' Python can
    run and those it cannot (written commented out, so that the spec passes ``check`` and the
    user sees what to install). Their commands start with the predicate's Python word."""
    words = shlex.split(predicate.command)
    python = words[0] if words and words[0].startswith("python") else "python"
    installed = installed or modules_of(project_python(predicate.command))
    runnable: list[FoundGate] = []
    missing: list[FoundGate] = []
    for gate in discover_gates(where, installed, python):
        is_module = gate.command.split()[:2] == [python, "-m"]
        (missing if is_module and not installed(gate.program) else runnable).append(gate)
    return runnable, missing


def _gate_lines(gate: FoundGate) -> list[str]:
    return [
        "[[gates]]",
        f"name = {_string(gate.name)}",
        f"command = {_string(gate.command)}",
        f"kind = {_string(gate.kind)}",
    ]


def _gates_lines(gates: Sequence[FoundGate]) -> list[str]:
    """``[[gates]]`` for each check the repository configures: a task's change may not add a
    finding its base commit does not have."""
    lines: list[str] = []
    for gate in gates:
        head, *rest = _gate_lines(gate)
        lines += [
            head,
            f"# Found in {gate.configured_in}. The repository's own check, run on a clean",
            "# checkout of the base commit and of each verified change: a change may not add",
            "# a finding the base commit does not have"
            + (" (a format gate: a file it rewrites)." if gate.kind == "format" else "."),
            *rest,
            "",
        ]
    return lines


def _missing_gates_lines(gates: Sequence[FoundGate]) -> list[str]:
    """A configured check whose program the tests' Python cannot import, commented out."""
    lines: list[str] = []
    for gate in gates:
        lines += [
            f"# Found in {gate.configured_in}, but the tests' Python cannot import {gate.program}:",
            f"# {install_hint(gate.program)}, then uncomment these lines to make it a gate.",
            *(f"# {line}" for line in _gate_lines(gate)),
            "",
        ]
    return lines


def script_text(goal: str, predicate: Predicate) -> str:
    """A starter script: a plan of one task whose verify is the predicate, a look at the
    repository, the predicate run once, and a drift verdict. Edit the execute turns into
    the change the night should make."""
    return "\n".join(
        [
            "# The scripted model's answers, in order per purpose (docs/guides/scripted-model.md,",
            "# docs/reference/turns-toml.md). A purpose whose turns run out: plan and drift give",
            '# their last turn again, replan adds nothing, every other purpose answers "done".',
            "",
            "# The plan: the tasks of the night, handed in with submit_plan.",
            "[[plan]]",
            'tool = "submit_plan"',
            "[plan.input]",
            'reasoning = "One task: the goal itself."',
            "[[plan.input.tasks]]",
            'id = "goal"',
            f"title = {_string(goal[:80].splitlines()[0] if goal.strip() else 'the goal')}",
            f"brief = {_string(goal)}",
            "# Read-only check: exit 0 done, 1 not done. It starts with a [tools] commands prefix.",
            f"verify = {_string(predicate.command)}",
            "",
            "# The agent's turns, across every task in the order they run; a turn of text only",
            "# ends the task. Replace these with the edits the task needs, e.g.",
            '#   tool = "edit_file"',
            '#   input = { path = "pkg/module.py", old = "return a - b", new = "return a + b" }',
            "[[execute]]",
            'tool = "list_files"',
            'input = { path = "." }',
            "",
            "[[execute]]",
            'tool = "run_command"',
            f"input = {{ command = {_string(predicate.command)} }}",
            "",
            "[[execute]]",
            'text = "Looked at the repository and ran the tests; no change scripted yet."',
            "",
            "# The drift judge's verdict on the queue, handed in with submit_drift_verdict.",
            "[[drift]]",
            'tool = "submit_drift_verdict"',
            'input = { reasoning = "The only task is the goal.", off_goal_task_ids = [], '
            "drift_score = 0.0 }",
            "",
        ]
    )


def cmd_init(args: argparse.Namespace) -> int:
    where: Path = (args.dir or Path.cwd()).absolute()
    if not where.is_dir():
        raise ConfigError("DIR", f"{where} is not a directory", "pass your repository's directory")
    spec_path, script_path = where / SPEC_NAME, where / SCRIPT_NAME
    provider = args.provider
    for path in (spec_path, script_path) if provider == "script" else (spec_path,):
        if path.exists() and not args.force:
            raise ConfigError(
                "DIR",
                f"{path} already exists",
                "edit it, or pass --force to write it afresh",
            )
    if not args.budget > 0:
        raise ConfigError("--budget", "the budget must be above $0", "e.g. --budget 10")
    if not args.hours > 0:
        raise ConfigError("--hours", "the wall-clock limit must be above 0", "e.g. --hours 8")
    predicate = _given_predicate(args.predicate) if args.predicate else find_predicate(where)
    if predicate is None:
        raise ConfigError(
            "--predicate",
            f"no test command was found in {where}: no pytest configuration (pytest.ini, "
            "pyproject.toml [tool.pytest.ini_options], setup.cfg [tool:pytest], tox.ini "
            "[pytest]), no tests/ or test/ folder of test_*.py files, no tox.ini with tox on "
            "PATH, no Makefile with a test target",
            'pass the command whose exit 0 means the goal is met: --predicate "..."',
        )
    goal = args.goal.strip() if args.goal is not None else _ask_goal()
    if not goal:
        raise ConfigError("--goal", "the goal is empty", 'pass --goal "what the night should do"')
    model = args.model or MODELS[provider][0]
    plugins = find_plugins(where, predicate)
    config_file = read_config(where).file
    setup = find_setup(where, predicate)
    gates, missing = gates_to_write(where, predicate)
    spec_path.write_text(
        spec_text(
            goal,
            predicate,
            float(args.budget),
            float(args.hours),
            provider,
            model,
            plugins,
            config_file,
            setup,
            gates,
            missing,
        ),
        encoding="utf-8",
    )
    print(printable(f"wrote {spec_path} (goal predicate: `{predicate.command}`)"))
    if plugins is not None and plugins.needs:
        found = "; ".join(n.said() for n in plugins.needs)
        print(printable(f"  with {plugins.line()}: {found}"))
    if plugins is not None and plugins.missing:
        print(printable(f"  {plugins.missing_said()}"))
    if setup is not None:
        how = "with a set-up that writes it" if setup.command else "name its set-up command"
        print(printable(f"  {setup.path} is generated and untracked: {how}"))
    if gates:
        print(printable(f"  with gates: {', '.join(g.name for g in gates)}"))
    if missing:
        said = "; ".join(f"{g.name} ({install_hint(g.program)})" for g in missing)
        print(printable(f"  gates written commented out, their program is not installed: {said}"))
    if provider == "script":
        script_path.write_text(script_text(goal, predicate), encoding="utf-8")
        print(printable(f"wrote {script_path} (the scripted model's answers)"))
    print(f"\novernight check {spec_path}:")
    outcomes = check_night(spec_path)
    print(render(outcomes))
    code = exit_code(outcomes)
    if code == 0:
        print(printable(f"\nready: overnight run {spec_path}"))
    else:
        print(printable(f"\n{spec_path} is kept: fix what failed above, then check it again"))
    return code
