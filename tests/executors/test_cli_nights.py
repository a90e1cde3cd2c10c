"""Whole nights whose agent tasks are carried out by a real CLI agent, run as a user runs them
(`overnight run night.toml`, a subprocess): Claude Code and Codex CLI at their pinned versions,
every model call through the harness's metering proxy to a scripted upstream that plays the
model. The harness's verify and goal predicate judge; the night's ledger holds every call; a
night whose CLI would spend past the cap is refused before the call that would cross it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from overnight.store.journal import read_intact_records, read_journal
from overnight.testing.upstream import Received, ScriptedUpstream, Turn, call, text, tool_calls
from tests.executors.clis import UPSTREAM_KEY, cli_path
from tests.helpers.nights import git, make_repo
from tests.helpers.sandbox import require_bwrap
from tests.helpers.toml import dumps

MODEL = "claude-sonnet-4-5"
OPENAI_MODEL = "gpt-5"

BUGGY = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": (
        "import unittest\n\nfrom calc import add\n\n\n"
        "class Add(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
    ),
}
CHECK = "python3 -m unittest -q test_calc"


def night_spec(
    tmp: Path, executor: dict[str, Any], *, usd: float = 5.0, model: str = MODEL
) -> tuple[Path, Path]:
    """A repository with one bug and a spec whose one agent task fixes it; the spec's path
    and the run directory it will use."""
    repo = make_repo(tmp / "repo", BUGGY)
    provider = "anthropic" if executor["kind"] == "claude-code" else "openai"
    spec = {
        "goal": "Every test passes.",
        "workspace": str(repo),
        "budget": {"usd": usd, "hours": 1.0},
        "predicate": {"command": CHECK, "timeout_s": 120},
        "model": {"provider": provider, "name": model, "max_attempts": 1},
        "executor": executor,
        "run": {"replan": False, "retries": 0},
        "tools": {"commands": ["python3 -m unittest"]},
        "tasks": [
            {
                "id": "fix_add",
                "title": "add adds",
                "brief": "calc.add subtracts instead of adding. Fix calc.py.",
                "verify": CHECK,
                "timeout_s": 300,
            }
        ],
    }
    path = tmp / "night.toml"
    path.write_text(dumps(spec))
    return path, tmp / "run"


def overnight(args: list[str], upstream: ScriptedUpstream) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(upstream.env())
    return subprocess.run(
        [sys.executable, "-m", "overnight", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def in_tools(request: Received, name: str) -> bool:
    tools = request.body.get("tools") if isinstance(request.body, dict) else None
    return any(isinstance(t, dict) and t.get("name") == name for t in tools or [])


def claude_fixing(calc: Path, usage_output: int = 120) -> Callable[[Received], Turn]:
    """Claude Code's model: Read, then Edit, then done; a request not of its main loop (no
    Edit tool: the harness's own closing summary, or Claude Code's side calls) gets text."""
    from overnight.core.budget import Usage

    bill = Usage(input=900, output=usage_output, cache_read=4000, cache_write_5m=1500)
    steps = [
        tool_calls(call("Read", file_path=str(calc)), usage=bill),
        tool_calls(
            call("Edit", file_path=str(calc), old_string="a - b", new_string="a + b"), usage=bill
        ),
    ]

    def answer(request: Received) -> Turn:
        if not in_tools(request, "Edit"):
            return text("The night fixed add.")
        turns = sum(1 for m in request.body.get("messages", []) if m.get("role") == "assistant")
        return steps[turns] if turns < len(steps) else text("Fixed: add adds.", usage=bill)

    return answer


def executions(run: Path) -> list[dict[str, Any]]:
    return [r for r in read_journal(run / "spend.jsonl") if r.get("kind") == "spend"]


def test_claude_code_fixes_the_bug_and_the_night_lands_goal_met(tmp_path: Path) -> None:
    require_bwrap()
    claude = cli_path("claude")
    spec, run = night_spec(tmp_path, {"kind": "claude-code", "path": str(claude), "max_turns": 6})
    script = claude_fixing(run / "worktree" / "calc.py")
    with ScriptedUpstream(script, key=UPSTREAM_KEY) as upstream:
        done = overnight(["run", str(spec), "--run-dir", str(run), "--quiet"], upstream)
        proxied = [r for r in upstream.requests if in_tools(r, "Edit")]
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((run / "result.json").read_text())
    assert result["stop_reason"] == "GOAL_MET"
    assert [v["id"] for v in result["verified"]] == ["fix_add"]
    # the branch holds one verified commit: the fix, and nothing of Claude Code's own
    repo = tmp_path / "repo"
    branch = result["branch"]["name"]
    changed = git(repo, "diff", "--name-only", f"{result['branch']['base_commit']}..{branch}")
    assert changed.split() == ["calc.py"]
    assert "a + b" in git(repo, "show", f"{branch}:calc.py")
    # every call Claude Code made reached the upstream with the harness's key, and is in the
    # night's ledger as an execute call priced from its usage (cache fields included)
    assert len(proxied) >= 3 and all(r.key == UPSTREAM_KEY for r in proxied)
    booked = [r for r in executions(run) if r["purpose"] == "execute"]
    assert len(booked) == len(proxied)
    assert all(r["usage"]["cache_read"] == 4000 for r in booked)
    assert result["spend"]["total_usd"] == pytest.approx(
        sum(r["usd"] for r in executions(run)), abs=1e-6
    )
    # the max_tokens forwarded is what the night could pay, never more than asked
    assert all(0 < int(r.body["max_tokens"]) <= 128_000 for r in proxied)
    trace = list(read_intact_records(run / "trace.jsonl"))
    cli = [e for e in trace if e["kind"] == "cli_event"]
    assert {e["event"] for e in cli} >= {"start", "tool_call", "end"}
    assert [e["tool"] for e in cli if e["event"] == "tool_call"] == ["Read", "Edit"]
    # the CLI's own account is in the result beside the harness's figure, and never counts
    ex = result["executor"]
    assert ex["kind"] == "claude-code" and ex["version"]
    [attempt] = ex["attempts"]
    assert attempt["task"] == "fix_add" and attempt["calls"] == len(proxied)
    assert attempt["booked_usd"] == pytest.approx(sum(r["usd"] for r in booked), abs=1e-6)
    report = subprocess.run(
        [sys.executable, "-m", "overnight", "report", str(run), "--md"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Executor: claude-code" in report and f"booked ${attempt['booked_usd']:.4f}" in report
    # the key never reached the trace, the CLI's log or the report
    assert UPSTREAM_KEY not in report
    for path in (run / "trace.jsonl", *(run / "artifacts").glob("*.log")):
        assert UPSTREAM_KEY not in path.read_text(errors="replace")


def test_a_cli_that_would_spend_past_the_cap_is_refused_before_the_call(tmp_path: Path) -> None:
    require_bwrap()
    claude = cli_path("claude")
    spec, run = night_spec(
        tmp_path, {"kind": "claude-code", "path": str(claude), "max_turns": 50}, usd=0.60
    )
    from overnight.core.budget import Usage

    # Every answer bills 20,000 output tokens ($0.30 at $15/M): the night can pay for one.
    costly = Usage(input=2000, output=20_000)

    def spending(request: Received) -> Turn:
        if not in_tools(request, "Edit"):
            return text("summary")
        return tool_calls(call("Bash", command="ls", description="look"), usage=costly)

    model: list[Callable[[Received], Turn]] = [spending]
    with ScriptedUpstream(lambda r: model[0](r), key=UPSTREAM_KEY) as upstream:
        done = overnight(["run", str(spec), "--run-dir", str(run), "--quiet"], upstream)
        proxied = [r for r in upstream.requests if in_tools(r, "Edit")]
        result = json.loads((run / "result.json").read_text())
        assert result["stop_reason"].startswith("BUDGET_EXHAUSTED"), done.stderr[-2000:]
        assert done.returncode == 2 and result["resumable"] is True
        cap = tomllib.loads(spec.read_text())["budget"]["usd"]
        # the ledger shows no call beyond the cap: every attempt was held within it before it
        # was forwarded, and what was booked stays under it
        spent = sum(r["usd"] for r in executions(run))
        assert spent <= cap
        records = read_journal(run / "spend.jsonl")
        reserves = [r for r in records if r.get("kind") == "reserve" and r["purpose"] == "execute"]
        assert len(reserves) == len(proxied)  # nothing forwarded that was not held first
        trace = list(read_intact_records(run / "trace.jsonl"))
        assert any(e.get("decision") == "call_refused" for e in trace)
        # Claude Code stopped on the refusal by itself; its own cost figure is its word only
        end = [e for e in trace if e["kind"] == "cli_event" and e["event"] == "end"]
        assert end[-1]["status"] == "limit_reached"

        # A resume with a raised cap continues the task, which Claude Code now fixes.
        model[0] = claude_fixing(run / "worktree" / "calc.py")
        again = overnight(["resume", str(run), "--usd", "5"], upstream)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((run / "result.json").read_text())["stop_reason"] == "GOAL_MET"


def test_codex_fixes_the_bug_and_the_night_lands_goal_met(tmp_path: Path) -> None:
    require_bwrap()
    codex = cli_path("codex")
    spec, run = night_spec(
        tmp_path, {"kind": "codex", "path": str(codex)}, model=OPENAI_MODEL, usd=5.0
    )
    patch = (
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: calc.py\n@@\n"
        "-    return a - b\n+    return a + b\n*** End Patch\nEOF\n"
    )

    def answer(request: Received) -> Turn:
        if not request.body.get("tools"):  # the harness's own closing summary
            return text("The night fixed add.")
        items = request.body.get("input") or []
        outputs = [
            i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        if not outputs:
            return tool_calls(call("exec_command", cmd=patch))
        return text("Fixed: add adds.")

    with ScriptedUpstream(answer, key=UPSTREAM_KEY) as upstream:
        done = overnight(["run", str(spec), "--run-dir", str(run), "--quiet"], upstream)
        proxied = [r for r in upstream.requests if isinstance(r.body, dict) and r.body.get("tools")]
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((run / "result.json").read_text())
    assert result["stop_reason"] == "GOAL_MET"
    assert proxied and all(r.key == UPSTREAM_KEY for r in proxied)
    assert len([r for r in executions(run) if r["purpose"] == "execute"]) == len(proxied)


def test_a_night_killed_during_a_claude_code_task_resumes_and_lands_the_fix(
    tmp_path: Path,
) -> None:
    require_bwrap()
    claude = cli_path("claude")
    spec, run = night_spec(tmp_path, {"kind": "claude-code", "path": str(claude), "max_turns": 6})
    calc = run / "worktree" / "calc.py"
    fixing = claude_fixing(calc)

    def held(request: Received) -> Turn:
        """Claude Code's first call answers; its second hangs (the harness is killed then)."""
        if in_tools(request, "Edit") and any(
            m.get("role") == "assistant" for m in request.body.get("messages", [])
        ):
            return text("never sent", delay=20.0)
        return fixing(request)

    model: list[Callable[[Received], Turn]] = [held]
    with ScriptedUpstream(lambda r: model[0](r), key=UPSTREAM_KEY) as upstream:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
        env.update(upstream.env())
        night = subprocess.Popen(
            [sys.executable, "-m", "overnight", "run", str(spec), "--run-dir", str(run), "--quiet"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                asked = [r for r in upstream.requests if in_tools(r, "Edit")]
                if len(asked) >= 2:
                    break
                time.sleep(0.1)
            else:
                pytest.fail("Claude Code never made its second call")
        finally:
            night.kill()  # kill -9, in the middle of the CLI's task
            night.wait()
        # the sandbox died with the harness: no Claude Code of this run is left running
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _running_for(run):
            time.sleep(0.2)
        assert not _running_for(run)
        assert not (run / "result.json").exists()

        model[0] = fixing
        again = overnight(["resume", str(run)], upstream)
    assert again.returncode == 0, again.stderr[-3000:]
    result = json.loads((run / "result.json").read_text())
    assert result["stop_reason"] == "GOAL_MET"
    assert [v["id"] for v in result["verified"]] == ["fix_add"]
    # the killed attempt's reservation counts at its worst case; the resumed one is booked
    assert result["spend"]["total_usd"] >= sum(r["usd"] for r in executions(run)) - 1e-9


def _running_for(run: Path) -> list[int]:
    """Processes whose command line names this run's directory (its CLI, its bridge)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(run).encode() in cmdline:
            found.append(int(proc.name))
    return found
