"""A suite that needs installed pytest plugins (``--cov`` in ``addopts``, ``asyncio_mode``)
under a harness that runs pytest with plugin autoload off: the plugins are found in the
project's Python, a refusal names them and the line to add, `overnight init` writes that
line and the night it wrote starts and ends met. Real projects in git repositories, the CLI
in a process of its own, real pytest runs, real plugins (pytest-cov, pytest-asyncio)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from overnight.night.plugins import (
    Installed,
    PytestConfig,
    advise,
    failed_names,
    installed_plugins,
    project_python,
    read_config,
)
from tests.helpers.nights import command_task, git, make_repo, spec_data, write_spec
from tests.helpers.project import (
    CALC,
    GOAL,
    SCRIPTED_PAGE,
    branches,
    doc_block,
    home,
    overnight,
    worktrees,
)
from tests.helpers.sandbox import require_bwrap

#: The most common configuration there is, and an async suite run in auto mode.
PYPROJECT = """[tool.pytest.ini_options]
addopts = "--cov=calc --no-cov-on-fail"
asyncio_mode = "auto"
"""

#: calc with its one test async; .coverage ignored as a project using pytest-cov ignores it.
ASYNC_CALC = {
    **CALC,
    "tests/test_ops.py": (
        "from calc.ops import add\n\n\nasync def test_add():\n    assert add(2, 2) == 4\n"
    ),
    "pyproject.toml": PYPROJECT,
    ".gitignore": "__pycache__/\n.pytest_cache/\n.coverage\n",
}

LINE = '[predicate] pytest_plugins = ["pytest_cov", "asyncio"]'


def _line(out: str, check: str) -> str:
    found = [line for line in out.splitlines() if line.startswith(check)]
    assert found, f"no {check} line in:\n{out}"
    return found[0]


def _checked(tmp_path: Path, files: dict[str, str], **predicate: object) -> tuple[int, str, Path]:
    repo = make_repo(tmp_path / "calc", files)
    data = spec_data(
        repo,
        model=False,
        predicate="python -m pytest -q",
        tasks=[command_task("t", "true", "true")],
    )
    data["predicate"].update(predicate)
    done = overnight("check", str(write_spec(tmp_path / "night.toml", data)))
    return done.returncode, done.stdout + done.stderr, repo


def test_a_base_that_cannot_start_for_plugin_options_names_the_plugins_and_the_line(
    tmp_path: Path,
) -> None:
    code, out, repo = _checked(tmp_path, ASYNC_CALC)
    assert code == 64, out
    said = _line(out, "predicate")
    assert said.split()[1:3] == ["failed", "predicate.pytest_plugins:"], said
    assert "cannot run on a clean checkout of the base commit" in said
    assert "(exit 4: pytest usage error)" in said
    assert "pytest_cov (pytest-cov) for --cov, --no-cov-on-fail" in said
    assert "asyncio (pytest-asyncio) for asyncio_mode" in said
    assert said.endswith(
        f"(fix: add this line to the spec, since only the plugins it lists load: {LINE})"
    )
    assert "name tests that exist" not in out
    # pytest's own words stay under it
    assert "unrecognized arguments: --cov=calc --no-cov-on-fail" in out
    assert not home().exists() and branches(repo) == ["main"] and worktrees(repo) == 1


def test_overnight_run_refuses_it_too_keeping_the_plugins_the_spec_lists(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "calc", ASYNC_CALC)
    data = spec_data(
        repo,
        model=False,
        predicate="python -m pytest -q",
        tasks=[command_task("t", "true", "true")],
    )
    data["predicate"]["pytest_plugins"] = ["xdist"]
    done = overnight("run", str(write_spec(tmp_path / "night.toml", data)), "--quiet")
    assert done.returncode == 64, done.stdout + done.stderr
    assert "predicate.pytest_plugins" in done.stderr
    assert '[predicate] pytest_plugins = ["xdist", "pytest_cov", "asyncio"]' in done.stderr
    assert not home().exists()


def test_init_writes_the_plugins_and_its_night_starts_and_ends_met(tmp_path: Path) -> None:
    require_bwrap()
    repo = make_repo(tmp_path / "calc", ASYNC_CALC)
    done = overnight("init", str(repo), "--goal", GOAL, "--provider", "script")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"with {LINE}" in done.stdout
    text = (repo / "night.toml").read_text()
    spec = tomllib.loads(text)
    assert spec["predicate"]["pytest_plugins"] == ["pytest_cov", "asyncio"]
    # the comment says why: which option needs which plugin, and where it was found
    comment = " ".join(
        line.removeprefix("# ")
        for line in text.split("[predicate]")[1].split("pytest_plugins =")[0].splitlines()
        if line.startswith("#")
    )
    assert "autoload off" in comment and "pyproject.toml [tool.pytest.ini_options]" in comment
    assert "pytest_cov (pytest-cov) for --cov, --no-cov-on-fail" in comment
    assert "asyncio (pytest-asyncio) for asyncio_mode" in comment
    # the start check ran: the async test ran (under pytest-asyncio) and failed on the bug
    said = _line(done.stdout, "predicate")
    assert "ok" in said.split()[:2] and "failed: tests/test_ops.py::test_add" in said, said
    assert "note:" not in said

    (repo / "turns.toml").write_text(doc_block(SCRIPTED_PAGE, "`turns.toml`:"))
    night = overnight("run", str(repo / "night.toml"), "--quiet")
    assert night.returncode == 0, night.stdout + night.stderr
    (result_path,) = home().glob("runs/*/result.json")
    result = json.loads(result_path.read_text())
    assert result["stop_reason"] == "GOAL_MET"
    assert result["predicate"]["verdict"].startswith("met: 1 passed")
    branch = result["branch"]["name"]
    assert git(repo, "diff", "--name-only", f"main..{branch}") == "calc/ops.py"


def test_an_option_no_installed_plugin_provides_is_named_as_such(tmp_path: Path) -> None:
    files = {**CALC, "pytest.ini": "[pytest]\naddopts = --frobnicate-harder\n"}
    code, out, _ = _checked(tmp_path, files)
    assert code == 64, out
    said = _line(out, "predicate")
    assert "predicate.pytest_plugins:" in said
    assert f"no installed pytest plugin of {sys.executable}" in said.replace("No ", "no ")
    assert "provides --frobnicate-harder" in said
    assert "take --frobnicate-harder out of the command and configuration" in said
    assert "pytest_plugins = [" not in said  # nothing installed to list


def test_a_well_known_plugin_not_installed_is_named_with_its_distribution(tmp_path: Path) -> None:
    if importlib.util.find_spec("pytest_timeout") is not None:
        pytest.skip("pytest-timeout is installed here")
    files = {**CALC, "pytest.ini": "[pytest]\naddopts = --timeout=5 --cov=calc\n"}
    code, out, _ = _checked(tmp_path, files)
    assert code == 64, out
    said = _line(out, "predicate")
    assert "provides --timeout (--timeout is pytest-timeout's)" in said
    assert "pytest_cov (pytest-cov) for --cov" in said
    assert "(pytest-timeout for --timeout)" in said
    assert 'for the plugins found installed: [predicate] pytest_plugins = ["pytest_cov"]' in said


def test_a_base_that_runs_with_its_async_tests_failing_gets_the_plugin_in_a_note(
    tmp_path: Path,
) -> None:
    # asyncio_mode alone is a warning: pytest starts, and the async test fails unrun.
    files = {**ASYNC_CALC, "pyproject.toml": '[tool.pytest.ini_options]\nasyncio_mode = "auto"\n'}
    code, out, _ = _checked(tmp_path, files)
    assert code == 0, out
    said = _line(out, "predicate")
    assert "not met" in said and "note:" in said
    assert "asyncio (pytest-asyncio) for asyncio_mode" in said
    assert '[predicate] pytest_plugins = ["asyncio"]' in said


def test_check_proposes_the_plugins_the_configuration_names_when_the_base_runs_without(
    tmp_path: Path,
) -> None:
    # Nothing in pytest's output says what is missing (its warning filtered away): check reads
    # the configuration itself, as init does.
    config = (
        '[tool.pytest.ini_options]\nasyncio_mode = "auto"\n'
        'filterwarnings = ["ignore::pytest.PytestConfigWarning"]\n'
    )
    code, out, _ = _checked(tmp_path, {**CALC, "pyproject.toml": config})
    assert code == 0, out
    said = _line(out, "predicate")
    assert "note: in the pytest configuration (pyproject.toml [tool.pytest.ini_options])" in said
    assert "asyncio (pytest-asyncio) for asyncio_mode" in said
    assert said.endswith('[predicate] pytest_plugins = ["asyncio"]')
    # listed: nothing more to propose
    code, out, _ = _checked(
        tmp_path / "listed", {**CALC, "pyproject.toml": config}, pytest_plugins=["asyncio"]
    )
    assert code == 0 and "note:" not in _line(out, "predicate"), out


def test_a_strict_marker_of_a_plugin_is_traced_to_it(tmp_path: Path) -> None:
    files = {
        **CALC,
        "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "--strict-markers"\n',
        "tests/test_ops.py": (
            "import pytest\n\nfrom calc.ops import add\n\n\n@pytest.mark.asyncio\n"
            "async def test_add():\n    assert add(2, 2) == 4\n"
        ),
    }
    code, out, _ = _checked(tmp_path, files)
    assert code == 64, out
    said = _line(out, "predicate")
    assert "asyncio (pytest-asyncio) for the marker asyncio" in said
    assert said.endswith('[predicate] pytest_plugins = ["asyncio"])')


def test_a_spec_that_lists_the_plugins_starts(tmp_path: Path) -> None:
    code, out, _ = _checked(tmp_path, ASYNC_CALC, pytest_plugins=["pytest_cov", "asyncio"])
    assert code == 0, out
    said = _line(out, "predicate")
    assert "failed: tests/test_ops.py::test_add" in said and "note:" not in said


# The finder on its own.

BROKEN_PLUGINS = {
    "planted-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: planted\nVersion: 1.0\n",
    "planted-1.0.dist-info/entry_points.txt": (
        "[pytest11]\n"
        "raises_in_addoption = planted_raises\n"
        "parser_only = planted_parser_only\n"
        "raises_at_import = planted_import\n"
        "exits_in_addoption = planted_exits\n"
    ),
    "planted_raises.py": (
        "def pytest_addoption(parser, pluginmanager):\n"
        "    parser.addoption('--before-the-raise')\n"
        "    raise RuntimeError('no options today')\n"
    ),
    "planted_parser_only.py": (
        "import pytest\n\n\n"
        "def pytest_addoption(parser):\n"
        "    parser.getgroup('p').addoption('--parser-only', '-P')\n"
        "    parser.addini('parser_only_key', 'a key')\n\n\n"
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'planted_mark(reason): a mark')\n\n\n"
        "@pytest.fixture\n"
        "def planted_fixture():\n"
        "    return 1\n"
    ),
    "planted_import.py": "raise ImportError('cannot import me')\n",
    "planted_exits.py": "import sys\n\n\ndef pytest_addoption(parser):\n    sys.exit(3)\n",
}


def test_a_plugin_whose_addoption_raises_does_not_break_the_finder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    for rel, text in BROKEN_PLUGINS.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    found = installed_plugins(sys.executable)
    assert found.error == "", found
    plugins = found.plugins
    raises = plugins["raises_in_addoption"]
    assert raises.options == ("--before-the-raise",)
    assert "RuntimeError: no options today" in raises.error and raises.dist == "planted"
    only = plugins["parser_only"]
    assert set(only.options) == {"--parser-only", "-P"} and only.ini == ("parser_only_key",)
    assert only.markers == ("planted_mark",) and only.fixtures == ("planted_fixture",)
    assert "ImportError: cannot import me" in plugins["raises_at_import"].error
    assert "SystemExit" in plugins["exits_in_addoption"].error
    # the real plugins beside them are read as ever
    assert "--cov" in plugins["pytest_cov"].options and plugins["pytest_cov"].dist == "pytest-cov"
    assert "asyncio_mode" in plugins["asyncio"].ini and "asyncio" in plugins["asyncio"].markers
    advice = advise(
        found, PytestConfig("pytest.ini", ("-P", "x", "--cov=calc"), ("parser_only_key",)), "pytest"
    )
    assert [(n.plugin.name, n.uses) for n in advice.needs] == [
        ("parser_only", ("-P", "parser_only_key")),
        ("pytest_cov", ("--cov",)),
    ]


def test_a_finder_that_cannot_run_is_an_empty_answer(tmp_path: Path) -> None:
    missing = installed_plugins(str(tmp_path / "no-python"))
    assert missing.plugins == {} and "cannot start" in missing.error
    not_python = tmp_path / "sleeper"
    not_python.write_text("#!/bin/sh\nsleep 30\n")
    not_python.chmod(0o755)
    slow = installed_plugins(str(not_python), timeout_s=0.5)
    assert slow.plugins == {} and "took over 0.5 s" in slow.error
    advice = advise(Installed("python", error="x"), read_config(tmp_path), "pytest -q --cov=x")
    assert [m.name for m in advice.missing] == ["--cov"]  # known: pytest-cov
    assert advice.missing[0].dist == "pytest-cov" and "could not list" in advice.missing_said()


def test_the_project_python_is_the_one_the_predicate_starts(tmp_path: Path) -> None:
    here = str(Path(sys.executable).parent)
    path = f"{here}{os.pathsep}{os.environ.get('PATH', '')}"
    # `pytest` by its script's #! line; `python3 -m pytest` by its word
    assert os.path.samefile(project_python("pytest -q", path), sys.executable)
    assert project_python("PYTHONWARNINGS=x python3 -m pytest", path) == f"{here}/python3"
    assert project_python("env A=1 python -m pytest", path) == f"{here}/python"


# pytest's configuration, and its words.


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.parametrize(
    ("files", "file", "addopts", "ini"),
    [
        (
            {"pyproject.toml": PYPROJECT, "setup.cfg": "[tool:pytest]\naddopts = -x\n"},
            "pyproject.toml [tool.pytest.ini_options]",
            ("--cov=calc", "--no-cov-on-fail"),
            ("asyncio_mode",),
        ),
        (
            {
                "pytest.ini": "[pytest]\naddopts = -n 4\n  --timeout 5\n",
                "pyproject.toml": PYPROJECT,
            },
            "pytest.ini",
            ("-n", "4", "--timeout", "5"),
            (),
        ),
        (
            {"pyproject.toml": '[tool.pytest]\naddopts = ["--cov", "pkg"]\nasyncio_mode = 1\n'},
            "pyproject.toml [tool.pytest]",
            ("--cov", "pkg"),
            ("asyncio_mode",),
        ),
        (
            {"pytest.toml": '[pytest]\naddopts = ["-p", "xdist"]\n', "pytest.ini": "[pytest]\n"},
            "pytest.toml [pytest]",
            ("-p", "xdist"),
            (),
        ),
        (
            {"tox.ini": "[tox]\n[pytest]\ntimeout = 3\n", "setup.cfg": "[tool:pytest]\nx = 1\n"},
            "tox.ini [pytest]",
            (),
            ("timeout",),
        ),
        (
            {"setup.cfg": "[tool:pytest]\naddopts = --benchmark-skip\nDJANGO_SETTINGS_MODULE=s\n"},
            "setup.cfg [tool:pytest]",
            ("--benchmark-skip",),
            ("DJANGO_SETTINGS_MODULE",),
        ),
        ({"setup.cfg": "[metadata]\nname = x\n", "tox.ini": "[tox]\n"}, None, (), ()),
    ],
)
def test_the_configuration_is_read_from_the_file_pytest_chooses(
    tmp_path: Path,
    files: dict[str, str],
    file: str | None,
    addopts: tuple[str, ...],
    ini: tuple[str, ...],
) -> None:
    config = read_config(_write(tmp_path, files))
    assert (config.file, config.addopts, config.ini) == (file, addopts, ini)


def _pytest_says(root: Path, *args: str) -> str:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.stdout + done.stderr


def test_the_names_pytest_did_not_know_are_read_from_its_own_output(tmp_path: Path) -> None:
    usage = _write(tmp_path / "usage", {**CALC, "pytest.ini": "[pytest]\naddopts = --cov=x -n4\n"})
    assert failed_names(_pytest_says(usage)).options == ("--cov", "-n4")
    run = _write(
        tmp_path / "run",
        {
            **CALC,
            "pytest.ini": "[pytest]\nasyncio_mode = auto\n",
            "tests/test_more.py": (
                "import pytest\n\n\n@pytest.mark.asyncio\nasync def test_a():\n    pass\n\n\n"
                "def test_b(mocker):\n    pass\n"
            ),
        },
    )
    said = failed_names(_pytest_says(run))
    assert said.ini == ("asyncio_mode",)
    assert said.markers == ("asyncio",)
    assert said.fixtures == ("mocker",)
    assert said.async_tests
    strict = failed_names(_pytest_says(run, "--strict-markers", "--strict-config"))
    assert "asyncio_mode" in strict.ini or "asyncio" in strict.markers
    assert not failed_names(_pytest_says(_write(tmp_path / "plain", CALC)))
