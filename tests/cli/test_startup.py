"""The command line starts at once: ``--version`` and ``--help`` load nothing of the product
(no night, no api, no spec model, no pydantic, no rich), and ``overnight list`` and
``overnight status`` of a finished run load no night and no api. Each command runs as a user
runs it, ``python -X importtime -m overnight ...``, whose report on stderr names every module
the process imported. Not timed: ``bench/startup.py`` measures the time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.nights import cli_env, command_task, make_repo, spec_data, write_spec

#: What no command may load before it knows it needs it.
PRODUCT = ("overnight.night", "overnight.api")
HEAVY = (*PRODUCT, "overnight.config.spec", "pydantic", "rich")


def loaded(env: dict[str, str], *args: str | Path) -> tuple[set[str], str]:
    """The modules ``overnight ARGS`` imported, and what it printed."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "overnight", *(str(a) for a in args)],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert "overnight.cli" in modules, done.stderr[-3000:]  # the report was read
    return modules, done.stdout


def of(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The modules that are one of ``packages`` or inside one."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """A night of one command task, ended, in a home of its own."""
    where = tmp_path_factory.mktemp("startup")
    env = cli_env() | {
        "OVERNIGHT_HOME": str(where / "home"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    repo = make_repo(where / "repo")
    spec = write_spec(
        where / "night.toml",
        spec_data(
            repo,
            predicate="test -f done.txt",
            tasks=[command_task("t_1", "echo x > done.txt", "test -f done.txt")],
            model=False,
        ),
    )
    run = where / "run"
    done = subprocess.run(
        [sys.executable, "-m", "overnight", "run", str(spec), "--run-dir", str(run), "--quiet"],
        env=env,
        cwd=where,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert (run / "result.json").exists()
    return env, run


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["status", "--help"]])
def test_the_version_and_the_help_load_nothing_of_the_product(args: list[str]) -> None:
    modules, printed = loaded(cli_env(), *args)
    assert of(modules, HEAVY) == []
    assert printed.startswith("overnight 0.") or printed.startswith("usage: overnight")


def test_list_loads_no_night(finished: tuple[dict[str, str], Path]) -> None:
    env, run = finished
    modules, printed = loaded(env, "list")
    assert str(run) in printed
    assert of(modules, (*PRODUCT, "overnight.config.spec", "pydantic", "rich")) == []


def test_status_of_a_finished_run_loads_no_night(finished: tuple[dict[str, str], Path]) -> None:
    env, run = finished
    modules, printed = loaded(env, "status", run)
    assert printed.splitlines()[0].endswith(": finished")
    # pydantic stays: the run state is read through the one reader of the checkpoint
    # (overnight.store.run_state), whose state is a model
    assert of(modules, (*PRODUCT, "overnight.config.spec", "rich")) == []


def test_a_completion_script_loads_nothing_of_the_product() -> None:
    modules, printed = loaded(cli_env(), "completion", "bash")
    assert "overnight" in printed
    assert of(modules, HEAVY) == []
