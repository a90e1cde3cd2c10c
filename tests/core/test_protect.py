"""What judges the work: which changes of a candidate count as touching it."""

from __future__ import annotations

import sys

import pytest

from overnight.core.protect import ChangedPath, Protection, build_protection, named_paths

BASE_FILES = {
    "calc.py",
    "README.md",
    "tests/test_calc.py",
    "src/pkg/__init__.py",
    "src/pkg/tests/helpers.py",
    "scripts/check.py",
    "Makefile",
}
BASE_DIRS = {"tests", "src", "src/pkg", "src/pkg/tests", "scripts"}
MODULES = set(sys.stdlib_module_names) | {"pytest", "_pytest", "requests"}


def default(*commands: str) -> Protection:
    return build_protection(None, list(commands), BASE_FILES, BASE_DIRS, MODULES)


def flagged(protection: Protection, *changes: tuple[str, str]) -> list[str]:
    return protection.violations(ChangedPath(status, path) for status, path in changes)


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_calc.py",
        "tests/data/expected.json",
        "src/pkg/tests/helpers.py",
        "conftest.py",
        "src/pkg/conftest.py",
        "test_anything.py",
        "src/pkg/thing_test.py",
        "src/pkg/tests.py",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
        "noxfile.py",
        "src/pkg/pytest.ini",
    ],
)
def test_the_default_protects_the_usual_test_machinery_at_any_depth(path: str) -> None:
    assert default().rule_for(path) is not None


@pytest.mark.parametrize("path", ["calc.py", "src/pkg/core.py", "testing.py", "docs/tests.md"])
def test_the_default_leaves_the_code_under_test_alone(path: str) -> None:
    assert default().rule_for(path) is None


def test_creating_a_protected_file_is_a_change_like_editing_one() -> None:
    p = default()
    assert flagged(p, ("A", "conftest.py")) == [
        "`conftest.py` is protected (created): matches protect glob '**/conftest.py'"
    ]
    assert flagged(p, ("M", "tests/test_calc.py"))
    assert flagged(p, ("D", "tests/test_calc.py"))[0].startswith(
        "`tests/test_calc.py` is protected (deleted)"
    )
    assert flagged(p, ("T", "tests/test_calc.py"))  # replaced by a symlink
    assert flagged(p, ("M", "calc.py")) == []


def test_what_the_predicate_names_is_protected_with_the_default() -> None:
    p = default("python3 scripts/check.py --strict", "make check")
    assert p.rule_for("scripts/check.py") == "named by the goal predicate or a verify command"
    assert p.rule_for("Makefile") is not None  # what make reads judges as much as the tests
    assert default().rule_for("scripts/check.py") is None


def test_a_named_directory_protects_everything_under_it() -> None:
    p = default("python3 -m pytest src/pkg")
    assert p.rule_for("src/pkg/core.py") is not None
    assert p.rule_for("src/pkgs/core.py") is None


def test_named_paths_reads_modules_options_and_skips_what_is_not_a_repository_path() -> None:
    found = named_paths(["python3 -m tools.gate --config=ci/gate.toml /etc/x ../up *.py -q"])
    # Every word is a candidate (the caller keeps those the base tree holds); absolute,
    # parent-relative and glob words never are.
    assert found == ["python3", "tools/gate", "tools/gate.py", "ci/gate.toml"]


def test_a_spec_protect_list_replaces_the_default() -> None:
    # A night that writes tests: the existing tests and the runner's config stay judged,
    # new test files are the work.
    p = build_protection(
        ["tests/test_calc.py", "**/conftest.py", "pyproject.toml"],
        ["python3 scripts/check.py"],
        BASE_FILES,
        BASE_DIRS,
        MODULES,
    )
    assert p.rule_for("tests/test_new.py") is None
    assert p.rule_for("tests/test_calc.py") is not None
    assert p.rule_for("tests/conftest.py") is not None
    assert p.rule_for("scripts/check.py") is None  # the spec's list is the whole list


@pytest.mark.parametrize(
    "path",
    ["pytest.py", "_pytest/__init__.py", "unittest/__init__.py", "site.py"],
)
def test_a_new_top_level_module_shadowing_the_runner_is_flagged(path: str) -> None:
    [line] = flagged(default(), ("A", path))
    assert "shadows the installed module" in line


def test_the_projects_own_top_level_names_and_nested_modules_are_not_shadowing() -> None:
    p = default()
    assert flagged(p, ("A", "calc/__init__.py")) == []  # calc.py is the project's own name
    assert flagged(p, ("A", "src/pkg/json.py")) == []  # not on sys.path first
    assert flagged(p, ("A", "notes.txt")) == []


@pytest.mark.parametrize(
    "path", ["__pycache__/calc.cpython-312.pyc", "src/pkg/__pycache__/core.pyc", "calc.pyc"]
)
def test_compiled_bytecode_is_always_flagged(path: str) -> None:
    p = build_protection([], [], BASE_FILES, BASE_DIRS, MODULES)  # even with nothing protected
    [line] = flagged(p, ("A", path))
    assert "bytecode" in line


def test_a_nested_repository_is_always_flagged() -> None:
    p = build_protection([], [], BASE_FILES, BASE_DIRS, MODULES)
    changes = [ChangedPath("A", "vendor/lib", nested_repository=True)]
    assert p.violations(changes) == [
        "`vendor/lib` is a nested git repository (created): git would record it as a submodule"
    ]


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("pkg/x.pth", "a .pth file"),
        ("x.pth", "a .pth file"),
        ("speedups-1.0.dist-info/entry_points.txt", "package metadata"),
        ("src/pkg.egg-info/entry_points.txt", "package metadata"),
        ("sitecustomize.py", "imports by itself at start-up"),
        ("deep/er/usercustomize.py", "imports by itself at start-up"),
    ],
)
def test_import_machinery_anywhere_is_always_flagged_with_its_path_first(
    path: str, rule: str
) -> None:
    p = build_protection([], [], BASE_FILES, BASE_DIRS, MODULES)  # even with nothing protected
    [line] = flagged(p, ("A", path))
    assert line.startswith(f"`{path}` is ")
    assert rule in line
    assert flagged(p, ("D", path)) == []  # removing it runs nothing
    assert flagged(p, ("A", "pkg/notes.pthx")) == []
