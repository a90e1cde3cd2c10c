"""A spec with several problems shows every one of them at once, each with its field and its
fix, from `overnight check` and from `overnight run` (exit 64, nothing written): a person
fixes them in one sitting, not one per try."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.nights import cli_env, command_task, spec_data, write_spec

TASK = command_task("t_1", "true", "true")


def overnight(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "overnight", *(str(a) for a in args)]
    return subprocess.run(
        argv, env=cli_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def a_validation_error_and_a_provider(repo: Path) -> dict[str, Any]:
    """``usd = -1`` fails the spec's types; ``provider = "scripted"`` is a setting the
    provider check refuses: two kinds of problem, one spec."""
    data = spec_data(repo, usd=-1.0, tasks=[TASK])
    data["model"] = {**data["model"], "provider": "scripted"}
    return data


def three_consistency_problems(repo: Path) -> dict[str, Any]:
    data = spec_data(repo, usd=0.0, tasks=[TASK, TASK])
    data["model"] = {**data["model"], "provider": "scripted"}
    return data


@pytest.mark.parametrize(
    ("make", "fields"),
    [
        (a_validation_error_and_a_provider, ["budget.usd", "model.provider"]),
        (three_consistency_problems, ["tasks", "budget.usd", "model.provider"]),
    ],
)
@pytest.mark.parametrize("command", ["check", "run"])
def test_every_problem_is_listed_with_its_field_and_fix(
    make: Any, fields: list[str], command: str, repo: Path, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "night.toml", make(repo))
    args: list[str | Path] = [command, spec]
    if command == "run":
        args += ["--run-dir", tmp_path / "run"]

    done = overnight(tmp_path, *args)

    said = done.stdout + done.stderr
    assert done.returncode == 64, said
    assert f"{len(fields)} problems in the spec" in said
    for field in fields:
        [line] = [ln for ln in said.splitlines() if ln.strip().startswith(f"{field}:")]
        assert "(fix: " in line, f"{field} is listed without its fix: {line}"
    assert "'scripted'" in said and "script" in said  # the provider named, and the one meant
    assert not (tmp_path / "run").exists()


def test_one_problem_is_said_as_before(repo: Path, tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "night.toml", spec_data(repo, usd=-1.0, tasks=[TASK]))
    done = overnight(tmp_path, "run", spec, "--run-dir", tmp_path / "run")
    assert done.returncode == 64
    assert "problems in the spec" not in done.stderr
    assert "budget.usd" in done.stderr and "(fix: " in done.stderr
