"""`overnight status`, `report`, `audit`, `pr` and `resume` mean the latest run when none is
named (and `latest` says so out loud); when several runs are being driven at once, which one
is meant is not guessed: the command says which runs there are to pick from."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.kills import (
    kill_group,
    kill_marked,
    marked_env,
    overnight,
    start_cli,
    wait_for,
)
from tests.helpers.nights import command_task, spec_data, write_spec


@pytest.fixture
def env() -> Any:
    environ, mark = marked_env()
    try:
        yield environ
    finally:
        kill_marked(mark)


def cli(env: dict[str, str], cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        overnight(*args), env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def night(repo: Path, path: Path, command: str = "echo x > done.txt") -> Path:
    tasks = [command_task("t_1", command, "test -f done.txt")]
    return write_spec(path, spec_data(repo, model=False, tasks=tasks, predicate="test -f done.txt"))


def run_id(run: Path) -> str:
    return str(json.loads((run / "run.json").read_text())["run_id"])


def test_a_command_without_a_run_means_the_latest(
    repo: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    spec = night(repo, tmp_path / "night.toml")
    for name in ("first", "second"):
        assert (
            cli(env, tmp_path, "run", spec, "--run-dir", tmp_path / name, "--quiet").returncode == 0
        )
    second = run_id(tmp_path / "second")

    for args in (["status", "--json"], ["status", "latest", "--json"]):
        done = cli(env, tmp_path, *args)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["run_id"] == second
    report = cli(env, tmp_path, "report")
    assert report.returncode == 0 and second in report.stdout
    audit = cli(env, tmp_path, "audit", "--no-rerun", "--json")
    assert audit.returncode == 0, audit.stderr
    assert second in audit.stdout


def test_no_run_yet_is_said_with_what_to_do(tmp_path: Path, env: dict[str, str]) -> None:
    done = cli(env, tmp_path, "status")
    assert done.returncode != 0
    assert "no run has been started on this machine yet" in done.stderr


def test_two_runs_driven_at_once_are_named_and_neither_is_guessed(
    repo: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    started = tmp_path / "started"
    started.mkdir()
    procs = []
    try:
        for name in ("a", "b"):
            block = f"touch '{started / name}'; sleep 30; echo x > done.txt"
            spec = night(repo, tmp_path / f"{name}.toml", block)
            args = overnight("run", spec, "--run-dir", tmp_path / name, "--quiet")
            procs.append(start_cli(args, env, tmp_path))
        wait_for(lambda: len(list(started.iterdir())) == 2, 60, "both nights to start")

        done = cli(env, tmp_path, "status")

        assert done.returncode != 0
        assert "2 runs are running now" in done.stderr
        for name in ("a", "b"):
            assert run_id(tmp_path / name) in done.stderr
        named = cli(env, tmp_path, "status", run_id(tmp_path / "a"), "--json")
        assert named.returncode == 0 and json.loads(named.stdout)["state"] == "running"
    finally:
        for proc in procs:
            kill_group(proc)
