"""Shared fixtures: real git repositories, specs, and in-process nights driven by fakes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.nights import git, make_repo

# The nights these tests run call `python3` (predicates, verifies, the agent's commands):
# let it be the interpreter running the tests, with pytest in it (a virtual environment's),
# not whichever Python comes first on PATH.
_HERE = str(Path(sys.executable).parent)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _HERE:
    os.environ["PATH"] = os.pathsep.join([_HERE, os.environ.get("PATH", os.defpath)])


#: Where the longest tests are (real packages' whole suites, real agent CLIs): with the kill -9
#: trials they start first, so the run ends on short tests rather than one worker finishing a
#: long one alone.
_LONG = ("tests/realrepos/", "tests/executors/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("chaos") is not None:
            return 0
        return 1 if item.nodeid.startswith(_LONG) else 2

    items.sort(key=rank)  # stable: the same order on every worker


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    # One worker more than cores: a test spends much of its time waiting on the processes
    # it started (nights, sandboxes, git), and the extra worker fills that time.
    return (os.cpu_count() or 1) + 1


def _isolate(patch: pytest.MonkeyPatch, home: Path) -> None:
    """No run lands in the real ~/.overnight, and no global git config leaks in."""
    patch.setenv("OVERNIGHT_HOME", str(home / ".overnight"))
    patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    patch.setenv("GIT_CONFIG_GLOBAL", os.devnull)


@pytest.fixture(scope="session", autouse=True)
def _isolated_session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """For what module- and session-scoped fixtures run, before any test's own home."""
    with pytest.MonkeyPatch.context() as patch:
        _isolate(patch, tmp_path_factory.mktemp("session-home"))
        yield


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A home of each test's own."""
    _isolate(monkeypatch, tmp_path_factory.mktemp("home"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit on branch main, outside every run directory."""
    return make_repo(tmp_path / "repo")


@pytest.fixture
def git_run() -> Any:
    return git


__all__ = ["subprocess"]
