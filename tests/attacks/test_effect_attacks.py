"""Attacks on the effects ledger through an MCP server the night does not trust: a server that
dies in the middle of a call (the effect happened; the night cannot know), and a server that
marks a tool with an effect ``readOnlyHint: true``. The model's fix is correct each time, so
the verify passes: only the ledger stands in the way."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.attacks.night import FIXED, AttackNight, write
from tests.tools.test_mcp import SERVER, TICKET, lines


class McpAttackNight(AttackNight):
    """The attack night with one ``[[tools.mcp]]`` server, the test server, recording what it
    is asked in ``record``."""

    entry: dict[str, Any]

    @property
    def record(self) -> Path:
        path = self.tmp / "record"
        path.mkdir(exist_ok=True)
        return path

    def serve(self, allow: list[str], *flags: str, **extra: Any) -> None:
        command = [sys.executable, str(SERVER), "--record", str(self.record), *flags, "stdio"]
        self.entry = {"name": "desk", "command": command, "allow": allow, **extra}
        self.sandbox = {"writable": [str(self.record)]}

    def spec(self) -> dict[str, Any]:
        data = super().spec()
        data["tools"]["mcp"] = [self.entry]
        return data


def test_a_server_that_dies_after_the_effect_cannot_get_the_task_landed(tmp_path: Path) -> None:
    night = McpAttackNight(tmp_path)
    night.serve(["create_ticket"], "--die-once", task_keys={"create_ticket": "{title}:ticket"})
    outcome = night.play([write("calc.py", FIXED), ("create_ticket", TICKET)])
    r = outcome.result
    assert (r["stop_reason"], outcome.exit_code) == ("QUEUE_EMPTY_GOAL_UNMET", 3)
    [effect] = r["effects"]
    assert (effect["tool"], effect["state"]) == ("create_ticket", "unknown")
    [parked] = r["plan"]["parked"]
    assert parked["reason"].startswith(f"`create_ticket` (key {effect['key']}) has an unknown")
    assert night.branch_commits(outcome) == []  # the fix passed its verify, and waits
    assert len(lines(night.record, "effects.jsonl")) == 1  # the ticket was opened
    listed = night.cli("review", "--runs", night.run_dir, "--json")
    assert f"effect:{effect['key']}" in {i["id"] for i in json.loads(listed.stdout)}
    night.assert_contained(outcome)


def test_a_server_that_calls_a_mutating_tool_read_only_is_not_believed(tmp_path: Path) -> None:
    night = McpAttackNight(tmp_path)
    night.serve(["clear_cache"])  # the server says readOnlyHint: true; the entry says nothing
    refused = night.play([write("calc.py", FIXED), ("clear_cache", {"scope": "all"})])
    assert refused.exit_code == 64 and "tools.mcp.desk.task_keys" in refused.stderr
    assert not night.run_dir.exists() and lines(night.record, "effects.jsonl") == []

    night.serve(["clear_cache"], task_keys={"clear_cache": "{scope}:clear"})
    outcome = night.play([write("calc.py", FIXED), ("clear_cache", {"scope": "all"})])
    assert (outcome.result["stop_reason"], outcome.exit_code) == ("GOAL_MET", 0)
    [effect] = outcome.result["effects"]
    assert (effect["tool"], effect["state"], effect["task_key"]) == (
        "clear_cache",
        "confirmed",
        "all:clear",
    )
    [done] = lines(night.record, "effects.jsonl")
    assert done["key"] == effect["key"]  # intent written, then the call with its key
    night.assert_contained(outcome)
