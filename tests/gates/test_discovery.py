"""Finding the checks a repository configures: each configuration file that names a linter,
formatter or type checker gives its gate (one per tool, wherever it is configured), pre-commit
hooks only for tools that are installed, and commands whose output options are fixed so that
the readers can read them."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from overnight.gates.discovery import (
    GATE_KINDS,
    GATE_ORDER,
    MYPY_FLAGS,
    PRE_COMMIT_CONFIG,
    FoundGate,
    discover_gates,
    gate_config_files,
    install_hint,
    modules_of,
    python_module_installed,
)
from overnight.gates.readers import READERS, reader_for


def write(repo: Path, name: str, text: str = "") -> Path:
    path = repo / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def everything(_module: str) -> bool:
    return True


def nothing(_module: str) -> bool:
    return False


def gates(
    repo: Path, installed: Callable[[str], bool] = everything, **kw: str
) -> dict[str, FoundGate]:
    found = discover_gates(repo, installed, **kw)
    names = [g.name for g in found]
    assert len(names) == len(set(names)), f"one gate per tool: {names}"
    return {g.name: g for g in found}


def words(gate: FoundGate) -> list[str]:
    return shlex.split(gate.command)


def assert_is(gate: FoundGate, name: str) -> None:
    """The gate is the known tool ``name``: its kind, program and reader, and a command the
    readers would read with the same reader."""
    kind, program, reader = GATE_KINDS[name]
    assert (gate.name, gate.kind, gate.program, gate.reader) == (name, kind, program, reader)
    assert gate.reader in READERS
    assert reader_for(gate.command) == gate.reader, gate.command


# --- each source ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "name", "configured_in"),
    [
        (
            {"pyproject.toml": "[tool.ruff]\nline-length = 100\n"},
            "ruff",
            "pyproject.toml [tool.ruff]",
        ),
        (
            {"pyproject.toml": "[tool.ruff.lint]\nselect = ['E']\n"},
            "ruff",
            "pyproject.toml [tool.ruff]",
        ),
        ({"pyproject.toml": "[tool.mypy]\nstrict = true\n"}, "mypy", "pyproject.toml [tool.mypy]"),
        (
            {"pyproject.toml": "[tool.black]\nline-length = 99\n"},
            "black",
            "pyproject.toml [tool.black]",
        ),
        (
            {"pyproject.toml": "[tool.isort]\nprofile = 'black'\n"},
            "isort",
            "pyproject.toml [tool.isort]",
        ),
        (
            {"pyproject.toml": "[tool.pylint.main]\njobs = 1\n"},
            "pylint",
            "pyproject.toml [tool.pylint]",
        ),
        (
            {"pyproject.toml": "[tool.pyright]\nstrict = ['src']\n"},
            "pyright",
            "pyproject.toml [tool.pyright]",
        ),
        ({"ruff.toml": "line-length = 100\n"}, "ruff", "ruff.toml"),
        ({".ruff.toml": "[lint]\nselect = ['E']\n"}, "ruff", ".ruff.toml"),
        ({"setup.cfg": "[flake8]\nmax-line-length = 100\n"}, "flake8", "setup.cfg [flake8]"),
        ({"setup.cfg": "[mypy]\nstrict = True\n"}, "mypy", "setup.cfg [mypy]"),
        ({"setup.cfg": "[isort]\nprofile = black\n"}, "isort", "setup.cfg [isort]"),
        ({"setup.cfg": "[tool:isort]\nprofile = black\n"}, "isort", "setup.cfg [tool:isort]"),
        ({"setup.cfg": "[pylint]\njobs = 1\n"}, "pylint", "setup.cfg [pylint]"),
        (
            {"setup.cfg": "[pylint.messages control]\ndisable = C\n"},
            "pylint",
            "setup.cfg [pylint.messages control]",
        ),
        ({"tox.ini": "[flake8]\nmax-line-length = 100\n"}, "flake8", "tox.ini [flake8]"),
        ({"tox.ini": "[isort]\nprofile = black\n"}, "isort", "tox.ini [isort]"),
        ({".flake8": "[flake8]\nmax-line-length = 100\n"}, "flake8", ".flake8"),
        ({"mypy.ini": "[mypy]\nstrict = True\n"}, "mypy", "mypy.ini"),
        ({".mypy.ini": "[mypy]\nstrict = True\n"}, "mypy", ".mypy.ini"),
        ({".pylintrc": "[MAIN]\njobs = 1\n"}, "pylint", ".pylintrc"),
        ({"pylintrc": "[MAIN]\njobs = 1\n"}, "pylint", "pylintrc"),
        ({"pyrightconfig.json": '{"include": ["src"]}'}, "pyright", "pyrightconfig.json"),
        ({".isort.cfg": "[settings]\nprofile = black\n"}, "isort", ".isort.cfg"),
    ],
)
def test_each_configuration_file_gives_its_gate(
    tmp_path: Path, files: dict[str, str], name: str, configured_in: str
) -> None:
    for file, text in files.items():
        write(tmp_path, file, text)
    found = gates(tmp_path)
    assert list(found) == [name]
    assert_is(found[name], name)
    assert found[name].configured_in == configured_in
    # The file it was found in is one of the files the tool reads: it is protected.
    assert configured_in.split(" ")[0] in found[name].config_files


@pytest.mark.parametrize(
    ("file", "text", "configured_in"),
    [
        (
            "pyproject.toml",
            "[tool.ruff]\n[tool.ruff.format]\nquote-style = 'single'\n",
            "pyproject.toml [tool.ruff.format]",
        ),
        ("ruff.toml", "[format]\nquote-style = 'single'\n", "ruff.toml [format]"),
        (".ruff.toml", "[format]\nquote-style = 'single'\n", ".ruff.toml [format]"),
    ],
)
def test_a_ruff_format_section_gives_the_ruff_format_gate_beside_ruff(
    tmp_path: Path, file: str, text: str, configured_in: str
) -> None:
    write(tmp_path, file, text)
    found = gates(tmp_path)
    assert list(found) == ["ruff", "ruff-format"]
    assert_is(found["ruff-format"], "ruff-format")
    assert found["ruff-format"].configured_in == configured_in


def test_ruff_without_a_format_section_gives_no_format_gate(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.ruff]\nline-length = 100\n[tool.ruff.lint]\n")
    write(tmp_path, "ruff.toml", "[lint]\nselect = ['E']\n")
    assert list(gates(tmp_path)) == ["ruff"]


def test_a_pyproject_without_tool_tables_gives_no_gate(tmp_path: Path) -> None:
    write(
        tmp_path,
        "pyproject.toml",
        '[project]\nname = "x"\ndependencies = ["ruff", "mypy"]\n'
        "[tool.pytest.ini_options]\naddopts = '-q'\n"
        "# [tool.ruff]\n",
    )
    assert gates(tmp_path) == {}


def test_a_repository_without_configuration_gives_no_gate(tmp_path: Path) -> None:
    write(tmp_path, "README.md", "ruff mypy black\n")
    write(tmp_path, "pkg/__init__.py")
    assert gates(tmp_path) == {}


def test_only_the_top_of_the_repository_is_read(tmp_path: Path) -> None:
    write(tmp_path, "sub/pyproject.toml", "[tool.ruff]\n")
    write(tmp_path, "sub/setup.cfg", "[flake8]\n")
    write(tmp_path, "sub/package.json", '{"scripts": {"lint": "eslint ."}}')
    assert gates(tmp_path) == {}


def test_a_directory_named_like_a_configuration_file_is_not_one(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").mkdir()
    (tmp_path / "mypy.ini").mkdir()
    (tmp_path / "package.json").mkdir()
    assert gates(tmp_path) == {}


def test_setup_cfg_sections_of_other_tools_give_no_gate(tmp_path: Path) -> None:
    write(
        tmp_path,
        "setup.cfg",
        "[metadata]\nname = x\n[options]\ninstall_requires =\n    flake8\n"
        "[mypy-somelib.*]\nignore_missing_imports = True\n[tool:pytest]\naddopts = -q\n",
    )
    assert gates(tmp_path) == {}


# --- tox commands ------------------------------------------------------------------------


def test_the_tools_a_tox_environment_runs_are_gates(tmp_path: Path) -> None:
    write(
        tmp_path,
        "tox.ini",
        "[tox]\nenvlist = py, lint\n\n"
        "[testenv]\ncommands = pytest {posargs}\n\n"
        "[testenv:lint]\n"
        "commands =\n"
        "    - ruff check .\n"
        "    ruff format --check .\n"
        "    {envpython} -m mypy src\n"
        "    !{envbindir}/flake8 src\n"
        "    # black .\n"
        "    pre-commit run --all-files\n\n"
        "[testenv:types]\ncommands = pyright\n",
    )
    found = gates(tmp_path)
    assert list(found) == ["ruff", "ruff-format", "flake8", "mypy", "pyright"]
    for name, gate in found.items():
        assert_is(gate, name)
        assert "tox.ini" in gate.config_files
    assert found["ruff"].configured_in == "tox.ini [testenv:lint] (commands)"
    assert found["pyright"].configured_in == "tox.ini [testenv:types] (commands)"


def test_a_tox_environment_that_runs_no_check_gives_no_gate(tmp_path: Path) -> None:
    write(
        tmp_path,
        "tox.ini",
        "[tox]\nenvlist = py\n[testenv]\ndeps = ruff\ncommands =\n    pytest\n    python -m build\n"
        "[pytest]\naddopts = -q\n[other]\ncommands = ruff check .\n",
    )
    assert gates(tmp_path) == {}


# --- pre-commit ---------------------------------------------------------------------------

PRE_COMMIT = """\
repos:
  - repo: https://github.com/astral-sh/ruff-pre-commit
    rev: v0.6.0
    hooks:
      - id: ruff
        args: [--fix]
      - id: "ruff-format"  # the formatter
  - repo: https://github.com/pre-commit/mirrors-mypy
    rev: v1.10.0
    hooks:
      - id: mypy
        additional_dependencies: [types-requests]
  - repo: https://github.com/psf/black
    rev: 24.1.0
    hooks:
    - id: black
  # - repo: https://github.com/pycqa/isort
  #   hooks:
  #     - id: isort
  - repo: https://github.com/pre-commit/pre-commit-hooks
    rev: v4.6.0
    hooks:
      - id: trailing-whitespace
      - id: check-yaml
"""


def test_pre_commit_hooks_of_installed_tools_are_gates(tmp_path: Path) -> None:
    write(tmp_path, PRE_COMMIT_CONFIG, PRE_COMMIT)
    found = gates(tmp_path)
    assert list(found) == ["ruff", "ruff-format", "mypy", "black"]
    for name, gate in found.items():
        assert_is(gate, name)
        assert gate.configured_in == f"{PRE_COMMIT_CONFIG} (hook {name})"
        assert PRE_COMMIT_CONFIG in gate.config_files
        assert set(gate_config_files(name)) <= set(gate.config_files)


def test_a_pre_commit_hook_whose_tool_is_not_installed_is_not_a_gate(tmp_path: Path) -> None:
    write(tmp_path, PRE_COMMIT_CONFIG, PRE_COMMIT)
    asked: list[str] = []

    def installed(module: str) -> bool:
        asked.append(module)
        return module != "mypy"

    found = gates(tmp_path, installed)
    assert list(found) == ["ruff", "ruff-format", "black"]
    # It is asked about the program the hook needs (ruff-format needs ruff).
    assert set(asked) == {"ruff", "mypy", "black"}
    assert gates(tmp_path, nothing) == {}


def test_installed_decides_only_for_pre_commit_hooks(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.mypy]\n")
    write(tmp_path, PRE_COMMIT_CONFIG, PRE_COMMIT)
    found = gates(tmp_path, nothing)
    assert list(found) == ["mypy"]
    assert found["mypy"].configured_in == "pyproject.toml [tool.mypy]"
    assert PRE_COMMIT_CONFIG not in found["mypy"].config_files


def test_pre_commit_hooks_default_to_the_modules_of_the_python_running_this(
    tmp_path: Path,
) -> None:
    write(tmp_path, PRE_COMMIT_CONFIG, "repos:\n  - repo: local\n    hooks:\n      - id: ruff\n")
    # ruff is a development dependency of this project, so this Python can import it.
    assert [g.name for g in discover_gates(tmp_path)] == ["ruff"]


@pytest.mark.parametrize("hook", ["ruff-check", "flake8", "isort", "pylint"])
def test_the_other_pre_commit_hook_ids(tmp_path: Path, hook: str) -> None:
    write(tmp_path, PRE_COMMIT_CONFIG, f"repos:\n- repo: local\n  hooks:\n  - id: {hook}\n")
    found = discover_gates(tmp_path, everything)
    assert len(found) == 1
    name = "ruff" if hook == "ruff-check" else hook
    assert_is(found[0], name)
    assert found[0].configured_in == f"{PRE_COMMIT_CONFIG} (hook {hook})"


# --- one gate per tool ------------------------------------------------------------------


def test_a_tool_configured_in_several_places_is_one_gate_listing_them_all(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.ruff]\n[tool.mypy]\n[tool.isort]\n")
    write(tmp_path, "ruff.toml", "line-length = 100\n")
    write(tmp_path, "mypy.ini", "[mypy]\n")
    write(tmp_path, "setup.cfg", "[mypy]\n[flake8]\n[isort]\n")
    write(tmp_path, "tox.ini", "[flake8]\n[testenv:lint]\ncommands = flake8 .\n")
    write(tmp_path, ".flake8", "[flake8]\n")
    write(tmp_path, ".isort.cfg", "[settings]\n")
    write(
        tmp_path, PRE_COMMIT_CONFIG, PRE_COMMIT + "  - repo: local\n    hooks:\n      - id: isort\n"
    )
    found = gates(tmp_path)
    assert list(found) == ["ruff", "ruff-format", "flake8", "mypy", "black", "isort"]
    assert found["ruff"].configured_in == (
        "pyproject.toml [tool.ruff], ruff.toml, .pre-commit-config.yaml (hook ruff)"
    )
    assert found["flake8"].configured_in == (
        ".flake8, setup.cfg [flake8], tox.ini [flake8], tox.ini [testenv:lint] (commands)"
    )
    assert found["mypy"].configured_in == (
        "pyproject.toml [tool.mypy], mypy.ini, setup.cfg [mypy], "
        ".pre-commit-config.yaml (hook mypy)"
    )
    assert found["isort"].configured_in == (
        "pyproject.toml [tool.isort], .isort.cfg, setup.cfg [isort], "
        ".pre-commit-config.yaml (hook isort)"
    )
    for gate in found.values():
        assert len(gate.config_files) == len(set(gate.config_files)), gate.config_files


def test_pyright_configured_in_pyproject_and_its_own_file_is_one_gate(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.pyright]\nstrict = ['src']\n")
    write(tmp_path, "pyrightconfig.json", '{"include": ["src"]}')
    (gate,) = discover_gates(tmp_path, everything)
    assert_is(gate, "pyright")
    assert gate.configured_in == "pyproject.toml [tool.pyright], pyrightconfig.json"
    assert gate.config_files == ("pyrightconfig.json", "pyproject.toml")


def test_the_same_place_is_listed_once(tmp_path: Path) -> None:
    write(
        tmp_path,
        "tox.ini",
        "[testenv:lint]\ncommands =\n    ruff check src\n    ruff check tests\n",
    )
    write(tmp_path, PRE_COMMIT_CONFIG, "repos:\n- hooks:\n  - id: ruff\n  - id: ruff\n")
    found = gates(tmp_path)
    assert found["ruff"].configured_in == (
        "tox.ini [testenv:lint] (commands), .pre-commit-config.yaml (hook ruff)"
    )


def test_gates_come_in_gate_order_then_the_npm_scripts(tmp_path: Path) -> None:
    write(tmp_path, "package.json", json.dumps({"scripts": {"lint": "eslint ."}}))
    write(tmp_path, "pyrightconfig.json", "{}")
    write(tmp_path, ".isort.cfg", "[settings]\n")
    write(tmp_path, "pyproject.toml", "[tool.black]\n[tool.pylint]\n[tool.ruff.format]\n")
    write(tmp_path, "mypy.ini", "[mypy]\n")
    write(tmp_path, ".flake8", "[flake8]\n")
    names = [g.name for g in discover_gates(tmp_path, everything)]
    assert names == [*GATE_ORDER, "npm-lint"]


# --- unreadable files -----------------------------------------------------------------------


def test_a_malformed_pyproject_configures_nothing(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.ruff\nline-length = = 1\n[tool.mypy]\n")
    assert gates(tmp_path) == {}


def test_a_malformed_pyproject_does_not_hide_the_other_files(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.mypy\n")
    write(tmp_path, "mypy.ini", "[mypy]\nfiles = src/pkg\n")
    write(tmp_path, ".flake8", "[flake8]\n")
    found = gates(tmp_path)
    assert list(found) == ["flake8", "mypy"]
    assert found["mypy"].configured_in == "mypy.ini"
    assert words(found["mypy"])[-1] == "src/pkg"


def test_a_pyproject_that_is_not_utf8_yields_no_crash(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes(b"[tool.ruff]\nx = '\xff\xfe'\n")
    (tmp_path / "setup.cfg").write_bytes(b"[flake8]\nmax = \xff\n")
    found = gates(tmp_path)
    assert "flake8" in found


def test_a_pyproject_whose_tool_is_not_a_table_configures_nothing(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", 'tool = "ruff"\n')
    assert gates(tmp_path) == {}


def test_a_malformed_setup_cfg_keeps_its_sections(tmp_path: Path) -> None:
    # configparser rejects the file (a line outside any section, a value with no key); the
    # tools' sections are still found by their headers.
    write(
        tmp_path,
        "setup.cfg",
        "stray line before any section\n[flake8]\nmax-line-length = 100\n"
        "[mypy]\nthis line has no equals sign\n[mypy]\nstrict = True\n",
    )
    found = gates(tmp_path)
    assert list(found) == ["flake8", "mypy"]
    assert found["mypy"].configured_in == "setup.cfg [mypy]"


def test_a_malformed_tox_ini_yields_no_crash(tmp_path: Path) -> None:
    write(tmp_path, "tox.ini", "no section\n[flake8\n[testenv]\ncommands = mypy\n")
    gates(tmp_path)  # no exception


def test_a_malformed_mypy_ini_still_gives_the_mypy_gate(tmp_path: Path) -> None:
    write(tmp_path, "mypy.ini", "files = src\nnot ini at all [[[\n")
    write(tmp_path, "pkg/__init__.py")
    found = gates(tmp_path)
    assert list(found) == ["mypy"]
    assert words(found["mypy"])[-1] == "pkg"


@pytest.mark.parametrize(
    "text",
    [
        '{"scripts": {"lint": "eslint ."},',
        "",
        "[1, 2]",
        '"lint"',
        '{"scripts": ["lint"]}',
        '{"scripts": {"lint": ["eslint", "."], "typecheck": null}}',
    ],
)
def test_a_malformed_package_json_gives_no_npm_gate(tmp_path: Path, text: str) -> None:
    write(tmp_path, "package.json", text)
    write(tmp_path, "pyproject.toml", "[tool.ruff]\n")
    assert list(gates(tmp_path)) == ["ruff"]


# --- commands ----------------------------------------------------------------------------

ALL_PYTHON_TOOLS = "[tool.ruff.format]\n[tool.mypy]\n[tool.black]\n[tool.isort]\n[tool.pylint]\n"


def test_python_tools_run_as_modules_of_the_given_python(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", ALL_PYTHON_TOOLS)
    write(tmp_path, ".flake8", "[flake8]\n")
    found = gates(tmp_path, python="/opt/project venv/bin/python3.12")
    assert set(found) == {"ruff", "ruff-format", "flake8", "mypy", "black", "isort", "pylint"}
    for name, gate in found.items():
        assert words(gate)[:3] == ["/opt/project venv/bin/python3.12", "-m", gate.program], name
        assert_is(gate, name)


def test_the_default_python_word_is_python(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", ALL_PYTHON_TOOLS)
    for gate in discover_gates(tmp_path, everything):
        assert words(gate)[:2] == ["python", "-m"], gate.command


def test_commands_carry_the_fixed_output_options(tmp_path: Path) -> None:
    # The repository's own output settings are what the fixed options override.
    write(
        tmp_path,
        "pyproject.toml",
        "[tool.ruff]\nfix = true\noutput-format = 'grouped'\n[tool.ruff.format]\n"
        "[tool.mypy]\npretty = true\n[tool.pylint.reports]\noutput-format = 'colorized'\n"
        "[tool.black]\n[tool.isort]\n[tool.pyright]\n",
    )
    write(tmp_path, ".flake8", "[flake8]\nformat = pylint\n")
    found = gates(tmp_path)
    ruff = words(found["ruff"])
    assert ruff[3] == "check"
    assert {"--output-format=json", "--no-fix", "--no-cache"} <= set(ruff)
    assert "--fix" not in ruff
    assert "--format=default" in words(found["flake8"])
    assert set(MYPY_FLAGS) <= set(words(found["mypy"]))
    assert "--cache-dir=/dev/null" in words(found["mypy"])
    assert {"--output-format=json", "--persistent=n"} <= set(words(found["pylint"]))
    assert words(found["pyright"]) == ["pyright", "--outputjson"]
    for name, gate in found.items():
        assert_is(gate, name)


def test_format_gates_rewrite_in_place_never_check(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", ALL_PYTHON_TOOLS)
    write(tmp_path, "tox.ini", "[testenv:fmt]\ncommands =\n    black --check --diff .\n")
    write(
        tmp_path, PRE_COMMIT_CONFIG, "repos:\n- hooks:\n  - id: isort\n    args: [--check-only]\n"
    )
    found = gates(tmp_path)
    formats = {name: g for name, g in found.items() if g.kind == "format"}
    assert set(formats) == {"ruff-format", "black", "isort"}
    for gate in formats.values():
        assert gate.reader == "exit-code"
        assert not {"--check", "--diff", "--check-only"} & set(words(gate)), gate.command
    assert words(formats["ruff-format"])[3] == "format"
    assert words(formats["ruff-format"])[-1] == "."
    assert words(formats["black"])[-1] == "."
    assert words(formats["isort"])[-1] == "."


def test_pyright_runs_as_its_own_program_whatever_the_python(tmp_path: Path) -> None:
    write(tmp_path, "pyrightconfig.json", "{}")
    (gate,) = discover_gates(tmp_path, everything, python="/venv/bin/python")
    assert gate.command == "pyright --outputjson"
    assert gate.program == "pyright"


# --- the targets of mypy and pylint -----------------------------------------------------


def mypy_targets(repo: Path) -> list[str]:
    gate = gates(repo)["mypy"]
    rest = words(gate)[3:]
    assert rest[: len(MYPY_FLAGS)] == list(MYPY_FLAGS)
    return rest[len(MYPY_FLAGS) :]


def pylint_targets(repo: Path) -> list[str]:
    return words(gates(repo)["pylint"])[5:]


def test_mypy_checks_its_configured_files(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", '[tool.mypy]\nfiles = ["src/pkg", "scripts/run.py"]\n')
    write(tmp_path, "src/other/__init__.py")
    assert mypy_targets(tmp_path) == ["src/pkg", "scripts/run.py"]


def test_mypy_files_as_a_toml_string(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", '[tool.mypy]\nfiles = "lib"\n')
    assert mypy_targets(tmp_path) == ["lib"]


def test_mypy_files_in_ini_are_split_on_commas(tmp_path: Path) -> None:
    write(tmp_path, "setup.cfg", "[mypy]\nfiles = src/a, src/b,\n    tools/c.py\n")
    assert mypy_targets(tmp_path) == ["src/a", "src/b", "tools/c.py"]


def test_mypy_with_globbed_files_expands_them_itself(tmp_path: Path) -> None:
    write(tmp_path, "mypy.ini", "[mypy]\nfiles = src/pkg, src/**/*.py\n")
    write(tmp_path, "src/pkg/__init__.py")
    assert mypy_targets(tmp_path) == []


def test_mypy_reads_the_first_configuration_file_only(tmp_path: Path) -> None:
    # mypy.ini comes first, then .mypy.ini, then pyproject.toml with [tool.mypy], then
    # setup.cfg with [mypy].
    write(tmp_path, "setup.cfg", "[mypy]\nfiles = from_setup_cfg\n")
    assert mypy_targets(tmp_path) == ["from_setup_cfg"]
    write(tmp_path, "pyproject.toml", "[tool.mypy]\nfiles = ['from_pyproject']\n")
    assert mypy_targets(tmp_path) == ["from_pyproject"]
    write(tmp_path, ".mypy.ini", "[mypy]\nfiles = from_dot_mypy_ini\n")
    assert mypy_targets(tmp_path) == ["from_dot_mypy_ini"]
    write(tmp_path, "mypy.ini", "[mypy]\nfiles = from_mypy_ini\n")
    assert mypy_targets(tmp_path) == ["from_mypy_ini"]


def test_a_mypy_ini_without_files_hides_the_files_of_the_others(tmp_path: Path) -> None:
    write(tmp_path, "mypy.ini", "[mypy]\nstrict = True\n")
    write(tmp_path, "pyproject.toml", "[tool.mypy]\nfiles = ['elsewhere']\n")
    write(tmp_path, "src/pkg/__init__.py")
    assert mypy_targets(tmp_path) == ["src/pkg"]


def test_a_pyproject_without_tool_mypy_does_not_hide_setup_cfg(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.ruff]\n")
    write(tmp_path, "setup.cfg", "[mypy]\nfiles = lib\n")
    assert mypy_targets(tmp_path) == ["lib"]


def test_mypy_without_files_checks_the_packages_under_src(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.mypy]\nstrict = true\n[tool.pylint]\n")
    for name in ("src/zeta/__init__.py", "src/alpha/__init__.py", "src/tests/__init__.py"):
        write(tmp_path, name)
    write(tmp_path, "src/not_a_package/module.py")
    write(tmp_path, "src/not-an-identifier/__init__.py")
    write(tmp_path, "tests/__init__.py")
    assert mypy_targets(tmp_path) == ["src/alpha", "src/zeta"]
    assert pylint_targets(tmp_path) == ["src/alpha", "src/zeta"]


def test_top_level_packages_come_before_src(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.mypy]\n[tool.pylint]\n")
    write(tmp_path, "src/inner/__init__.py")
    for name in ("pkg", "tests", "docs", "build", "examples", ".hidden"):
        write(tmp_path, f"{name}/__init__.py")
    write(tmp_path, "setup.py", "")
    assert mypy_targets(tmp_path) == ["pkg"]
    assert pylint_targets(tmp_path) == ["pkg"]


def test_a_src_without_packages_is_checked_whole(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.mypy]\n[tool.pylint]\n")
    write(tmp_path, "src/module.py")
    assert mypy_targets(tmp_path) == ["src"]
    assert pylint_targets(tmp_path) == ["src"]


def test_without_packages_the_whole_tree_is_checked(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.mypy]\n[tool.pylint]\n")
    write(tmp_path, "script.py")
    write(tmp_path, "tests/__init__.py")
    assert mypy_targets(tmp_path) == ["."]
    assert pylint_targets(tmp_path) == ["--recursive=y", "."]


def test_ruff_and_flake8_check_the_whole_tree(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.ruff]\nsrc = ['src']\n")
    write(tmp_path, "setup.cfg", "[flake8]\nfilename = src/*.py\n")
    write(tmp_path, "src/pkg/__init__.py")
    found = gates(tmp_path)
    assert words(found["ruff"])[-1] == "."
    assert words(found["flake8"])[-1] == "."


# --- configuration files ---------------------------------------------------------------


def test_config_files_are_the_files_the_tool_reads_present_or_not(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", ALL_PYTHON_TOOLS + "[tool.pyright]\n")
    write(tmp_path, ".flake8", "[flake8]\n")
    found = gates(tmp_path)
    assert found["ruff"].config_files == ("pyproject.toml", "ruff.toml", ".ruff.toml")
    assert found["ruff-format"].config_files == found["ruff"].config_files
    assert found["flake8"].config_files == ("setup.cfg", "tox.ini", ".flake8")
    assert set(found["mypy"].config_files) == {
        "mypy.ini",
        ".mypy.ini",
        "setup.cfg",
        "pyproject.toml",
    }
    assert found["black"].config_files == ("pyproject.toml",)
    assert {".isort.cfg", "pyproject.toml", "setup.cfg", "tox.ini", ".editorconfig"} == set(
        found["isort"].config_files
    )
    assert {".pylintrc", "pylintrc", "pyproject.toml", "setup.cfg"} <= set(
        found["pylint"].config_files
    )
    assert found["pyright"].config_files == ("pyrightconfig.json", "pyproject.toml")
    for name, gate in found.items():
        assert gate.config_files == gate_config_files(name)


def test_config_files_add_where_a_tool_is_run(tmp_path: Path) -> None:
    write(tmp_path, "tox.ini", "[testenv]\ncommands = mypy\n")
    write(tmp_path, PRE_COMMIT_CONFIG, "repos:\n- hooks:\n  - id: black\n")
    found = gates(tmp_path)
    assert found["mypy"].config_files == (*gate_config_files("mypy"), "tox.ini")
    assert found["black"].config_files == ("pyproject.toml", PRE_COMMIT_CONFIG)


def test_gate_config_files() -> None:
    assert gate_config_files("npm-lint") == ("package.json",)
    assert gate_config_files("npm-format:check") == ("package.json",)
    assert gate_config_files("ruff-format") == gate_config_files("ruff")
    assert "mypy.ini" in gate_config_files("mypy")
    assert "pyrightconfig.json" in gate_config_files("pyright")
    assert gate_config_files("no-such-tool") == ()
    for name in GATE_ORDER:
        assert gate_config_files(name), name


# --- package.json -----------------------------------------------------------------------


def test_package_json_check_scripts_are_npm_gates(tmp_path: Path) -> None:
    scripts = {
        "build": "tsc -p .",
        "test": "jest",
        "format": "prettier --write .",
        "format:check": "prettier --check .",
        "type-check": "tsc --noEmit",
        "typecheck": "vue-tsc --noEmit",
        "lint": "eslint --max-warnings 0 .",
    }
    write(tmp_path, "package.json", json.dumps({"name": "x", "scripts": scripts}))
    found = discover_gates(tmp_path, everything)
    assert [g.name for g in found] == [
        "npm-lint",
        "npm-typecheck",
        "npm-type-check",
        "npm-format:check",
    ]
    by_name = {g.name: g for g in found}
    for script in ("lint", "typecheck", "type-check", "format:check"):
        gate = by_name[f"npm-{script}"]
        assert words(gate) == ["npm", "run", "--silent", script]
        assert (gate.kind, gate.reader, gate.program) == ("findings", "exit-code", "npm")
        assert gate.configured_in == f'package.json (script "{script}")'
        assert gate.config_files[0] == "package.json"
        assert install_hint(gate.program) == "npm install"
    # What the script runs configures it too.
    assert {".eslintrc.json", "eslint.config.js", ".eslintignore"} <= set(
        by_name["npm-lint"].config_files
    )
    assert ".prettierrc" not in by_name["npm-lint"].config_files
    assert {".prettierrc", "prettier.config.js", ".editorconfig"} <= set(
        by_name["npm-format:check"].config_files
    )
    assert by_name["npm-type-check"].config_files == ("package.json", "tsconfig.json")
    # "vue-tsc" names tsc as a word of its own.
    assert "tsconfig.json" in by_name["npm-typecheck"].config_files
    for gate in found:
        assert len(gate.config_files) == len(set(gate.config_files))


def test_package_json_without_check_scripts_gives_no_gate(tmp_path: Path) -> None:
    write(
        tmp_path,
        "package.json",
        json.dumps({"scripts": {"build": "tsc", "lint:fix": "eslint --fix ."}, "lint": "eslint"}),
    )
    assert gates(tmp_path) == {}


def test_npm_gates_are_found_beside_python_gates(tmp_path: Path) -> None:
    write(tmp_path, "package.json", json.dumps({"scripts": {"lint": "eslint ."}}))
    write(tmp_path, "pyproject.toml", "[tool.ruff]\n")
    assert list(gates(tmp_path, nothing)) == ["ruff", "npm-lint"]


# --- installing and finding the programs ------------------------------------------------


def test_install_hint() -> None:
    assert install_hint("npm") == "npm install"
    for program in ("ruff", "flake8", "mypy", "pylint", "black", "isort", "pyright"):
        assert install_hint(program) == f"pip install {program}"
    assert install_hint("eslint") == "install eslint"


def test_every_known_gate_has_a_hint_naming_pip() -> None:
    for name in GATE_ORDER:
        assert install_hint(GATE_KINDS[name][1]).startswith("pip install ")


def test_python_module_installed_asks_the_interpreter(tmp_path: Path) -> None:
    assert python_module_installed(sys.executable, "json")
    assert python_module_installed(sys.executable, "ruff")
    assert not python_module_installed(sys.executable, "no_such_module_for_overnight")
    assert not python_module_installed(str(tmp_path / "no-such-python"), "json")
    write(tmp_path, "not_a_python", "")
    assert not python_module_installed(str(tmp_path / "not_a_python"), "json")


def test_a_module_in_the_current_directory_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "overnight_local_only_module.py", "")
    monkeypatch.chdir(tmp_path)
    assert not python_module_installed(sys.executable, "overnight_local_only_module")


def fake_interpreter(tmp_path: Path, log: Path) -> str:
    """An executable that records the module it is asked about and says only ``yes`` is
    installed (called as ``<it> -c <code> <module>``)."""
    script = write(
        tmp_path,
        "fake-python",
        f'#!/bin/sh\necho "$3" >> {shlex.quote(str(log))}\n[ "$3" = yes ]\n',
    )
    script.chmod(0o755)
    return str(script)


@pytest.mark.skipif(os.name != "posix", reason="a shell script as the interpreter")
def test_modules_of_asks_once_per_module(tmp_path: Path) -> None:
    log = tmp_path / "asked.log"
    installed = modules_of(fake_interpreter(tmp_path, log))
    assert installed("yes")
    assert not installed("no")
    assert installed("yes")
    assert not installed("no")
    assert log.read_text().splitlines() == ["yes", "no"]


@pytest.mark.skipif(os.name != "posix", reason="a shell script as the interpreter")
def test_modules_of_drives_pre_commit_discovery(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write(repo, PRE_COMMIT_CONFIG, PRE_COMMIT)
    log = tmp_path / "asked.log"
    assert discover_gates(repo, modules_of(fake_interpreter(tmp_path, log))) == []
    assert sorted(log.read_text().splitlines()) == ["black", "mypy", "ruff"]
