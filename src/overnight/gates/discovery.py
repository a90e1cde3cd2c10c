"""The checks a repository configures for itself (linters, formatters, type checkers), found
in its configuration files and turned into commands a night can run as gates.

Sources, read at the repository's top: ``pyproject.toml`` (``[tool.ruff]``, ``[tool.mypy]``,
``[tool.black]``, ``[tool.isort]``, ``[tool.pylint]``, ``[tool.pyright]``), ``ruff.toml`` /
``.ruff.toml``, ``setup.cfg`` and ``tox.ini`` sections (and the tools a tox environment's
``commands`` run), ``.flake8``, ``mypy.ini`` / ``.mypy.ini``, ``.pylintrc`` / ``pylintrc``,
``pyrightconfig.json``, ``.isort.cfg``, the hooks of ``.pre-commit-config.yaml`` and the
``lint`` / ``typecheck`` / ``format:check`` scripts of ``package.json``.

A gate's command runs at the top of a clean checkout. Python tools run as ``python -m
<tool>``, the first word standing for the Python that runs the tests; their output options
are fixed so that ``overnight.gates.readers`` can read it whatever the repository's own
settings say about output. A *format* gate's command rewrites files in place (the harness
compares the tree before and after: a file it changes was not formatted), so it never asks
for ``--check`` or ``--diff``.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from overnight.gates.readers import program_of

#: What each known gate is: (kind, the program it needs, the reader of its output).
GATE_KINDS: dict[str, tuple[str, str, str]] = {
    "ruff": ("findings", "ruff", "ruff-json"),
    "ruff-format": ("format", "ruff", "exit-code"),
    "flake8": ("findings", "flake8", "flake8"),
    "pylint": ("findings", "pylint", "pylint-json"),
    "mypy": ("findings", "mypy", "mypy"),
    "pyright": ("findings", "pyright", "pyright-json"),
    "black": ("format", "black", "exit-code"),
    "isort": ("format", "isort", "exit-code"),
}
#: The order gates are listed in (``npm-*`` gates follow, in ``NPM_SCRIPTS`` order).
GATE_ORDER: tuple[str, ...] = tuple(GATE_KINDS)

#: The ``package.json`` scripts that are checks.
NPM_SCRIPTS: tuple[str, ...] = ("lint", "typecheck", "type-check", "format:check")

#: pre-commit hook ids, and the gate each one is.
PRE_COMMIT_HOOKS: dict[str, str] = {
    "ruff": "ruff",
    "ruff-check": "ruff",
    "ruff-format": "ruff-format",
    "flake8": "flake8",
    "mypy": "mypy",
    "black": "black",
    "isort": "isort",
    "pylint": "pylint",
}

#: Programs named in tox ``commands``, and the gate each one is (``ruff format`` aside).
TOX_PROGRAMS: dict[str, str] = {
    "ruff": "ruff",
    "flake8": "flake8",
    "mypy": "mypy",
    "black": "black",
    "isort": "isort",
    "pylint": "pylint",
    "pyright": "pyright",
}

#: ``setup.cfg`` sections, and the gate each one configures (and ``[pylint.*]``: pylint).
SETUP_CFG_SECTIONS: dict[str, str] = {
    "flake8": "flake8",
    "mypy": "mypy",
    "isort": "isort",
    "tool:isort": "isort",
    "pylint": "pylint",
}

PRE_COMMIT_CONFIG = ".pre-commit-config.yaml"

_ESLINT_FILES = (
    *(f".eslintrc{ext}" for ext in ("", ".js", ".cjs", ".yaml", ".yml", ".json")),
    *(f"eslint.config.{ext}" for ext in ("js", "mjs", "cjs", "ts", "mts", "cts")),
    ".eslintignore",
    "package.json",
)
_PRETTIER_EXTENSIONS = ("json", "yaml", "yml", "json5", "js", "cjs", "mjs", "ts", "mts", "cts")
_PRETTIER_FILES = (
    ".prettierrc",
    *(f".prettierrc.{ext}" for ext in (*_PRETTIER_EXTENSIONS, "toml")),
    *(f"prettier.config.{ext}" for ext in ("js", "cjs", "mjs", "ts", "mts", "cts")),
    ".prettierignore",
    ".editorconfig",
    "package.json",
)
#: The files each tool reads its settings from at the repository's top, present or not: a
#: file created there changes what the tool checks as much as an edited one.
_CONFIG_FILES: dict[str, tuple[str, ...]] = {
    "ruff": ("pyproject.toml", "ruff.toml", ".ruff.toml"),
    "flake8": ("setup.cfg", "tox.ini", ".flake8"),
    "mypy": ("mypy.ini", ".mypy.ini", "setup.cfg", "pyproject.toml"),
    "black": ("pyproject.toml",),
    "isort": (".isort.cfg", "pyproject.toml", "setup.cfg", "tox.ini", ".editorconfig"),
    "pylint": (".pylintrc", "pylintrc", ".pylintrc.toml", "pyproject.toml", "setup.cfg", "tox.ini"),
    "pyright": ("pyrightconfig.json", "pyproject.toml"),
    "eslint": _ESLINT_FILES,
    "prettier": _PRETTIER_FILES,
    "tsc": ("tsconfig.json", "package.json"),
}
_CONFIG_FILES["ruff-format"] = _CONFIG_FILES["ruff"]

#: mypy's flags for output its reader parses (one line per error, with its code), whatever
#: the configuration asks for, and no cache written into the checkout.
MYPY_FLAGS: tuple[str, ...] = (
    "--no-pretty",
    "--no-error-summary",
    "--hide-error-context",
    "--no-color-output",
    "--show-error-codes",
    "--cache-dir=/dev/null",
)

#: Top-level directories that are not the code a type checker or pylint is pointed at.
_NOT_CODE = frozenset(
    {"tests", "test", "testing", "docs", "doc", "build", "dist", "examples", "benchmarks"}
)
_GLOB_CHARS = frozenset("*?[")

_SECTION = re.compile(r"^\s*\[([^\]\n]+)\]", re.MULTILINE)
_HOOK_ID = re.compile(r"^\s*(?:-\s+)?id\s*:\s*['\"]?([\w.-]+)['\"]?\s*(?:#.*)?$")

#: Asks a Python whether it can import a module, without the current directory on its path.
_FIND_MODULE = (
    "import importlib.util, os, sys; "
    "sys.path[:] = [p for p in sys.path if p not in ('', '.', os.getcwd())]; "
    "sys.exit(importlib.util.find_spec(sys.argv[1]) is None)"
)


@dataclass(frozen=True)
class FoundGate:
    """One check a repository configures, as a gate a night can run."""

    name: str
    """``ruff``, ``ruff-format``, ``flake8``, ``mypy``, ``black``, ``isort``, ``pylint``,
    ``pyright``, ``npm-lint``..."""
    command: str
    """The command to run at the top of a clean checkout; a first word ``python`` stands
    for the Python that runs the tests."""
    kind: str
    """``findings`` (its output is read) or ``format`` (it rewrites files in place; a file
    it changes was not formatted)."""
    reader: str
    """The reader of its output, one of ``overnight.gates.readers.READERS``."""
    configured_in: str
    """Where it was found, for people: ``pyproject.toml [tool.ruff]``,
    ``.pre-commit-config.yaml (hook flake8)``; several places joined by commas."""
    program: str
    """The program the command needs: a Python module name (``ruff``), ``pyright`` or
    ``npm``."""
    config_files: tuple[str, ...]
    """The repository files that configure it, present or not (to be protected)."""


def gate_config_files(name: str) -> tuple[str, ...]:
    """The files at the repository's top that the tool ``name`` reads its settings from,
    whether or not they are present (``npm-*`` gates: ``package.json``)."""
    if name.startswith("npm-"):
        return ("package.json",)
    return _CONFIG_FILES.get(name, ())


def install_hint(program: str) -> str:
    """How to install ``program`` where the night runs: ``pip install ruff``,
    ``npm install``."""
    if program == "npm":
        return "npm install"
    if program in {kind[1] for kind in GATE_KINDS.values()}:
        return f"pip install {program}"
    return f"install {program}"


def python_module_installed(python: str, module: str) -> bool:
    """Whether the interpreter ``python`` can import ``module`` (a top-level name)."""
    try:
        done = subprocess.run(
            [python, "-c", _FIND_MODULE, module],
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


# --- reading the repository's files -------------------------------------------------------


def _read(repo: Path, name: str) -> str | None:
    path = repo / name
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
    except OSError:
        return None


def _toml(text: str | None) -> dict[str, object]:
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}  # the tools cannot read it either: nothing is configured there


def _ini(text: str | None) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    if text is not None:
        # What was read before an error is kept: the sections before a bad line still count.
        with contextlib.suppress(configparser.Error):
            parser.read_string(text)
    return parser


def _sections(text: str | None) -> list[str]:
    """The section names of an INI file, found by their header lines (so that a value the
    parser rejects elsewhere in the file does not hide them)."""
    return [m.group(1).strip() for m in _SECTION.finditer(text or "")]


def _table(doc: dict[str, object], *keys: str) -> dict[str, object] | None:
    value: object = doc
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if isinstance(value, dict) else None


def _mypy_files(value: object) -> list[str]:
    """mypy's ``files`` setting as a list: TOML gives a list or a string, INI a string with
    commas."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list):
        return [v.strip() for v in value if isinstance(v, str) and v.strip()]
    return []


# --- where each gate is configured --------------------------------------------------------


class _Sightings:
    """The places each gate was found, and the files beyond its tool's own that configure it
    there, in the order found."""

    def __init__(self) -> None:
        self.places: dict[str, list[str]] = {}
        self.files: dict[str, list[str]] = {}

    def add(self, gate: str, place: str, *files: str) -> None:
        places = self.places.setdefault(gate, [])
        if place not in places:
            places.append(place)
        self.files.setdefault(gate, []).extend(f for f in files if f)


def _from_pyproject(repo: Path, found: _Sightings) -> None:
    doc = _toml(_read(repo, "pyproject.toml"))
    tool = _table(doc, "tool") or {}
    if "ruff" in tool:
        found.add("ruff", "pyproject.toml [tool.ruff]")
        if _table(doc, "tool", "ruff", "format") is not None:
            found.add("ruff-format", "pyproject.toml [tool.ruff.format]")
    for name in ("mypy", "pylint", "pyright", "black", "isort"):
        if name in tool:
            found.add(name, f"pyproject.toml [tool.{name}]")


def _from_ruff_toml(repo: Path, found: _Sightings) -> None:
    for name in ("ruff.toml", ".ruff.toml"):
        text = _read(repo, name)
        if text is not None:
            found.add("ruff", name)
            if "format" in _toml(text):
                found.add("ruff-format", f"{name} [format]")


def _from_ini_files(repo: Path, found: _Sightings) -> None:
    """The gates of ``setup.cfg``, ``tox.ini`` and the tools' own files (INI, and pyright's
    ``pyrightconfig.json``)."""
    for name, gate in (
        ("mypy.ini", "mypy"),
        (".mypy.ini", "mypy"),
        (".flake8", "flake8"),
        (".pylintrc", "pylint"),
        ("pylintrc", "pylint"),
        ("pyrightconfig.json", "pyright"),
        (".isort.cfg", "isort"),
    ):
        if _read(repo, name) is not None:
            found.add(gate, name)
    for section in _sections(_read(repo, "setup.cfg")):
        in_setup_cfg = SETUP_CFG_SECTIONS.get(section)
        if section.startswith("pylint."):
            in_setup_cfg = "pylint"
        if in_setup_cfg is not None:
            found.add(in_setup_cfg, f"setup.cfg [{section}]")
    _from_tox(_read(repo, "tox.ini"), found)


def _configured_mypy_files(repo: Path) -> list[str]:
    """The ``files`` of mypy's configuration. mypy reads one file, the first of mypy.ini,
    .mypy.ini, pyproject.toml with [tool.mypy], setup.cfg with [mypy]."""
    for name in ("mypy.ini", ".mypy.ini"):
        text = _read(repo, name)
        if text is not None:
            return _mypy_files(_ini(text).get("mypy", "files", fallback=""))
    table = _table(_toml(_read(repo, "pyproject.toml")), "tool", "mypy")
    if table is not None:
        return _mypy_files(table.get("files"))
    return _mypy_files(_ini(_read(repo, "setup.cfg")).get("mypy", "files", fallback=""))


def _from_tox(text: str | None, found: _Sightings) -> None:
    for section in _sections(text):
        if section in ("flake8", "isort"):
            found.add(section, f"tox.ini [{section}]")
    parser = _ini(text)
    for section in parser.sections():
        if section != "testenv" and not section.startswith("testenv:"):
            continue
        for line in parser.get(section, "commands", fallback="").splitlines():
            gate = _tox_command_gate(line)
            if gate is not None:
                found.add(gate, f"tox.ini [{section}] (commands)", "tox.ini")


def _tox_command_gate(line: str) -> str | None:
    """The gate a line of tox ``commands`` runs, if it runs one."""
    text = line.strip().lstrip("-!").strip()
    if not text or text.startswith("#"):
        return None
    # tox's own substitutions for the environment's interpreter and scripts.
    text = text.replace("{envpython}", "python").replace("{envbindir}/", "")
    program, args = program_of(text)
    gate = TOX_PROGRAMS.get(program)
    if gate == "ruff" and "format" in args:
        return "ruff-format"
    return gate


def _from_pre_commit(repo: Path, found: _Sightings, installed: Callable[[str], bool]) -> None:
    """The hooks of ``.pre-commit-config.yaml`` that are gates, read line by line. A hook
    counts only when its tool is installed: the night runs the tool itself, not pre-commit,
    so a hook it cannot run is left to pre-commit."""
    text = _read(repo, PRE_COMMIT_CONFIG)
    for line in (text or "").splitlines():
        match = _HOOK_ID.match(line)
        gate = PRE_COMMIT_HOOKS.get(match.group(1)) if match else None
        if match and gate is not None and installed(GATE_KINDS[gate][1]):
            found.add(gate, f"{PRE_COMMIT_CONFIG} (hook {match.group(1)})", PRE_COMMIT_CONFIG)


def _npm_gates(repo: Path) -> list[FoundGate]:
    try:
        doc = json.loads(_read(repo, "package.json") or "{}")
    except ValueError:
        return []
    scripts = doc.get("scripts") if isinstance(doc, dict) else None
    if not isinstance(scripts, dict):
        return []
    gates: list[FoundGate] = []
    for script in NPM_SCRIPTS:
        body = scripts.get(script)
        if not isinstance(body, str):
            continue
        # What the script runs configures the gate too (its eslint or prettier settings).
        files = ["package.json"]
        for tool in ("eslint", "prettier", "tsc"):
            if re.search(rf"\b{tool}\b", body):
                files.extend(_CONFIG_FILES[tool])
        gates.append(
            FoundGate(
                name=f"npm-{script}",
                command=shlex.join(["npm", "run", "--silent", script]),
                kind="findings",
                reader="exit-code",
                configured_in=f'package.json (script "{script}")',
                program="npm",
                config_files=tuple(dict.fromkeys(files)),
            )
        )
    return gates


# --- commands -----------------------------------------------------------------------------


def _packages(repo: Path) -> list[str]:
    """The package directories at the top or under ``src/`` (tests and docs aside), sorted;
    ``["src"]`` for a ``src/`` without packages."""

    def packages_in(directory: Path, prefix: str) -> list[str]:
        try:
            entries = sorted(directory.iterdir())
        except OSError:
            return []
        return [
            prefix + entry.name
            for entry in entries
            if entry.name not in _NOT_CODE
            and not entry.name.startswith(".")
            and entry.name.isidentifier()
            and (entry / "__init__.py").is_file()
        ]

    found = packages_in(repo, "")
    if found:
        return found
    src = repo / "src"
    if src.is_dir():
        return packages_in(src, "src/") or ["src"]
    return []


def _command(name: str, repo: Path, mypy_files: list[str], python: str) -> str:
    if name == "pyright":
        return shlex.join(["pyright", "--outputjson"])
    words = _python_command(name, repo, mypy_files)
    return shlex.join([python, *words[1:]])


def _python_command(name: str, repo: Path, mypy_files: list[str]) -> list[str]:
    if name == "ruff":
        # --no-fix: a repository may set fix = true, and a findings gate must not edit.
        words = ["python", "-m", "ruff", "check", "--output-format=json", "--no-cache", "--no-fix"]
        return [*words, "."]
    if name == "ruff-format":
        return ["python", "-m", "ruff", "format", "--no-cache", "."]
    if name == "flake8":
        # --format=default: a configured format (pylint's, say) would not be read.
        return ["python", "-m", "flake8", "--format=default", "."]
    if name == "mypy":
        if mypy_files and not any(c in _GLOB_CHARS for f in mypy_files for c in f):
            targets = mypy_files
        elif mypy_files:
            targets = []  # globs: mypy expands its configured files itself
        else:
            targets = _packages(repo) or ["."]
        return ["python", "-m", "mypy", *MYPY_FLAGS, *targets]
    if name == "pylint":
        targets = _packages(repo) or ["--recursive=y", "."]
        words = ["python", "-m", "pylint", "--output-format=json", "--persistent=n"]
        return [*words, *targets]
    if name == "black":
        return ["python", "-m", "black", "-q", "."]
    if name == "isort":
        return ["python", "-m", "isort", "-q", "."]
    raise ValueError(f"no command for the gate {name!r}")


def modules_of(interpreter: str) -> Callable[[str], bool]:
    """``installed(module)``: whether ``interpreter`` can import ``module``, asked once per
    module."""
    answers: dict[str, bool] = {}

    def installed(module: str) -> bool:
        if module not in answers:
            answers[module] = python_module_installed(interpreter, module)
        return answers[module]

    return installed


def discover_gates(
    repo: Path, installed: Callable[[str], bool] | None = None, python: str = "python"
) -> list[FoundGate]:
    """The gates ``repo`` configures, one per tool, in ``GATE_ORDER`` and then the
    ``package.json`` scripts. ``installed(module)`` says whether a Python module can be run
    (default: by the Python running this); it decides only for pre-commit hooks. ``python``
    is the first word of a Python tool's command: the word the tests are run with."""
    found = _Sightings()
    _from_pyproject(repo, found)
    _from_ruff_toml(repo, found)
    _from_ini_files(repo, found)
    _from_pre_commit(repo, found, installed or modules_of(sys.executable))
    mypy_files = _configured_mypy_files(repo) if "mypy" in found.places else []
    gates: list[FoundGate] = []
    for name in GATE_ORDER:
        if name not in found.places:
            continue
        kind, program, reader = GATE_KINDS[name]
        gates.append(
            FoundGate(
                name=name,
                command=_command(name, repo, mypy_files, python),
                kind=kind,
                reader=reader,
                configured_in=", ".join(found.places[name]),
                program=program,
                config_files=tuple(dict.fromkeys((*gate_config_files(name), *found.files[name]))),
            )
        )
    return gates + _npm_gates(repo)
