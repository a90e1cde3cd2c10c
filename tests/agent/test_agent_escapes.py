"""Escapes attempted through the agent: every path outside the worktree, every link out of it,
.git, and the provider's key. The fake model asks; the real tools answer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.agent.support import (
    AgentModel,
    Step,
    agent_spec,
    agent_task,
    calc_repo,
    dumped,
    last_results,
)
from tests.helpers.nights import git, run_night

SECRET = "outside-secret-2f9c41d7"
KEY = "sk-ant-api03-canary-7d0e1b5a9c3f"
PRINT_KEY = "python3 -c \"import os;print(os.environ.get('ANTHROPIC_API_KEY'))\""


def files_of(root: Path) -> list[Path]:
    """Every regular file under ``root``, links not followed."""
    found: list[Path] = []
    for current, _dirs, names in os.walk(root, followlinks=False):
        found += [Path(current, n) for n in names if not Path(current, n).is_symlink()]
    return found


def test_escapes_through_the_agent_are_refused_and_leak_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    outside = tmp_path / "outside.txt"
    outside.write_text(f"{SECRET}\n")
    (tmp_path / "outdir").mkdir()
    (tmp_path / "outdir" / "outside.txt").write_text(f"{SECRET}\n")
    repo = calc_repo(tmp_path)
    (repo / "escape.txt").symlink_to(outside)
    (repo / "outlink").symlink_to(tmp_path / "outdir")
    git(repo, "add", "escape.txt", "outlink")
    git(repo, "commit", "-q", "-m", "links")
    hooks = Path(git(repo, "rev-parse", "--git-common-dir"))
    hooks = (hooks if hooks.is_absolute() else repo / hooks) / "hooks"

    out = "is outside the workspace"
    link = "symbolic link that points outside the workspace"
    git_dir = "is inside .git, which overnight manages"
    escapes: list[tuple[Step, str]] = [
        (("read_file", {"path": "../outside.txt"}), out),
        (("read_file", {"path": "../../outside.txt"}), out),
        (("read_file", {"path": str(outside)}), out),
        (("read_file", {"path": "escape.txt"}), link),
        (("read_file", {"path": "outlink/outside.txt"}), link),
        (("search_text", {"pattern": "secret", "path": "escape.txt"}), link),
        (("list_files", {"path": "../.."}), out),
        (("write_file", {"path": "escape.txt", "content": "overwritten\n"}), link),
        (("edit_file", {"path": "escape.txt", "old": "secret", "new": "edited"}), link),
        (("write_file", {"path": str(outside), "content": "overwritten\n"}), out),
        (("write_file", {"path": "outlink/new.txt", "content": "planted\n"}), link),
        (("write_file", {"path": ".git/hooks/post-commit", "content": "#!/bin/sh\n"}), git_dir),
        (("write_file", {"path": ".git", "content": "gitdir: /tmp\n"}), git_dir),
        (("edit_file", {"path": ".git", "old": "gitdir", "new": "x"}), git_dir),
        (("run_command", {"command": "echo $ANTHROPIC_API_KEY"}), "'$' (variable"),
        (("run_command", {"command": 'echo "${ANTHROPIC_API_KEY}"'}), "'$' inside double quotes"),
        (("run_command", {"command": "git config core.hooksPath /tmp"}), "git is not available"),
    ]
    refused = [step for step, _ in escapes]
    allowed: list[Step] = [
        ("run_command", {"command": PRINT_KEY}),
        ("run_command", {"command": "env"}),
        ("search_text", {"pattern": "secret"}),
    ]
    script = [*refused, *allowed, "I could not get out."]
    spec = agent_spec(
        repo,
        tasks=[agent_task("escape", verify="true")],
        agent={"max_calls": len(script)},
        commands=["python3", "echo", "env"],
    )
    model = AgentModel({"escape": script})
    rd, result = run_night(spec, tmp_path / "run", model=model)

    requests = model.executes("escape")
    assert len(requests) == len(script)
    answers = [last_results(r)[0] for r in requests[1:]]
    for (step, why), answer in zip(escapes, answers[: len(escapes)], strict=True):
        assert answer["is_error"] is True, step
        assert why in answer["content"], (step, answer["content"])

    printed, env, searched = answers[len(refused) :]
    assert printed["is_error"] is False  # it ran: the key is just not in its environment
    assert "exit code 0" in printed["content"]
    assert printed["content"].splitlines()[-1] == "None"
    assert env["is_error"] is False and "exit code 0" in env["content"]
    assert "ANTHROPIC_API_KEY" not in env["content"]
    assert searched["is_error"] is False
    assert "link(s) to outside the workspace skipped" in searched["content"]

    # nothing outside changed, nothing was planted, the history is intact
    assert outside.read_text() == f"{SECRET}\n"
    assert sorted(p.name for p in (tmp_path / "outdir").iterdir()) == ["outside.txt"]
    assert not (hooks / "post-commit").exists()
    # the night cannot be resumed, so its worktree was removed (the branch stays)
    assert not rd.worktree.exists() and '"worktree_removed"' in rd.trace.read_text()
    assert git(repo, "status", "--porcelain") == ""
    assert result.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"
    assert [v.id for v in result.verified] == ["escape"]
    # the task changed nothing: it is verified without an empty commit
    assert result.verified[0].commit is None
    assert git(repo, "rev-parse", result.branch.name) == result.branch.base_commit

    # neither the file outside nor the key reached the model or any record of the run
    for request in model.calls:
        text = dumped(request)
        assert SECRET not in text
        assert KEY not in text
    records = files_of(rd.path)  # trace, result, spend journal, checkpoint, artifacts, worktree
    assert {rd.trace, rd.result, rd.spend, rd.checkpoint} <= set(records)
    assert any(path.parent == rd.artifacts for path in records)
    for path in records:
        data = path.read_bytes()
        assert KEY.encode() not in data, path
        assert SECRET.encode() not in data, path
    assert b"[redacted]" not in rd.trace.read_bytes()  # the key was never there to redact
