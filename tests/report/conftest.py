"""Nights built once per test run and shared: reporting on them never changes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.runs import budget_night, full_night, isolated_env


@pytest.fixture(scope="session")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("full-night")
    with isolated_env(base):
        return full_night(base)


@pytest.fixture(scope="session")
def budget_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("budget-night")
    with isolated_env(base):
        return budget_night(base)
