"""``overnight demo``: the bundled agent night, end to end through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers.nights import cli_env, git
from tests.helpers.sandbox import require_bwrap


def demo(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = cli_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a user's machine: bytecode gets written
    return subprocess.run(
        [sys.executable, "-m", "overnight", "demo", "--dir", str(where), "--quiet", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def result_of(where: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((where / "run" / "result.json").read_text())
    return data


def unittest_in(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "unittest", "discover", "-s", "tests", "-q"],
        cwd=directory,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_demo_fixes_textstats_on_its_branch(tmp_path: Path) -> None:
    done = demo(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "the model in this night is SCRIPTED" in done.stderr
    result = result_of(tmp_path)
    assert result["stop_reason"] == "GOAL_MET"
    assert [v["id"] for v in result["verified"]] == ["fix_words", "fix_ties"]
    # Once the agent has worked, every verify and the predicate run in the sandbox; only the
    # first goal check, on the untouched checkout, runs as written.
    require_bwrap()
    sandbox = result["sandbox"]
    assert sandbox["mode"] == "auto" and sandbox["network"] is False
    assert sandbox["sandboxed_commands"] >= 3 and sandbox["unsandboxed_commands"] == 1

    workspace = tmp_path / "workspace"
    base, branch = result["branch"]["base_commit"], result["branch"]["name"]
    assert git(workspace, "diff", "--name-only", base, branch) == "textstats/core.py"
    diff = git(workspace, "diff", base, branch)
    assert "+    return [w.lower() for w in stripped if w]" in diff
    assert "key=lambda item: (-item[1], item[0]))" in diff
    assert git(workspace, "rev-parse", "--abbrev-ref", "HEAD") == "main"

    assert unittest_in(workspace).returncode != 0  # the checkout still has both bugs
    checkout = tmp_path / "checkout"
    git(workspace, "worktree", "add", "-q", "--detach", str(checkout), branch)
    tests = unittest_in(checkout)
    assert tests.returncode == 0, tests.stderr
    assert "Ran 4 tests" in tests.stderr and tests.stderr.rstrip().endswith("OK")


def test_the_command_task_example_still_runs(tmp_path: Path) -> None:
    done = demo(tmp_path, "--example", "migrations")
    assert done.returncode == 0, done.stderr
    result = result_of(tmp_path)
    assert result["stop_reason"] == "GOAL_MET"
    assert [v["id"] for v in result["verified"]] == ["m_0001", "m_0002", "m_0003", "m_0004"]
    changed = git(tmp_path / "workspace", "diff", "--name-only", "main", result["branch"]["name"])
    assert changed.splitlines() == [f"schema/000{n}.sql" for n in range(1, 5)]


def test_a_second_demo_in_the_same_directory_is_refused_plainly(tmp_path: Path) -> None:
    assert demo(tmp_path).returncode == 0
    again = demo(tmp_path)
    assert again.returncode == 64, again.stderr
    assert "already holds a demo" in again.stderr and "Traceback" not in again.stderr
    assert result_of(tmp_path)["stop_reason"] == "GOAL_MET"  # the first demo is untouched


def test_on_a_terminal_the_demo_shows_the_live_panel(tmp_path: Path) -> None:
    import os
    import pty
    import select

    main_fd, child_fd = pty.openpty()
    env = cli_env()
    env.update(TERM="xterm-256color", COLUMNS="100", LINES="40")
    proc = subprocess.Popen(
        [sys.executable, "-m", "overnight", "demo", "--dir", str(tmp_path)],
        stdin=child_fd,
        stdout=child_fd,
        stderr=child_fd,
        env=env,
        close_fds=True,
    )
    os.close(child_fd)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([main_fd], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(main_fd, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not data:
            break
        chunks.append(data)
    os.close(main_fd)
    assert proc.wait(timeout=60) == 0
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert "╭" in screen and "overnight" in screen  # the panel's frame and title
    assert "spent" in screen or "$" in screen
