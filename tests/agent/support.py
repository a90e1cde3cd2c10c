"""Agent nights in tests: a small Python repository with a bug, a spec that leaves agent tasks
to the built-in ``AgentExecutor``, and a fake model that plays each task from a script.

The fake answers every purpose. For ``execute`` calls it finds the task by the id in the
first user message and the step by the number of the model's turns so far, so the same
script replays identically on a retry. Every answer carries usage sized from the request
(about four bytes per input token), so the ledger prices realistic calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from overnight.config.spec import Spec
from overnight.messages.types import ModelRequest, estimate_input_tokens
from overnight.store.journal import read_journal
from overnight.store.rundir import RunDir
from overnight.testing import FunctionModel, text_answer, tool_answer, usage_dict
from tests.helpers.nights import make_repo, make_spec

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = BUGGY.replace("return a - b", "return a + b")
TESTS = """\
import unittest

from calc.core import add, mul


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mul(self):
        self.assertEqual(mul(2, 3), 6)
"""
CALC_FILES = {
    ".gitignore": "__pycache__/\n",
    "README.md": "calc: two functions and their tests\n",
    "calc/__init__.py": "",
    "calc/core.py": BUGGY,
    "tests/__init__.py": "",
    "tests/test_calc.py": TESTS,
}
UNITTEST = "python3 -m unittest tests.test_calc -q"
ALL_TOOLS = ["read_file", "list_files", "search_text", "write_file", "edit_file", "run_command"]
QUIET_RUN = {"replan": False, "drift_every": 1000, "retries": 0}

Call = tuple[str, dict[str, Any]]
Step = Call | str
"""A tool call (name, input), or the final answer's text."""
Script = list[Step] | Callable[[ModelRequest, int], Step]
"""The steps of one task in order, or a function of (request, step)."""

FIX_ADD: list[Step] = [
    ("read_file", {"path": "calc/core.py"}),
    ("edit_file", {"path": "calc/core.py", "old": "return a - b", "new": "return a + b"}),
    ("run_command", {"command": UNITTEST}),
    "add() now adds; the tests pass.",
]


def calc_repo(tmp_path: Path, extra: dict[str, str] | None = None) -> Path:
    return make_repo(tmp_path / "repo", {**CALC_FILES, **(extra or {})})


def agent_task(tid: str, brief: str = "", verify: str = UNITTEST, **extra: Any) -> dict[str, Any]:
    return {
        "id": tid,
        "title": f"task {tid}",
        "brief": brief or f"Carry out {tid}.",
        "verify": verify,
        **extra,
    }


def agent_spec(
    repo: Path,
    *,
    allow: list[str] | None = None,
    commands: list[str] | None = None,
    agent: dict[str, Any] | None = None,
    run: dict[str, Any] | None = None,
    predicate: str = UNITTEST,
    tool_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Spec:
    return make_spec(
        repo,
        predicate=predicate,
        agent=agent or {},
        tools={
            "allow": ALL_TOOLS if allow is None else allow,
            "commands": ["python3 -m unittest"] if commands is None else commands,
            **(tool_options or {}),
        },
        run={**QUIET_RUN, **(run or {})},
        **kwargs,
    )


# --------------------------------------------------------------------------- requests


def text_of(content: Any) -> str:
    """The text of a message's content, whether a string or a list of blocks."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if block.get("type") == "text":
            parts.append(str(block["text"]))
        elif block.get("type") == "tool_result":
            parts.append(str(block["content"]))
    return "\n".join(parts)


def first_text(request: ModelRequest) -> str:
    return text_of(request.messages[0]["content"])


def task_of(request: ModelRequest) -> str:
    """The task id in ``Task <id>: <title>``, the first line of every task's first message."""
    return first_text(request).splitlines()[0].removeprefix("Task ").split(": ", 1)[0]


def step_of(request: ModelRequest) -> int:
    """How many turns the model has taken in this conversation so far."""
    return sum(1 for m in request.messages if m["role"] != "user")


def last_results(request: ModelRequest) -> list[dict[str, Any]]:
    """The tool_result blocks of the request's last message."""
    content = request.messages[-1]["content"]
    if isinstance(content, str):
        return []
    return [b for b in content if b.get("type") == "tool_result"]


def usage_for(request: ModelRequest, output: int) -> dict[str, Any]:
    """Usage a provider could report for ``request``: about four bytes per input token; with
    breakpoints, the prefix written before is read and the new tail written."""
    tokens = max(16, estimate_input_tokens(request) // 4)
    if request.cache_ttl == "5m":
        read = tokens * 2 // 3 if step_of(request) else 0
        return usage_dict(input=8, cache_read=read, cache_write_5m=tokens - read - 8, output=output)
    return usage_dict(input=tokens, output=output)


# --------------------------------------------------------------------------- the fake model


class AgentModel(FunctionModel):
    """Answers plan, replan, drift, compact and summarize calls, and plays ``scripts[task]``
    for execute calls (``default`` once a script runs out, or for a task with none)."""

    def __init__(
        self,
        scripts: dict[str, Script] | None = None,
        *,
        plan: dict[str, Any] | None = None,
        default: Step = "Nothing more to do.",
        compact: str = "Compacted progress.",
        output: int = 150,
    ) -> None:
        super().__init__(self.answer)
        self.scripts = scripts or {}
        self.plan = plan
        self.default = default
        self.compact = compact
        self.output = output

    def answer(self, request: ModelRequest) -> dict[str, Any]:
        usage = usage_for(request, self.output)
        purpose = request.purpose
        if purpose == "plan":
            assert self.plan is not None, "this night was not expected to plan"
            return tool_answer("submit_plan", self.plan, usage)
        if purpose == "replan":
            return tool_answer("submit_replan", {"reasoning": "enough queued", "add": []}, usage)
        if purpose == "drift":
            verdict = {"reasoning": "on goal", "off_goal_task_ids": [], "drift_score": 0.0}
            return tool_answer("submit_drift_verdict", verdict, usage)
        if purpose == "compact":
            return text_answer(self.compact, usage)
        if purpose == "summarize":
            return text_answer("closing note", usage)
        step = self.step(request)
        if isinstance(step, str):
            return text_answer(step, usage)
        name, payload = step
        return tool_answer(name, payload, usage)

    def step(self, request: ModelRequest) -> Step:
        script = self.scripts.get(task_of(request))
        n = step_of(request)
        if callable(script):
            return script(request, n)
        if script is None or n >= len(script):
            return self.default
        return script[n]

    def executes(self, task: str | None = None) -> list[ModelRequest]:
        return [
            r for r in self.calls if r.purpose == "execute" and (task is None or task_of(r) == task)
        ]


# --------------------------------------------------------------------------- the run's records


def trace_records(rd: RunDir) -> list[dict[str, Any]]:
    return read_journal(rd.trace)


def executor_outcomes(rd: RunDir) -> list[dict[str, Any]]:
    """What the executor reported for each attempt, as the trace records it."""
    return [
        r for r in trace_records(rd) if r["kind"] == "tool_call" and r.get("tool") == "executor"
    ]


def dumped(request: ModelRequest) -> str:
    return json.dumps(request.model_dump(mode="json"), ensure_ascii=False)
