"""``overnight resume`` of a night in a format this overnight does not know: refused with exit
64, naming both overnights, every file of the run and of its repository as it was; the same
night resumes as before once its files are back in a format this overnight reads. Every stored
run directory of an earlier format resumes to an ending."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from overnight.store.checkpoint import SCHEMA_VERSION
from overnight.store.journal import LINE_FORMAT
from overnight.store.versions import WRITTEN_BY
from tests.helpers.kills import (
    kill_everything,
    kill_marked,
    marked_env,
    overnight,
    run_cli,
    start_cli,
    wait_for,
)
from tests.helpers.nights import command_task, load_result, make_repo, spec_data, write_spec
from tests.store.run_fixtures import fixture_dirs, set_up
from tests.store.test_night_journal import overnight_journaling

NEWER = "9.4.0"


def digest(run: Path, repo: Path) -> dict[str, str]:
    """Every entry under the run directory (the lock, the worktree and the listing itself
    included) and under the repository's ``.git``, by content."""
    out: dict[str, str] = {}
    for top in (run, repo / ".git"):
        for path in sorted(top.rglob("*")):
            key = str(path.relative_to(top.parent))
            if path.is_symlink():
                out[key] = f"-> {path.readlink()}"
            elif path.is_dir():
                out[key] = "dir"
            else:
                out[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def night(tmp_path: Path, kind: str, env: dict[str, str], mark: str) -> Path:
    """A night killed with its first task in flight (its state partly in the journal), or one
    stopped by its step budget (a result.json saying it can be resumed)."""
    repo = make_repo(tmp_path / "repo")
    started = tmp_path / "started"
    first = "echo 0 > f0.txt"
    if kind == "killed":
        first = f"if [ ! -f '{started}' ]; then touch '{started}'; sleep 30; fi; {first}"
    tasks = [
        command_task("t_0", first, "test -f f0.txt"),
        command_task("t_1", "echo 1 > f1.txt", "test -f f1.txt"),
    ]
    data = spec_data(repo, model=False, tasks=tasks, predicate="test -f f0.txt && test -f f1.txt")
    run = tmp_path / "RUN"
    if kind == "stopped":
        data["budget"]["steps"] = 1
        spec = write_spec(tmp_path / "night.toml", data)
        assert run_cli(overnight("run", spec, "--run-dir", run, "--quiet"), env, tmp_path) == 2
        assert load_result(run)["resumable"] is True
        return run
    spec = write_spec(tmp_path / "night.toml", data)
    proc = start_cli(overnight_journaling("run", spec, "--run-dir", run, "--quiet"), env, tmp_path)
    try:
        wait_for(lambda: started.exists() or proc.poll() is not None, 30, "t_0 to start")
        assert proc.poll() is None
    finally:
        kill_everything(proc, mark)
    assert (run / "checkpoint.journal").exists()
    return run


def newer_checkpoint(run: Path) -> str:
    path = run / "checkpoint.json"
    frame = json.loads(path.read_bytes())
    frame.update(schema_version=SCHEMA_VERSION + 1, written_by=NEWER)
    path.write_text(json.dumps(frame), encoding="utf-8")
    return f"(checkpoint format {SCHEMA_VERSION + 1}); this is overnight {WRITTEN_BY} " + (
        f"(format {SCHEMA_VERSION})"
    )


def newer_line(name: str) -> Callable[[Path], str]:
    def change(run: Path) -> str:
        record = {"kind": "anything", "fmt": LINE_FORMAT + 1, "by": NEWER, "crc": "sha:1"}
        with open(run / name, "a", encoding="utf-8") as file:
            file.write(json.dumps(record) + "\n")
        return f"{name} line "

    return change


CHANGES: dict[str, Callable[[Path], str]] = {
    "checkpoint.json": newer_checkpoint,
    "checkpoint.journal": newer_line("checkpoint.journal"),
    "spend.jsonl": newer_line("spend.jsonl"),
}


@pytest.mark.parametrize("kind", ["killed", "stopped"])
def test_a_night_of_a_newer_format_is_refused_untouched_and_resumes_once_put_back(
    tmp_path: Path, kind: str
) -> None:
    env, mark = marked_env()
    try:
        run = night(tmp_path, kind, env, mark)
        kill_marked(mark)  # the killed task's command must not run on behind the resumes
        repo = tmp_path / "repo"
        saved = {p: p.read_bytes() for p in run.iterdir() if p.is_file()}
        as_left = digest(run, repo)

        for name, change in CHANGES.items():
            said = change(run)
            before = digest(run, repo)

            done = subprocess.run(
                overnight("resume", run),
                env=env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=60,
            )

            assert done.returncode == 64, (name, done.stderr)
            assert f"written by overnight {NEWER}" in done.stderr, name
            assert said in done.stderr, (name, done.stderr)
            assert f"this is overnight {WRITTEN_BY}" in done.stderr, name
            assert "upgrade to resume" in done.stderr, name
            assert "checkpoint_corrupt" not in done.stderr + done.stdout, name
            assert digest(run, repo) == before, f"{name}: the refusal changed the run"
            for path in run.iterdir():  # put back as the night left it
                if path.is_file() and path not in saved:
                    path.unlink()
            for path, data in saved.items():
                path.write_bytes(data)
            assert digest(run, repo) == as_left

        raises = ["--steps", "10"] if kind == "stopped" else []
        assert run_cli(overnight("resume", run, *raises, "--quiet"), env, tmp_path) == 0
        result = load_result(run)
        assert result["stop_reason"] == "GOAL_MET"
        assert result["plan"]["done"] == ["t_0", "t_1"]
    finally:
        kill_marked(mark)


@pytest.mark.parametrize("fixture", fixture_dirs(), ids=lambda p: p.name)
def test_each_stored_run_resumes_to_an_ending(tmp_path: Path, fixture: Path) -> None:
    run = set_up(fixture, tmp_path)
    env, mark = marked_env()
    try:
        assert run_cli(overnight("resume", run, "--quiet"), env, tmp_path, timeout=120) == 0
        result = load_result(run)
        assert result["stop_reason"] == "GOAL_MET"
        assert result["plan"]["done"] == ["t_0", "t_1"]
        frame = json.loads((run / "checkpoint.json").read_bytes())
        assert (frame["schema_version"], frame["written_by"]) == (SCHEMA_VERSION, WRITTEN_BY)
    finally:
        kill_marked(mark)
