"""A reader that goes away (`overnight run night.toml | true`, `overnight list | head -3`, a
cron wrapper that stops reading) changes no command's exit code and no result: each command
is run with its output going into a pipe whose reading end is already closed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.nights import cli_env, command_task, make_repo, spec_data, write_spec


def cli(
    tmp: Path, *args: str | Path, stdout_closed: bool = False, stderr_closed: bool = False
) -> tuple[int, str]:
    """Run the CLI; a closed stream writes into a pipe nobody reads. Returns the exit code
    and what stderr said (empty when it was closed)."""
    env = cli_env()
    env["OVERNIGHT_HOME"] = str(tmp / "home")
    ends: list[int] = []

    def closed_pipe() -> int:
        read, write = os.pipe()
        os.close(read)
        ends.append(write)
        return write

    try:
        proc = subprocess.run(
            [sys.executable, "-m", "overnight", *(str(a) for a in args)],
            stdout=closed_pipe() if stdout_closed else subprocess.DEVNULL,
            stderr=closed_pipe() if stderr_closed else subprocess.PIPE,
            env=env,
            cwd=tmp,
            timeout=300,
        )
    finally:
        for fd in ends:
            os.close(fd)
    said = "" if stderr_closed else proc.stderr.decode(errors="replace")
    return proc.returncode, said


def night_spec(tmp: Path, **kwargs: object) -> Path:
    repo = tmp / "repo"
    if not repo.exists():
        make_repo(repo)
    tasks = [command_task(f"c{i}", f"echo step {i}", "true") for i in range(3)]
    options: dict[str, object] = {"predicate": "true", **kwargs}
    data = spec_data(repo, model=False, tasks=tasks, **options)  # type: ignore[arg-type]
    return write_spec(tmp / "night.toml", data)


@pytest.mark.parametrize(("stdout_closed", "stderr_closed"), [(True, False), (True, True)])
def test_run_exits_with_the_nights_code_when_nobody_reads(
    tmp_path: Path, stdout_closed: bool, stderr_closed: bool
) -> None:
    spec = night_spec(tmp_path)
    run_dir = tmp_path / "run"
    code, said = cli(
        tmp_path,
        "run",
        spec,
        "--run-dir",
        run_dir,
        stdout_closed=stdout_closed,
        stderr_closed=stderr_closed,
    )
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "GOAL_MET"
    assert code == result["exit_code"] == 0, said
    assert "BrokenPipe" not in said and "internal error" not in said


def test_resume_exits_with_the_nights_code_when_nobody_reads(tmp_path: Path) -> None:
    spec = night_spec(tmp_path, predicate="test -e never-there", budget={"steps": 1})
    run_dir = tmp_path / "run"
    first, _ = cli(tmp_path, "run", spec, "--run-dir", run_dir, "--quiet")
    assert first == 2
    code, _ = cli(
        tmp_path, "resume", run_dir, "--steps", "10", stdout_closed=True, stderr_closed=True
    )
    result = json.loads((run_dir / "result.json").read_text())
    assert result["resumes"] == 1 and result["stop_reason"] == "QUEUE_EMPTY_GOAL_UNMET"
    assert code == result["exit_code"] == 3


@pytest.fixture(scope="module")
def ended(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("closed-pipes")
    spec = night_spec(tmp)
    code, said = cli(tmp, "run", spec, "--run-dir", tmp / "run", "--quiet")
    assert code == 0, said
    return tmp, tmp / "run"


@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["report", "{run}"],
        ["report", "{run}", "--html", "--out", "{tmp}/r.html"],
        ["status", "{run}"],
        ["status", "{run}", "--json"],
        ["review", "--runs", "{run}"],
        ["estimate", "--seed-example"],
        ["estimate", "{tmp}/night.toml", "--json"],
        ["audit", "{run}", "--no-rerun"],
    ],
    ids=lambda c: " ".join(c),
)
def test_every_command_keeps_its_code_when_nobody_reads(
    ended: tuple[Path, Path], command: list[str]
) -> None:
    tmp, run = ended
    args = [a.format(run=run, tmp=tmp) for a in command]
    expected, said = cli(tmp, *args)
    assert expected in (0, 3), said
    code, said = cli(tmp, *args, stdout_closed=True)
    assert code == expected, said
    assert "BrokenPipe" not in said and "internal error" not in said
    assert cli(tmp, *args, stdout_closed=True, stderr_closed=True)[0] == expected
