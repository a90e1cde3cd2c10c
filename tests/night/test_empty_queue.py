"""The empty-queue trap: the loop shape cannot report success for a drained queue."""

import subprocess
import sys
from pathlib import Path

from tests.helpers.nights import (
    cli_env,
    command_task,
    load_result,
    make_spec,
    run_night,
    spec_data,
    write_spec,
)


def trap_tasks() -> list[dict[str, object]]:
    tasks = [
        command_task(
            f"t_{i}", f"echo opt{i} >> optimizations.txt", f"grep -qx opt{i} optimizations.txt"
        )
        for i in range(1, 34)
    ]
    # The one task that measures the goal. It fails: p95 is still 410ms.
    tasks.append(
        command_task(
            "t_34",
            "echo 'measured p95=410ms' > p95.txt",
            "python3 -c \"import sys; p95 = int(open('p95.txt').read().split('=')[1][:-3]); "
            'sys.exit(0 if p95 < 200 else 1)"',
            title="verify p95 < 200ms on /api/search",
            value=-1,
            retries=0,
        )
    )
    return tasks


def test_33_pass_the_goal_task_fails_the_run_is_a_failure(repo: Path, tmp_path: Path) -> None:
    spec = make_spec(repo, tasks=trap_tasks(), predicate="test -f goal-met", model=False)
    _, r = run_night(spec, tmp_path / "run")
    assert r.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"
    assert (r.status, r.exit_code, r.resumable) == ("FAILURE", 3, False)
    assert len(r.verified) == 33
    assert r.plan.remaining == []
    [parked] = r.plan.parked
    assert parked.id == "t_34" and "not done" in parked.reason
    assert "GOAL_MET" not in r.partial_output and "t_34" in r.partial_output


def test_cli_exit_code_is_3(repo: Path, tmp_path: Path) -> None:
    data = spec_data(repo, tasks=trap_tasks()[-3:], predicate="test -f goal-met", model=False)
    spec_path = write_spec(tmp_path / "night.toml", data)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "overnight",
            "run",
            str(spec_path),
            "--run-dir",
            str(tmp_path / "run"),
            "--quiet",
        ],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    assert load_result(tmp_path / "run")["stop_reason"] == "QUEUE_EMPTY_GOAL_UNMET"
