"""kill -9 at random moments, then resume: the night ends exactly as an uninterrupted one.

Each task appends one line to a file outside the workspace (an effect no git reset can undo)
and writes a file inside the worktree. Its verify counts its line: none is "not done", one is
"done", more is "partially applied" (the effect happened twice). Whatever instant the CLI is
killed at with SIGKILL, and however often, resuming until the run reports a verdict must
leave every effect exactly once, the same tree and commits on the branch, the same ending as
the baseline, and a spend journal within the cap.

The commands a run starts have process groups (sessions) of their own, so a SIGKILL to the
CLI's group alone leaves the command in flight running, as after an OOM kill of the harness.
Most kills here are a power cut instead: the CLI's group and every command it started die at
the same instant. The rest kill the CLI's group only.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.kills import (
    RUN_EXIT_CODES,
    kill_everything,
    kill_group,
    kill_marked,
    marked_env,
    marked_pids,
    overnight,
    start_cli,
)
from tests.helpers.nights import command_task, git, load_result, make_repo, spec_data, write_spec

pytestmark = pytest.mark.chaos

TASKS = 8
CAP_USD = 5.0
# Another seed or more trials, to hunt: OVERNIGHT_CHAOS_SEED=7 OVERNIGHT_CHAOS_TRIALS=200
SEED = int(os.environ.get("OVERNIGHT_CHAOS_SEED", "20261202"))
TRIALS = int(os.environ.get("OVERNIGHT_CHAOS_TRIALS", "10"))

FAKE_MODEL = """\
from overnight.testing import ScriptedModel

model = ScriptedModel()
"""


def _command(i: int, effects: Path) -> str:
    # The worktree file first, the effect last: once the effect exists the task's work is
    # whole, so a verify that sees the effect may commit the worktree as it is.
    nap = 0.05 + 0.05 * (i % 3) / 2
    return (
        f"sleep {nap:.3f}; mkdir -p out && printf 't_{i}\\n' > out/t_{i}.txt"
        f" && printf 't_{i}\\n' >> '{effects}'"
    )


def _verify(i: int, effects: Path) -> str:
    return (
        f"n=$(grep -cx 't_{i}' '{effects}' 2>/dev/null); "
        f'case "$n" in 0|"") exit 1;; 1) exit 0;; '
        f'*) echo "t_{i} applied $n times"; exit 2;; esac'
    )


PREDICATE = (
    "for i in " + " ".join(str(i) for i in range(TASKS)) + "; do "
    "test -f out/t_$i.txt || exit 1; done"
)


@dataclass
class Night:
    root: Path
    repo: Path
    spec: Path
    effects: Path
    run: Path


def make_night(root: Path) -> Night:
    root.mkdir()
    repo = make_repo(root / "repo")
    effects = root / "effects.log"
    tasks = [
        command_task(f"t_{i}", _command(i, effects), _verify(i, effects)) for i in range(TASKS)
    ]
    (root / "fake_model.py").write_text(FAKE_MODEL)
    data = spec_data(
        repo,
        usd=CAP_USD,
        predicate=PREDICATE,
        tasks=tasks,
        run={"drift_every": 2},
    )
    data["model"]["target"] = "fake_model:model"
    spec = write_spec(root / "night.toml", data)
    return Night(root, repo, spec, effects, root / "RUN")


def spend_total(run: Path) -> float:
    """The journal folded on its own: what was spent, plus every reservation left open (a call
    whose answer died with its process) at its worst case."""
    path = run / "spend.jsonl"
    if not path.exists():
        return 0.0
    spent = 0.0
    open_: dict[str, float] = {}
    for line in path.read_bytes().split(b"\n"):
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a torn last line: the write never completed
        if rec["kind"] == "reserve":
            open_[rec["id"]] = float(rec["usd"])
        elif rec["kind"] == "release":
            open_.pop(rec["id"], None)
        elif rec["kind"] == "spend":
            open_.pop(rec["id"], None)
            spent += float(rec["usd"])
    return spent + sum(open_.values())


def outcome(night: Night) -> dict[str, Any]:
    result = load_result(night.run)
    manifest = json.loads((night.run / "run.json").read_text())
    branch = manifest["branch"]
    base = result["branch"]["base_commit"]
    return {
        "tree": git(night.repo, "rev-parse", f"{branch}^{{tree}}"),
        "subjects": git(night.repo, "log", "--reverse", "--format=%s", f"{base}..{branch}"),
        "stop_reason": result["stop_reason"],
        "exit_code": result["exit_code"],
        "done": result["plan"]["done"],
        "parked": result["plan"]["parked"],
        "remaining": result["plan"]["remaining"],
    }


def last_event(run: Path) -> str:
    """Where the killed process was, roughly: its last trace line (for failure messages)."""
    try:
        lines = (run / "trace.jsonl").read_text().splitlines()
    except OSError:
        return "no trace"
    return lines[-1][:200] if lines else "empty trace"


def drive(
    night: Night, rng: random.Random, kills: int, window: float, env: dict[str, str], mark: str
) -> tuple[int, list[str]]:
    """Run the night, killing it ``kills`` times at random instants within ``window`` seconds
    of a start; after each kill, resume (or start afresh if the run directory was never
    made), as a user would; return the final exit code and what happened."""
    story: list[str] = []
    while True:
        fresh = not (night.run / "run.json").exists()
        if fresh:
            args = overnight("run", night.spec, "--run-dir", night.run, "--quiet")
        else:
            args = overnight("resume", night.run, "--quiet")
        verb = "run" if fresh else "resume"
        ended_before = _ended_for_good(night.run)
        proc = start_cli(args, env, night.root, night.root / "cli.log")
        try:
            if kills:
                delay = rng.uniform(0.0, window)
                try:
                    proc.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    # Mostly everything dies at once (a power cut); sometimes only the CLI's
                    # group, and the command it was running lives on (kill -9 of the group,
                    # an OOM kill): then the resume must end that command first.
                    everything = rng.random() < 0.75
                    if everything:
                        kill_everything(proc, mark)
                    else:
                        kill_group(proc)
                    kills -= 1
                    story.append(
                        f"{verb} killed at {delay:.2f}s "
                        f"{'with its commands' if everything else 'alone'} "
                        f"({last_event(night.run)})"
                    )
                    assert spend_total(night.run) <= CAP_USD, story
                    continue
            rc = proc.wait(timeout=60)
        finally:
            if proc.returncode is None:
                kill_group(proc)
        story.append(f"{verb} exited {rc}")
        if rc == 64 and ended_before:
            # The kill landed after the run had ended for good (result and final checkpoint
            # written): resume rightly refuses, and that result stands.
            rc = int(load_result(night.run)["exit_code"])
        assert rc in RUN_EXIT_CODES, story
        return rc, story


def test_kill_minus_nine_anywhere_then_resume_ends_like_the_baseline(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    env, mark = marked_env()
    try:
        base = make_night(tmp_path / "baseline")
        t0 = time.monotonic()
        rc, _ = drive(base, rng, 0, 0.0, env, mark)
        duration = time.monotonic() - t0
        assert rc == 0
        expected = outcome(base)
        assert expected["stop_reason"] == "GOAL_MET"
        assert expected["done"] == [f"t_{i}" for i in range(TASKS)]
        assert Counter(base.effects.read_text().splitlines()) == {f"t_{i}": 1 for i in range(TASKS)}
        assert load_result(base.run)["spend"]["model_calls"] >= 2  # drift checks and summary

        for trial in range(TRIALS):
            night = make_night(tmp_path / f"trial{trial:02d}")
            kills = 3 if trial % 5 == 4 else 1  # every fifth trial kills its resumes too
            rc, story = drive(night, rng, kills, duration, env, mark)

            log = (night.root / "cli.log").read_text()[-2000:]
            where = f"trial {trial} (seed {SEED}): {story}\n{log}"
            assert marked_pids(mark) == [], f"{where}: a process of the run outlived it"
            lines = night.effects.read_text().splitlines() if night.effects.exists() else []
            assert Counter(lines) == {f"t_{i}": 1 for i in range(TASKS)}, where
            assert outcome(night) == expected, where
            assert rc == expected["exit_code"], where
            assert spend_total(night.run) <= CAP_USD, where
    finally:
        kill_marked(mark)


def _ended_for_good(run: Path) -> bool:
    """Has this run ended with a result that says it is not resumable?"""
    try:
        return not json.loads((run / "result.json").read_text())["resumable"]
    except (OSError, ValueError, KeyError):
        return False
