"""Shared fixtures: real git repositories, specs, and in-process nights driven by fakes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.nights import git, make_repo


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No run lands in the real ~/.overnight, and no global git config leaks in."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("OVERNIGHT_HOME", str(home / ".overnight"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit on branch main, outside every run directory."""
    return make_repo(tmp_path / "repo")


@pytest.fixture
def git_run() -> Any:
    return git


__all__ = ["subprocess"]
