"""SIGTERM and SIGINT drain a CLI run: the command in flight is stopped at once, no new task
starts, the task stays IN_PROGRESS, and the run ends TIME_LIMIT:<signal>, exit 2, resumable.
A resume then verifies that task and never runs its command again."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.kills import (
    group_running,
    kill_group,
    kill_marked,
    marked_env,
    marked_pids,
    overnight,
    run_cli,
    start_cli,
    wait_for,
)
from tests.helpers.nights import command_task, git, load_result, make_repo, spec_data, write_spec


def checkpoint_body(run: Path) -> dict[str, Any]:
    frame = json.loads((run / "checkpoint.json").read_text())
    body: dict[str, Any] = json.loads(frame["body"])
    return body


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_signal_drains_the_run_and_resume_completes_it(
    tmp_path: Path, signum: signal.Signals
) -> None:
    name = signum.name.lower()
    repo = make_repo(tmp_path / "repo")
    outside = tmp_path / "outside"
    outside.mkdir()
    counter, started, pgid_file = outside / "executions", outside / "started", outside / "pgid"
    # The effect comes first, then the marker, then a long wait: once the marker exists, the
    # task's work is done and only the wait is left for the signal to cut short.
    long = (
        f"echo ran >> '{counter}'; echo done > long.txt; "
        f"echo $$ > '{pgid_file}'; touch '{started}'; sleep 30"
    )
    tasks = [
        command_task("t_long", long, "test -f long.txt", value=2.0),
        command_task("t_next", "echo next > next.txt", "test -f next.txt", value=1.0),
    ]
    spec = write_spec(
        tmp_path / "night.toml",
        spec_data(repo, model=False, tasks=tasks, predicate="test -f long.txt && test -f next.txt"),
    )
    run = tmp_path / "RUN"
    env, mark = marked_env()
    proc = start_cli(overnight("run", spec, "--run-dir", run, "--quiet"), env, tmp_path)
    try:
        wait_for(lambda: started.exists() or proc.poll() is not None, 30, "t_long to start")
        assert proc.poll() is None, "the run ended before its long task started"
        pgid = int(pgid_file.read_text())
        sent = time.monotonic()
        os.kill(proc.pid, signum)  # the overnight process only, not its group
        code = proc.wait(timeout=15)
        elapsed = time.monotonic() - sent

        assert code == 2
        assert elapsed < 5, f"the drain took {elapsed:.1f} s; the command should be cut short"
        assert not group_running(pgid), "the command's process group outlived the drain"
        result = load_result(run)
        assert result["stop_reason"] == f"TIME_LIMIT:{name}"
        assert result["status"] == "PARTIAL"
        assert result["exit_code"] == 2
        assert result["resumable"] is True
        assert result["plan"]["in_progress"] == "t_long"
        assert result["plan"]["remaining"] == ["t_next"]
        assert result["verified"] == []
        body = checkpoint_body(run)
        assert body["in_progress"]["task"]["id"] == "t_long"
        assert body["stopped_reason"] == f"TIME_LIMIT:{name}"
        assert len(counter.read_text().splitlines()) == 1

        code = run_cli(overnight("resume", run, "--quiet"), env, tmp_path, timeout=60)

        assert code == 0
        result = load_result(run)
        assert result["stop_reason"] == "GOAL_MET"
        assert result["resumes"] == 1
        by_id = {v["id"]: v for v in result["verified"]}
        assert by_id["t_long"]["via"] == "resume"
        assert by_id["t_long"]["commit"]
        assert git(repo, "show", f"{by_id['t_long']['commit']}:long.txt") == "done"
        assert by_id["t_next"]["via"] == "lap"
        assert len(counter.read_text().splitlines()) == 1, "t_long's command ran again"
        # The drained run's result is kept beside the new one.
        assert json.loads((run / "history" / "result-1.json").read_text())["stop_reason"] == (
            f"TIME_LIMIT:{name}"
        )
        assert marked_pids(mark) == []
    finally:
        if proc.returncode is None:
            kill_group(proc)
        kill_marked(mark)
