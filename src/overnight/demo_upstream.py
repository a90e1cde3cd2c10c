"""The model of the demo night with a CLI agent (``overnight demo --executor claude-code`` or
``codex``): a scripted upstream on 127.0.0.1 playing Anthropic's Messages API and OpenAI's
Responses API, for the harness's own calls
(the plan, a drift verdict, the closing summary) and for the CLI's, which reach it through the
harness's metering proxy as a real model's would. The CLI gets the tool calls of the example's
two fixes, one per request of its conversation, and runs them itself; the harness judges what
it did, as it judges any executor. No key leaves the machine; no money is spent.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from overnight.core.budget import Usage
from overnight.examples.textstats import demo_model
from overnight.messages.answers import DRIFT_TOOL, PLAN_TOOL, REPLAN_TOOL
from overnight.testing.upstream import Received, Turn, call, text, tool_calls

#: The plan and the fixes are the demo's own (the example's scripted model): the same two
#: tasks, the same edits, whoever carries them out.
PLAN: dict[str, Any] = demo_model.PLAN


def _edits() -> dict[str, tuple[str, str]]:
    """Each task's one edit of textstats/core.py, as the example's script makes it."""
    edits: dict[str, tuple[str, str]] = {}
    script: dict[str, list[tuple[str | None, Any]]] = demo_model.STEPS
    for task_id, steps in script.items():
        for tool, payload in steps:
            if tool == "edit_file":
                edits[task_id] = (str(payload["old"]), str(payload["new"]))
    return edits


def _done() -> dict[str, str]:
    """What the script's agent says when each task is done (its last step, first line)."""
    return {
        task_id: str(steps[-1][1]).splitlines()[0] for task_id, steps in demo_model.STEPS.items()
    }


_EDITS = _edits()
_DONE = _done()
_TASK = re.compile(r"Task ([A-Za-z0-9_.:-]+):")
#: What each of the CLI's answers bills, as a mid-sized agent turn would.
_USAGE = Usage(input=2400, output=160)


def _edit_command(old: str, new: str) -> str:
    """A shell command that makes one edit of textstats/core.py, as an agent's Bash call."""
    program = (
        "import json, pathlib, sys; p = pathlib.Path('textstats/core.py'); "
        "old, new = json.loads(sys.argv[1]); t = p.read_text(); "
        "assert old in t, 'the text to replace is not there'; p.write_text(t.replace(old, new))"
    )
    return f"python3 -c {shlex.quote(program)} {shlex.quote(json.dumps([old, new]))}"


def _steps(task_id: str, verify: str, shell: str) -> list[Turn]:
    """The CLI's turns for one task: read the file, edit it, run the task's check, say so;
    each command a call of its own shell tool (Claude Code's ``Bash``, Codex's
    ``exec_command``)."""
    old, new = _EDITS[task_id]
    commands = ("sed -n 1,80p textstats/core.py", _edit_command(old, new), verify)
    if shell == "Bash":
        turns = [
            tool_calls(call("Bash", command=c, description="step"), usage=_USAGE) for c in commands
        ]
    else:
        turns = [tool_calls(call("exec_command", cmd=c), usage=_USAGE) for c in commands]
    return [*turns, text(_DONE[task_id], usage=_USAGE)]


def _first_text(body: dict[str, Any]) -> str:
    """The text of a request's first message (Messages ``messages``, Responses ``input``)."""
    items = body.get("messages") or body.get("input") or []
    if isinstance(items, str):
        return items
    first = next((m for m in items if isinstance(m, dict)), None)
    return _text_of(first.get("content")) if first is not None else ""


def _turns_taken(body: dict[str, Any]) -> int:
    """How many answers of the conversation came before: the assistant's messages (Messages),
    or the results of its tool calls sent back (Responses)."""
    if "messages" in body:
        return sum(
            1 for m in body["messages"] if isinstance(m, dict) and m.get("role") == "assistant"
        )
    items = body.get("input") or []
    return sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


#: The shell tool of each CLI the demo plays for.
_SHELLS = ("Bash", "exec_command")


def _summary(first: str) -> Turn:
    try:
        facts = json.loads(first)
    except ValueError:
        return text("ok")
    if not isinstance(facts, dict) or "stop_reason" not in facts:
        return text("ok")
    done = ", ".join(str(t.get("id")) for t in facts.get("verified") or []) or "nothing"
    return text(
        f"Ended {facts['stop_reason']}. Verified and committed: {done}. The CLI agent made both "
        "fixes in textstats/core.py; the tests were not edited."
    )


def play(request: Received) -> Turn:
    """The answer to one request, from what it asks for: a structured answer the harness's
    tool names, the next step of the CLI's conversation about its task, or a text."""
    body = request.body if isinstance(request.body, dict) else {}
    names = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    if PLAN_TOOL.name in names:
        return tool_calls(call(PLAN_TOOL.name, **PLAN))
    if REPLAN_TOOL.name in names:
        return tool_calls(call(REPLAN_TOOL.name, reasoning="The queue covers the goal.", add=[]))
    if DRIFT_TOOL.name in names:
        verdict = {
            "reasoning": "Each queued task fixes a function a failing test exercises.",
            "off_goal_task_ids": [],
            "drift_score": 0.05,
        }
        return tool_calls(call(DRIFT_TOOL.name, **verdict))
    shell = next((s for s in _SHELLS if s in names), None)
    found = _TASK.search(request.raw.decode("utf-8", "replace")) if shell else None
    if shell is not None and found is not None and found.group(1) in _EDITS:
        task_id = found.group(1)
        verify = next(str(t["verify"]) for t in PLAN["tasks"] if t["id"] == task_id)
        steps = _steps(task_id, verify, shell)
        return steps[min(_turns_taken(body), len(steps) - 1)]
    first = _first_text(body)
    return _summary(first)
