"""The ``script`` provider: a model that answers from a script file, no key and no network.

Each purpose's turns are given in order (``overnight.config.model_script``). When a purpose's turns
run out: a plan or a drift verdict is the last one again; a replan adds nothing; a drift check
with no turn at all finds every task on goal; every other purpose answers the text ``done``
(an agent task's conversation then ends).

Each answer is billed like a real call: the usage the turn gives, and for the counts it leaves
out, the request's size and the answer's at about four bytes a token, so that the gateway
reserves, books and prices it as it would a provider's.
"""

from __future__ import annotations

import itertools
import json
import threading

from overnight.config.model_script import ANSWER_TOOLS, Script, ToolCall, Turn
from overnight.core.budget import Usage
from overnight.messages.types import (
    ContentBlock,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolUseBlock,
    estimate_input_tokens,
)

BYTES_PER_TOKEN = 4

#: What a purpose answers when its turns ran out and none is repeated.
_DONE = Turn(text="done")
_NOTHING_TO_ADD = Turn(
    calls=[
        ToolCall(
            name=ANSWER_TOOLS["replan"][0],
            input={"reasoning": "The script has no more replans: nothing to add.", "add": []},
        )
    ]
)
_ON_GOAL = Turn(
    calls=[
        ToolCall(
            name=ANSWER_TOOLS["drift"][0],
            input={
                "reasoning": "The script has no drift verdict: every task is taken as on goal.",
                "off_goal_task_ids": [],
                "drift_score": 0.0,
            },
        )
    ]
)

#: Purposes whose last turn is given again when their turns run out.
_REPEATED = ("plan", "drift")


class ScriptModel:
    """Answers each request with its purpose's next scripted turn."""

    def __init__(self, script: Script) -> None:
        self._left = {p: list(script.turns(p)) for p in Script.model_fields}
        self._last: dict[str, Turn] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def complete(self, request: ModelRequest) -> ModelResponse:
        with self._lock:
            turn = self._next(request.purpose)
            n = next(self._ids)
        content: list[ContentBlock] = []
        if turn.text is not None:
            content.append(TextBlock(text=turn.text))
        for i, call in enumerate(turn.tool_calls()):
            content.append(
                ToolUseBlock(id=f"toolu_script_{n}_{i}", name=call.name, input=call.input)
            )
        return ModelResponse(
            content=content,
            stop_reason="tool_use" if turn.tool_calls() else "end_turn",
            usage=_usage(turn, request, content),
            model=request.model,
        )

    def _next(self, purpose: str) -> Turn:
        left = self._left.get(purpose, [])
        if left:
            self._last[purpose] = left.pop(0)
            return self._last[purpose]
        if purpose in _REPEATED and purpose in self._last:
            return self._last[purpose]
        if purpose == "replan":
            return _NOTHING_TO_ADD
        if purpose == "drift":
            return _ON_GOAL
        return _DONE


def _usage(turn: Turn, request: ModelRequest, content: list[ContentBlock]) -> Usage:
    given = turn.usage
    answer = json.dumps([block.model_dump() for block in content], ensure_ascii=False)
    derived_output = max(1, len(answer.encode("utf-8")) // BYTES_PER_TOKEN)
    return Usage(
        input=given.input
        if given.input is not None
        else max(1, estimate_input_tokens(request) // BYTES_PER_TOKEN),
        output=given.output
        if given.output is not None
        else min(request.max_tokens, derived_output),
        cache_read=given.cache_read,
        cache_write_5m=given.cache_write_5m,
        cache_write_1h=given.cache_write_1h,
    )
