"""Real nights whose every save goes to the journal (the threshold below which a state is
written whole set to zero): killed with kill -9 mid-run, resumed, ending as if never killed."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

from overnight.store.checkpoint import load_checkpoint
from overnight.store.run_state import journal_path, load_run_state
from tests.helpers.kills import (
    kill_everything,
    kill_group,
    kill_marked,
    marked_env,
    start_cli,
    wait_for,
)
from tests.helpers.nights import command_task, load_result, make_repo, spec_data, write_spec

JOURNAL_ONLY = (
    "import sys, overnight.store.run_state as store; store.WHOLE_BELOW = 0; "
    "from overnight.cli.main import main; sys.exit(main(sys.argv[1:]))"
)


def overnight_journaling(*args: str | Path) -> list[str]:
    return [sys.executable, "-c", JOURNAL_ONLY, *(str(a) for a in args)]


def test_a_night_killed_in_flight_resumes_from_its_journal(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    started, effects = tmp_path / "started", tmp_path / "effects"
    block = f"echo t_block >> '{effects}'; echo a > a.txt; touch '{started}'; sleep 30"
    # A journal that outgrows its snapshot is compacted; the saves' sizes vary with the
    # seconds they record, so a long title keeps the snapshot well above the few saves made
    # before the kill, and the kill always finds a journal.
    long = "x" * 8000
    tasks = [
        command_task("t_first", "echo f > f.txt", "test -f f.txt", value=3.0),
        command_task("t_block", block, "test -f a.txt", value=2.0),
        command_task("t_last", "echo b > b.txt", "test -f b.txt", value=1.0, title=long),
    ]
    spec = write_spec(
        tmp_path / "night.toml",
        spec_data(repo, model=False, tasks=tasks, predicate="test -f a.txt && test -f b.txt"),
    )
    run = tmp_path / "RUN"
    env, mark = marked_env()
    try:
        proc = start_cli(
            overnight_journaling("run", spec, "--run-dir", run, "--quiet"), env, tmp_path
        )
        try:
            wait_for(lambda: started.exists() or proc.poll() is not None, 30, "t_block to start")
            assert proc.poll() is None
        finally:
            kill_everything(proc, mark)
        # The snapshot alone is the state of the process's first save; the journal has the rest.
        assert journal_path(run / "checkpoint.json").exists()
        snapshot = load_checkpoint(run / "checkpoint.json")
        assert snapshot is not None and snapshot["in_progress"] is None
        state = load_run_state(run / "checkpoint.json")
        assert state is not None
        assert state.in_progress is not None and state.in_progress.task.id == "t_block"
        assert [c.task.id for c in state.completed] == ["t_first"]

        done = subprocess.run(
            overnight_journaling("resume", run, "--quiet"), env=env, cwd=tmp_path, timeout=60
        )
        assert done.returncode == 0
        result = load_result(run)
        assert result["stop_reason"] == "GOAL_MET"
        assert result["plan"]["done"] == ["t_first", "t_block", "t_last"]
        assert effects.read_text().splitlines() == ["t_block"]  # verified, never run again
        # A normal end: the snapshot alone holds the whole state again.
        assert not journal_path(run / "checkpoint.json").exists()
        final = load_run_state(run / "checkpoint.json")
        assert final is not None
        assert load_checkpoint(run / "checkpoint.json") == final.model_dump(mode="json")
        assert final.stopped_reason == "GOAL_MET"
    finally:
        kill_marked(mark)


def test_kill_minus_nine_at_random_instants_then_resume_does_each_task_once(
    tmp_path: Path,
) -> None:
    rng = random.Random(20261203)
    repo = make_repo(tmp_path / "repo")
    effects = tmp_path / "effects"
    count = 6
    tasks = [
        command_task(
            f"t_{i}",
            f"sleep 0.3; echo {i} > out{i}.txt && echo t_{i} >> '{effects}'",
            f"n=$(grep -cx 't_{i}' '{effects}' 2>/dev/null); "
            f'case "$n" in 0|"") exit 1;; 1) exit 0;; *) exit 2;; esac',
        )
        for i in range(count)
    ]
    predicate = " && ".join(f"test -f out{i}.txt" for i in range(count))
    spec = write_spec(
        tmp_path / "night.toml", spec_data(repo, model=False, tasks=tasks, predicate=predicate)
    )
    run = tmp_path / "RUN"
    env, mark = marked_env()
    story: list[str] = []
    journals = 0
    log = tmp_path / "cli.log"
    try:
        kills = 4
        while True:
            fresh = not (run / "run.json").exists()
            verb = ("run", spec, "--run-dir", run) if fresh else ("resume", run)
            ended = (run / "result.json").exists() and not load_result(run)["resumable"]
            proc = start_cli(overnight_journaling(*verb, "--quiet"), env, tmp_path, log)
            try:
                if kills:
                    try:
                        proc.wait(timeout=rng.uniform(0.6, 2.5))
                    except subprocess.TimeoutExpired:
                        kill_everything(proc, mark)
                        kills -= 1
                        journals += journal_path(run / "checkpoint.json").exists()
                        story.append("killed")
                        continue
                code = proc.wait(timeout=60)
            finally:
                if proc.returncode is None:
                    kill_group(proc)
            story.append(f"exited {code}")
            if code == 64 and ended:  # the kill came after the run had ended for good
                code = int(load_result(run)["exit_code"])
            break
        assert code == 0, (story, log.read_text()[-2000:])
        result = load_result(run)
        assert result["stop_reason"] == "GOAL_MET", story
        assert sorted(result["plan"]["done"]) == [f"t_{i}" for i in range(count)], story
        assert Counter(effects.read_text().splitlines()) == {f"t_{i}": 1 for i in range(count)}
        assert journals >= 1, f"no kill found a journal: {story}"
    finally:
        kill_marked(mark)
