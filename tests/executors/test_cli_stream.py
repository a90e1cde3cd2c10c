"""Reading the CLIs' JSON event lines (as the pinned releases print them) into trace events,
and what each says of itself, kept apart from the harness's own figures."""

from __future__ import annotations

import json

from overnight.core.tasks import Task
from overnight.executors import build_prompt
from overnight.executors.cli_stream import ClaudeReader, CodexReader, Reader
from overnight.executors.runner import MAX_PROMPT, changes, snapshot


def lines(*events: object) -> list[str]:
    return [json.dumps(e) for e in events]


def test_claude_code_stream() -> None:
    reader = ClaudeReader()
    got: list[dict[str, object]] = []
    for line in [
        "[claude-code:unrecognized_model] not JSON",
        *lines(
            {
                "type": "system",
                "subtype": "init",
                "claude_code_version": "2.1.332",
                "model": "m",
                "tools": ["Bash", "Edit"],
            },
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {"type": "text", "text": "Reading."},
                        {"type": "tool_use", "name": "Read", "input": {"file_path": "x" * 500}},
                    ]
                },
            },
            {
                "type": "user",
                "message": {
                    "content": [{"type": "tool_result", "is_error": True, "content": "no"}]
                },
            },
            {"type": "assistant", "parent_tool_use_id": "t1", "message": {"content": []}},
            {
                "type": "result",
                "subtype": "error_max_turns",
                "is_error": True,
                "num_turns": 4,
                "total_cost_usd": 0.25,
                "result": "Stopped at the limit.",
            },
        ),
    ]:
        got += reader.line(line)
    assert [e["event"] for e in got] == [
        "init",
        "turn",
        "message",
        "tool_call",
        "tool_result",
        "result",
    ]
    assert got[0] == {"event": "init", "version": "2.1.332", "model": "m", "tools": 2}
    assert len(str(got[3]["input"])) <= 200
    assert got[4] == {"event": "tool_result", "error": True}
    assert got[5]["cli_reported_cost_usd"] == 0.25 and got[5]["cli_success"] is False
    said = reader.said
    assert said.hit_max_turns and said.turns == 4 and said.tool_calls == 1
    assert reader.final() == "Stopped at the limit."


def test_codex_stream() -> None:
    reader = CodexReader()
    got: list[dict[str, object]] = []
    for line in lines(
        {"type": "thread.started", "thread_id": "th"},
        {"type": "item.completed", "item": {"type": "error", "message": "no metadata"}},
        {"type": "turn.started"},
        {
            "type": "item.started",
            "item": {
                "type": "file_change",
                "status": "in_progress",
                "changes": [{"path": "/w/calc.py"}],
            },
        },
        {
            "type": "item.completed",
            "item": {
                "type": "file_change",
                "status": "completed",
                "changes": [{"path": "/w/calc.py"}],
            },
        },
        {"type": "item.started", "item": {"type": "command_execution", "command": "ls"}},
        {
            "type": "item.completed",
            "item": {"type": "command_execution", "command": "ls", "exit_code": 2},
        },
        {"type": "item.completed", "item": {"type": "agent_message", "text": "Fixed."}},
        {"type": "turn.failed", "error": {"message": "quota"}},
    ):
        got += reader.line(line)
    assert [e["event"] for e in got] == [
        "init",
        "warning",
        "turn",
        "tool_call",
        "tool_call",
        "tool_result",
        "message",
        "error",
    ]
    assert got[1] == {"event": "warning", "message": "no metadata"}
    assert got[3] == {"event": "tool_call", "tool": "apply_patch", "input": '["/w/calc.py"]'}
    assert got[5] == {"event": "tool_result", "error": True}
    assert reader.said.success is False and reader.said.detail == "quota"
    assert reader.final() == "Fixed."


def test_plain_output_ends_in_its_last_lines() -> None:
    reader = Reader()
    for n in range(30):
        assert reader.line(f"line {n}") == []
    assert reader.line('{"not": "an event"}') == []
    assert reader.final().splitlines()[-1] == "line 29"
    assert "line 9\n" not in reader.final()


def test_the_prompt_holds_what_the_task_needs_and_stays_within_its_size() -> None:
    task = Task(id="t9", title="Fix it", brief="The brief.", verify="pytest -q tests/x.py")
    prompt = build_prompt(task, goal="All green.", earlier="Tried A.", instructions="Be brief.")
    for part in (
        "Task t9: Fix it",
        "The brief.",
        "pytest -q tests/x.py",
        "All green.",
        "Be brief.",
        "do not repeat it:\nTried A.",
    ):
        assert part in prompt, part
    long = build_prompt(task, earlier="x" * (3 * MAX_PROMPT) + "THE END")
    assert len(long) <= MAX_PROMPT and long.endswith("THE END")


def test_the_worktree_snapshot_sees_changes_but_not_caches(tmp_path: object) -> None:
    from pathlib import Path

    root = Path(str(tmp_path))
    (root / ".git").write_text("gitdir: elsewhere\n")
    (root / "a.py").write_text("a = 1\n")
    before = snapshot(root)
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"x")
    (root / ".git").write_text("gitdir: moved\n")
    assert changes(before, snapshot(root)) == []
    (root / "b.py").write_text("b = 2\n")
    (root / "a.py").chmod(0o755)
    assert changes(before, snapshot(root)) == ["a.py", "b.py"]
