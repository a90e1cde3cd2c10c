"""Nights built once per test run and shared: reporting on them never changes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.runs import (
    FORMAT_GATE,
    RUFF_GATE,
    budget_night,
    full_night,
    gates_night,
    isolated_env,
)


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


@pytest.fixture(scope="session")
def gates_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("gates-night")
    with isolated_env(base):
        return gates_night(base, [RUFF_GATE, FORMAT_GATE])
