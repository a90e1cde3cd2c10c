"""A run's files hold prompts, outputs, spend and effects: only their owner may read them."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from overnight.testing import ScriptedModel
from tests.helpers.nights import command_task, make_repo, make_spec, run_night


def test_run_files_are_the_owners_only(repo: Path, tmp_path: Path) -> None:
    tasks = [
        command_task("c1", "echo one > one.txt", "test -f one.txt"),
        command_task("c2", "echo half > two.txt", "exit 1", retries=0),  # parked: a patch
    ]
    spec = make_spec(repo, predicate="false", tasks=tasks)
    rd, _r = run_night(spec, tmp_path / "run", model=ScriptedModel())
    root = rd.path
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    checked = 0
    for path in root.rglob("*"):
        rel = path.relative_to(root).parts
        if rel[0] in ("worktree", "checkout"):  # the repository's files, as git made them
            continue
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode & 0o077 == 0, f"{path.relative_to(root)} is {oct(mode)}"
        checked += 1
    names = {p.name for p in root.rglob("*")}
    for expected in (
        "trace.jsonl",
        "spend.jsonl",
        "effects.sqlite",
        "checkpoint.json",
        "artifacts",
    ):
        assert expected in names
    assert any(p.suffix == ".patch" for p in (root / "artifacts").iterdir())
    assert checked >= 10


def test_a_secret_a_command_prints_is_redacted_in_its_log_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The value reaches the command through a file, not its environment (which is scrubbed).
    token = "tok-3f9a1c77e2b64d0d"
    monkeypatch.setenv("BILLING_SERVICE_TOKEN", token)
    repo = make_repo(tmp_path / "repo", {"conf.txt": f"token={token}\n"})
    tasks = [command_task("c1", "cat conf.txt", "cat conf.txt; exit 1", retries=0)]
    spec = make_spec(repo, predicate="false", tasks=tasks, model=False)
    rd, r = run_night(spec, tmp_path / "run")
    logs = [p.read_text() for p in (rd.path / "artifacts").glob("*.log")]
    assert not any(token in text for text in logs)
    assert sum("token=[redacted]" in text for text in logs) >= 2  # the command and its verify
    assert token not in r.model_dump_json()
    for path in rd.path.rglob("*"):
        if path.is_file() and "worktree" not in path.parts and "checkout" not in path.parts:
            assert token.encode() not in path.read_bytes(), path
