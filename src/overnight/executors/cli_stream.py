"""Reading what a CLI agent prints: its JSON event lines, one at a time, as trace events.

Each reader turns one line into zero or more ``cli_event`` fields (``event``: ``init``,
``turn``, ``tool_call``, ``tool_result``, ``message``, ``error``, ``result``) and keeps what
the run's end needs: the final message, and what the CLI said of itself (its success flag, its
turns, its own cost figure). None of it is trusted: the harness's verify and goal predicate
judge the work, and the harness's meter what it cost. A line that is not JSON, or not an event
the reader knows, yields nothing (it stays in the log).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

#: The most characters of a tool call's input, a message or an error kept in one event.
SHORT = 200
#: The most characters of the final message kept for the summary.
FINAL = 2000
#: Lines longer than this are not parsed (kept in the log only).
MAX_LINE = 4 << 20

#: A terminal's escape sequences (colours), left out of a final message.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def short(value: Any, limit: int = SHORT) -> str:
    """``value`` as one line of at most ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Said:
    """What a CLI said of its run (recorded beside the harness's figures, never trusted)."""

    final: str = ""
    """Its last message to the user."""
    success: bool | None = None
    """Its own success flag, when it gives one."""
    detail: str = ""
    """How it says it ended (Claude Code's result ``subtype``, an error's message)."""
    turns: int = 0
    tool_calls: int = 0
    cost_usd: float | None = None
    """Its own cost figure (Claude Code's ``total_cost_usd``)."""
    hit_max_turns: bool = False
    errors: list[str] = field(default_factory=list)


class Reader:
    """Lines of a CLI without JSON events: the last lines it printed are its final message."""

    def __init__(self) -> None:
        self.said = Said()
        self._tail: list[str] = []

    def line(self, raw: str) -> list[dict[str, Any]]:
        text = raw.strip()
        if not text:
            return []
        if len(text) <= MAX_LINE and text.startswith("{"):
            try:
                data = json.loads(text)
            except ValueError:
                data = None
            if isinstance(data, dict):
                return self.event(data)
        self._plain(text)
        return []

    def event(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        return []

    def _plain(self, text: str) -> None:
        plain = _ANSI.sub("", text).strip()
        if plain:
            self._tail = [*self._tail[-19:], plain]

    def final(self) -> str:
        return self.said.final or "\n".join(self._tail)[-FINAL:]


class ClaudeReader(Reader):
    """``claude -p --output-format stream-json --verbose``: ``system``/``init``, then an
    ``assistant`` message per model turn (text and ``tool_use`` blocks), a ``user`` message
    per round of tool results, and one ``result`` at the end."""

    def event(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        kind = data.get("type")
        if kind == "system" and data.get("subtype") == "init":
            tools = data.get("tools")
            return [
                {
                    "event": "init",
                    "version": short(data.get("claude_code_version", "")),
                    "model": short(data.get("model", "")),
                    "tools": len(tools) if isinstance(tools, list) else None,
                }
            ]
        if kind == "assistant":
            return self._assistant(data)
        if kind == "user":
            return self._results(data)
        if kind == "result":
            return self._result(data)
        return []

    def _assistant(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        message = data.get("message")
        if not isinstance(message, dict) or data.get("parent_tool_use_id"):
            return []
        self.said.turns += 1
        out: list[dict[str, Any]] = [{"event": "turn", "turn": self.said.turns}]
        if data.get("error"):
            error = short(data.get("error"))
            self.said.errors.append(error)
            out.append({"event": "error", "message": error})
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                self.said.tool_calls += 1
                out.append(
                    {
                        "event": "tool_call",
                        "tool": short(block.get("name", ""), 80),
                        "input": short(block.get("input", {})),
                    }
                )
            elif block.get("type") == "text" and str(block.get("text", "")).strip():
                text = str(block["text"])
                self.said.final = text[-FINAL:]
                out.append({"event": "message", "text": short(text)})
        return out

    def _results(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        message = data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        out: list[dict[str, Any]] = []
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out.append({"event": "tool_result", "error": bool(block.get("is_error"))})
        return out

    def _result(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        said = self.said
        said.success = not bool(data.get("is_error")) and data.get("subtype") == "success"
        said.detail = short(data.get("subtype", ""), 80)
        said.hit_max_turns = data.get("subtype") == "error_max_turns"
        turns = data.get("num_turns")
        if isinstance(turns, int) and not isinstance(turns, bool):
            said.turns = max(said.turns, turns)
        cost = data.get("total_cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            said.cost_usd = float(cost)
        result = data.get("result")
        if isinstance(result, str) and result.strip():
            said.final = result[-FINAL:]
        return [
            {
                "event": "result",
                "cli_success": said.success,
                "detail": said.detail,
                "turns": said.turns,
                "cli_reported_cost_usd": said.cost_usd,
            }
        ]


class CodexReader(Reader):
    """``codex exec --json``: ``thread.started``, then per turn ``turn.started``, items
    (``item.started``/``item.completed``: ``agent_message``, ``reasoning``,
    ``command_execution``, ``file_change``, ``mcp_tool_call``, ``web_search``...),
    ``turn.completed`` with its usage or ``turn.failed``; ``error`` events between."""

    def event(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        kind = data.get("type")
        if kind == "thread.started":
            return [{"event": "init", "thread": short(data.get("thread_id", ""), 80)}]
        if kind == "turn.started":
            self.said.turns += 1
            return [{"event": "turn", "turn": self.said.turns}]
        if kind == "turn.completed":
            self.said.success = True
            return []
        if kind == "turn.failed":
            error = data.get("error")
            message = short(error.get("message", "") if isinstance(error, dict) else error)
            self.said.success = False
            self.said.detail = message
            self.said.errors.append(message)
            return [{"event": "error", "message": message}]
        if kind == "error":
            message = short(data.get("message", ""))
            self.said.errors.append(message)
            return [{"event": "error", "message": message}]
        if kind in ("item.started", "item.completed"):
            item = data.get("item")
            if isinstance(item, dict):
                return self._item(item, started=kind == "item.started")
        return []

    def _item(self, item: dict[str, Any], *, started: bool) -> list[dict[str, Any]]:
        kind = item.get("type") or item.get("item_type")
        if kind == "error" and not started:
            return [{"event": "warning", "message": short(item.get("message", ""))}]
        if kind == "agent_message":
            if started or not str(item.get("text", "")).strip():
                return []
            text = str(item["text"])
            self.said.final = text[-FINAL:]
            return [{"event": "message", "text": short(text)}]
        if kind == "command_execution":
            if started:
                self.said.tool_calls += 1
                return [
                    {"event": "tool_call", "tool": "shell", "input": short(item.get("command"))}
                ]
            code = item.get("exit_code")
            return [{"event": "tool_result", "error": code not in (0, None)}]
        if kind == "file_change":
            if started:
                return []
            changes = item.get("changes")
            paths = [
                short(c.get("path", ""), 80)
                for c in (changes if isinstance(changes, list) else [])
                if isinstance(c, dict)
            ]
            self.said.tool_calls += 1
            return [{"event": "tool_call", "tool": "apply_patch", "input": short(paths)}]
        if kind in ("mcp_tool_call", "web_search") and started:
            self.said.tool_calls += 1
            name = item.get("tool") or item.get("query") or kind
            return [{"event": "tool_call", "tool": short(kind, 80), "input": short(name)}]
        return []


def reader_for(kind: str) -> Reader:
    if kind == "claude-code":
        return ClaudeReader()
    if kind == "codex":
        return CodexReader()
    return Reader()


__all__ = ["ClaudeReader", "CodexReader", "Reader", "Said", "reader_for", "short"]
