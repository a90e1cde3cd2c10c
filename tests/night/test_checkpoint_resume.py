"""What ``overnight resume`` does with a checkpoint it cannot trust, with a run that ended for
good, and with a directory that is not there: refuse, say so, and leave the files alone."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
from pathlib import Path

import pytest

from tests.helpers.kills import (
    kill_group,
    kill_marked,
    marked_env,
    overnight,
    run_cli,
    start_cli,
    wait_for,
)
from tests.helpers.nights import command_task, git, load_result, make_repo, spec_data, write_spec

TRUNCATION_SEEDS = [1, 2, 3, 4, 5]
FLIP_SEEDS = [11, 12, 13]


FAKE_MODEL = """\
from overnight.testing import ScriptedModel

model = ScriptedModel()
"""


def _spec(tmp_path: Path, tasks: list[dict[str, object]], predicate: str) -> Path:
    """A spec with a fake model (``fake_model.py`` beside it): the closing summary is paid."""
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "fake_model.py").write_text(FAKE_MODEL)
    data = spec_data(repo, tasks=tasks, predicate=predicate)
    data["model"]["target"] = "fake_model:model"
    return write_spec(tmp_path / "night.toml", data)


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def finished_run(tmp_path: Path, env: dict[str, str]) -> Path:
    tasks = [command_task(f"t_{i}", f"echo {i} > f{i}.txt", f"test -f f{i}.txt") for i in range(2)]
    spec = _spec(tmp_path, tasks, "test -f f0.txt && test -f f1.txt")
    run = tmp_path / "RUN"
    assert run_cli(overnight("run", spec, "--run-dir", run, "--quiet"), env, tmp_path) == 0
    return run


def killed_run(tmp_path: Path, env: dict[str, str]) -> Path:
    """A run killed with kill -9 (its command too) while its first task was in flight."""
    started = tmp_path / "started"
    tasks = [
        command_task(
            "t_0",
            f"if [ ! -f '{started}' ]; then touch '{started}'; sleep 30; fi; echo 0 > f0.txt",
            "test -f f0.txt",
        ),
        command_task("t_1", "echo 1 > f1.txt", "test -f f1.txt"),
    ]
    spec = _spec(tmp_path, tasks, "test -f f0.txt && test -f f1.txt")
    run = tmp_path / "RUN"
    proc = start_cli(overnight("run", spec, "--run-dir", run, "--quiet"), env, tmp_path)
    try:
        wait_for(lambda: started.exists() or proc.poll() is not None, 30, "t_0 to start")
        assert proc.poll() is None
    finally:
        kill_group(proc)
    return run


def truncated(data: bytes, seed: int) -> bytes:
    return data[: random.Random(seed).randrange(len(data))]


def flipped(data: bytes, seed: int) -> bytes:
    """One byte of the body (the checksummed state) changed."""
    start = data.index(b'"body": "') + len(b'"body": "')
    end = data.index(b'", "kind": ')
    rng = random.Random(seed)
    at = rng.randrange(start, end)
    out = bytearray(data)
    out[at] ^= rng.randrange(1, 256)
    return bytes(out)


def files_of(run: Path) -> dict[str, str]:
    """Every file of the run directory (the worktree's git link aside), by content hash."""
    out: dict[str, str] = {}
    for path in sorted(run.rglob("*")):
        if path.is_file() and path.name != "lock":
            out[str(path.relative_to(run))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.mark.parametrize("kind", ["finished", "killed"])
def test_corrupt_checkpoint_ends_unrecoverable_and_is_left_untouched(
    tmp_path: Path, kind: str
) -> None:
    env, mark = marked_env()
    try:
        run = finished_run(tmp_path, env) if kind == "finished" else killed_run(tmp_path, env)
        kill_marked(mark)  # a killed run's command must not run on behind the resumes
        checkpoint = run / "checkpoint.json"
        original = checkpoint.read_bytes()
        spend = _read(run / "spend.jsonl")
        branch = load_branch(run)
        head = git(tmp_path / "repo", "rev-parse", branch)
        corruptions = [("truncated", s, truncated(original, s)) for s in TRUNCATION_SEEDS]
        corruptions += [("flipped", s, flipped(original, s)) for s in FLIP_SEEDS]

        for how, seed, damaged in corruptions:
            assert damaged != original
            checkpoint.write_bytes(damaged)
            where = f"{how} (seed {seed})"

            code = run_cli(overnight("resume", run, "--quiet"), env, tmp_path, timeout=60)

            assert code == 4, where
            result = load_result(run)
            assert result["stop_reason"] == "UNRECOVERABLE_ERROR:checkpoint_corrupt", where
            assert result["exit_code"] == 4, where
            assert result["resumable"] is False, where
            assert result["status"] == "FAILURE", where
            assert checkpoint.read_bytes() == damaged, f"{where}: the checkpoint was rewritten"
            # A refusal spends nothing: what was spent may be unknowable, so it calls no model.
            assert _read(run / "spend.jsonl") == spend, where
            assert result["wrapup"]["source"] == "structured", where
            assert git(tmp_path / "repo", "rev-parse", branch) == head, where

        if kind == "killed":
            # The refusals harmed nothing: with its checkpoint back, the run resumes and ends.
            checkpoint.write_bytes(original)
            code = run_cli(overnight("resume", run, "--quiet"), env, tmp_path, timeout=60)
            assert code == 0
            result = load_result(run)
            assert result["stop_reason"] == "GOAL_MET"
            assert result["plan"]["done"] == ["t_0", "t_1"]
    finally:
        kill_marked(mark)


def load_branch(run: Path) -> str:
    branch: str = json.loads((run / "run.json").read_text())["branch"]
    return branch


def test_resume_of_a_run_that_ended_for_good_exits_64_and_changes_nothing(
    tmp_path: Path,
) -> None:
    env, mark = marked_env()
    try:
        tasks = [command_task("t_0", "echo 0 > f0.txt", "test -f f0.txt")]
        spec = _spec(tmp_path, tasks, "false")
        run = tmp_path / "RUN"
        assert run_cli(overnight("run", spec, "--run-dir", run, "--quiet"), env, tmp_path) == 3
        assert load_result(run)["stop_reason"] == "QUEUE_EMPTY_GOAL_UNMET"
        before = files_of(run)
        head = git(tmp_path / "repo", "rev-parse", load_branch(run))

        done = subprocess.run(
            overnight("resume", run),
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )

        assert done.returncode == 64
        assert "QUEUE_EMPTY_GOAL_UNMET" in done.stderr
        assert "not resumable" in done.stderr
        assert files_of(run) == before
        assert git(tmp_path / "repo", "rev-parse", load_branch(run)) == head
    finally:
        kill_marked(mark)


def test_resume_of_a_missing_run_dir_exits_64(tmp_path: Path) -> None:
    env, _mark = marked_env()
    missing = tmp_path / "no-such-run"
    done = subprocess.run(
        overnight("resume", missing),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 64
    assert "not an overnight run directory" in done.stderr
    assert not missing.exists()
