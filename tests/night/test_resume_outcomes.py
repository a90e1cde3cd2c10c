"""The three verify outcomes on resume, each after a real kill -9 of the CLI's process group.

The first task's command counts its executions in a file outside the workspace, says it has
started, and blocks, but only on its first execution. The test kills the CLI's whole process
group while it blocks. The command runs in a process group of its own, so it outlives that
kill, as it would an OOM kill of the harness: the resume must end it before anything else.
Then the test sets up the world for one outcome and resumes.
"""

from __future__ import annotations

import json
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from overnight.process import end_orphaned_group, process_identity
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


@dataclass
class World:
    root: Path
    repo: Path
    spec: Path
    run: Path
    counter: Path
    started: Path
    pgid: Path
    partial: Path

    @property
    def executions(self) -> int:
        return len(self.counter.read_text().splitlines()) if self.counter.exists() else 0


def make_world(tmp_path: Path) -> World:
    outside = tmp_path / "outside"
    outside.mkdir()
    w = World(
        root=tmp_path,
        repo=make_repo(tmp_path / "repo"),
        spec=tmp_path / "night.toml",
        run=tmp_path / "RUN",
        counter=outside / "executions",
        started=outside / "started",
        pgid=outside / "pgid",
        partial=outside / "partial",
    )
    block = (
        f"echo ran >> '{w.counter}'; "
        f"if [ \"$(wc -l < '{w.counter}')\" -eq 1 ]; then "
        f"echo $$ > '{w.pgid}'; touch '{w.started}'; sleep 30; fi; "
        "echo migrated > block.txt"
    )
    verify = (
        f"if [ -f '{w.partial}' ]; then echo 'half of the rows were migrated'; exit 2; fi; "
        "test -f block.txt"
    )
    tasks = [
        command_task("t_block", block, verify, value=10.0),
        command_task("t_a", "echo a > a.txt", "test -f a.txt", value=5.0),
        command_task("t_b", "echo b > b.txt", "test -f b.txt", value=1.0),
    ]
    data = spec_data(w.repo, model=False, tasks=tasks, predicate="test -f a.txt && test -f b.txt")
    write_spec(w.spec, data)
    return w


def kill_while_blocked(w: World, env: dict[str, str]) -> int:
    """Start the night, wait until t_block blocks, SIGKILL the CLI's whole process group.
    Returns the process group of the blocked command, which is still running."""
    proc = start_cli(overnight("run", w.spec, "--run-dir", w.run, "--quiet"), env, w.root)
    try:
        wait_for(lambda: w.started.exists() or proc.poll() is not None, 30, "t_block to start")
        assert proc.poll() is None, "the run ended before its first task blocked"
    finally:
        kill_group(proc)
    pgid = int(w.pgid.read_text())
    assert group_running(pgid), "the blocked command should outlive the CLI's group"
    assert not (w.run / "result.json").exists()
    body = checkpoint_body(w.run)
    assert body["in_progress"]["task"]["id"] == "t_block"
    return pgid


def checkpoint_body(run: Path) -> dict[str, Any]:
    frame = json.loads((run / "checkpoint.json").read_text())
    body: dict[str, Any] = json.loads(frame["body"])
    return body


def trace(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]


def events_after_resume(run: Path) -> list[dict[str, Any]]:
    records = trace(run)
    resumed = [i for i, r in enumerate(records) if r.get("decision") == "resumed"]
    assert len(resumed) == 1
    return records[resumed[0] + 1 :]


def resume(w: World, env: dict[str, str], pgid: int) -> dict[str, Any]:
    code = run_cli(overnight("resume", w.run, "--quiet"), env, w.root, timeout=60)
    assert code == 0
    # Nothing the killed process left behind runs on, and the resume left nothing running.
    assert not group_running(pgid)
    ended = [r for r in trace(w.run) if r.get("decision") == "ended_leftover_command"]
    assert [r["pgid"] for r in ended] == [pgid]
    assert not (w.run / "command.pgid").exists()
    return load_result(w.run)


@pytest.fixture
def env() -> Any:
    environ, mark = marked_env()
    try:
        yield environ
    finally:
        kill_marked(mark)
    assert marked_pids(mark) == []


def test_done_on_resume_is_committed_and_never_run_again(
    tmp_path: Path, env: dict[str, str]
) -> None:
    w = make_world(tmp_path)
    pgid = kill_while_blocked(w, env)
    (w.run / "worktree" / "block.txt").write_text("migrated\n")  # the work did get done

    result = resume(w, env, pgid)

    assert result["stop_reason"] == "GOAL_MET"
    by_id = {v["id"]: v for v in result["verified"]}
    assert by_id["t_block"]["via"] == "resume"
    commit = by_id["t_block"]["commit"]
    assert commit
    assert git(w.repo, "show", f"{commit}:block.txt") == "migrated"
    assert git(w.repo, "log", "-1", "--format=%s", commit) == "t_block: task t_block"
    assert [by_id[t]["via"] for t in ("t_a", "t_b")] == ["lap", "lap"]
    assert w.executions == 1
    started = [r["task"] for r in events_after_resume(w.run) if r.get("event") == "started"]
    assert started == ["t_a", "t_b"]


def test_not_done_on_resume_goes_first_and_runs_once_more(
    tmp_path: Path, env: dict[str, str]
) -> None:
    w = make_world(tmp_path)
    pgid = kill_while_blocked(w, env)

    result = resume(w, env, pgid)

    assert result["stop_reason"] == "GOAL_MET"
    assert result["plan"]["done"] == ["t_block", "t_a", "t_b"]
    by_id = {v["id"]: v for v in result["verified"]}
    assert by_id["t_block"]["via"] == "lap"
    assert w.executions == 2
    after = events_after_resume(w.run)
    verdicts = [r for r in after if r.get("decision") == "resume_verified"]
    assert [(r["task"], r["outcome"]) for r in verdicts] == [("t_block", "not_done")]
    started = [r["task"] for r in after if r.get("kind") == "task" and r["event"] == "started"]
    assert started[0] == "t_block"
    assert started.count("t_block") == 1


def test_a_resumed_task_goes_on_from_its_attempt_and_keeps_every_log(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The killed process ran attempt 1; the resume verifies attempt 1 (not done) and runs
    attempt 2. Attempt 1's logs stay as the killed process and the resume left them."""
    w = make_world(tmp_path)
    pgid = kill_while_blocked(w, env)
    first_log = w.run / "artifacts" / "t_block.1.log"
    assert first_log.exists()
    first_log.write_text("what attempt 1 said\n")  # kill -9 cut its output short: mark it

    resume(w, env, pgid)

    after = events_after_resume(w.run)
    started = [r for r in after if r.get("kind") == "task" and r.get("event") == "started"]
    assert [(r["task"], r["attempt"]) for r in started[:1]] == [("t_block", 2)]
    assert first_log.read_text() == "what attempt 1 said\n", "attempt 1's log was overwritten"
    names = sorted(p.name for p in (w.run / "artifacts").glob("t_block.*"))
    assert names == [
        "t_block.1.log",
        "t_block.1.verify.log",
        "t_block.2.log",
        "t_block.2.verify.log",
    ]
    assert checkpoint_body(w.run)["attempts"]["t_block"] == 2


def test_partially_applied_on_resume_is_parked_and_the_rest_runs(
    tmp_path: Path, env: dict[str, str]
) -> None:
    w = make_world(tmp_path)
    pgid = kill_while_blocked(w, env)
    w.partial.write_text("")
    (w.run / "worktree" / "half.txt").write_text("half\n")

    result = resume(w, env, pgid)

    assert result["stop_reason"] == "GOAL_MET"
    [parked] = result["plan"]["parked"]
    assert parked["id"] == "t_block"
    assert "partially applied" in parked["reason"]
    assert "half of the rows were migrated" in parked["detail"]
    assert result["plan"]["done"] == ["t_a", "t_b"]
    assert w.executions == 1
    started = [r["task"] for r in events_after_resume(w.run) if r.get("event") == "started"]
    assert "t_block" not in started
    # What the half-done task left in the worktree is kept as a patch, not committed.
    assert parked["patch"] and "half.txt" in Path(parked["patch"]).read_text()
    assert git(w.repo, "ls-tree", "--name-only", result["branch"]["name"]).split() == [
        "README.md",
        "a.txt",
        "b.txt",
    ]


def test_a_recorded_group_is_ended_only_if_it_is_still_the_same_process() -> None:
    """The note a killed run leaves names a process group; by the time of the resume that id
    may belong to someone else. Only the very process that was recorded is ended."""
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        identity = process_identity(sleeper.pid)
        assert identity is not None
        boot, _, started = identity.partition(":")
        assert not end_orphaned_group(sleeper.pid, f"{boot}:{int(started) + 1}")
        assert not end_orphaned_group(sleeper.pid, f"another-boot:{started}")
        assert group_running(sleeper.pid)
        assert end_orphaned_group(sleeper.pid, identity)
        assert sleeper.wait(timeout=5) == -signal.SIGTERM
        assert not end_orphaned_group(sleeper.pid, identity)  # nothing left to end
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()
