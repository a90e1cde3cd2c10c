"""`overnight demo --executor claude-code` (and `codex`): the bundled example carried out by
the installed CLI, in the real sandbox, its every call through the real metering proxy to the
shipped scripted model on 127.0.0.1, with no key in the environment and no money spent; the
harness's verify and goal predicate judge what the CLI did, as for any executor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from overnight.cli.parser import DEMO_EXECUTORS as PARSER_EXECUTORS
from overnight.demo import DEMO_EXECUTORS, DEMO_KEY
from tests.executors.clis import cli_path
from tests.helpers.nights import cli_env


@pytest.mark.parametrize(("kind", "program"), [("claude-code", "claude"), ("codex", "codex")])
def test_the_demo_runs_the_cli_through_the_proxy_with_no_key(
    kind: str, program: str, tmp_path: Path
) -> None:
    found = cli_path(program)  # a skip (a failure under CI) when it is not installed
    env = cli_env()
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(name, None)
    env["PATH"] = f"{found.parent}{os.pathsep}{env['PATH']}"
    where = tmp_path / "demo"

    done = subprocess.run(
        [sys.executable, "-m", "overnight", "demo", "--executor", kind, "--dir", where],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"carried out by {kind}" in done.stderr and "SCRIPTED" in done.stderr
    result = json.loads((where / "run" / "result.json").read_text())
    assert result["stop_reason"] == "GOAL_MET"
    assert [v["id"] for v in result["verified"]] == ["fix_words", "fix_ties"]
    executor = result["executor"]
    assert executor["kind"] == kind and executor["version"]
    assert [a["task"] for a in executor["attempts"]] == ["fix_words", "fix_ties"]
    assert all(a["calls"] > 0 and a["booked_usd"] > 0 for a in executor["attempts"])
    # The tests were not edited: the fixes are the CLI's, in the code under test.
    repo = where / "workspace"
    changed = subprocess.run(
        ["git", "-C", repo, "diff", "--name-only", "main", result["branch"]["name"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert changed == ["textstats/core.py"]
    # The upstream's credential stayed with the harness: nowhere in what the sandbox saw.
    for log in (where / "run" / "artifacts").glob("*.agent.log"):
        assert DEMO_KEY not in log.read_text()


def test_the_parser_offers_the_demo_s_executors() -> None:
    assert PARSER_EXECUTORS == DEMO_EXECUTORS
