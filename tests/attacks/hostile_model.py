"""A hostile model for the attack suite, loaded by the CLI as ``[model] target``.

It plays a script from the JSON file named by ``$HOSTILE_SCRIPT`` and appends every request
it is sent to ``$HOSTILE_LOG`` (one JSON line each), so a test can check what reached the
model. Both variables live in the harness's environment only: a sandboxed command never
sees them.

The script: ``{"execute": [[tool, input], ...], "plan": [answer, ...], "replan": [...],
"final": text, "summary": text}``.
``execute`` steps are played in order within one task attempt (step n answers the request
holding n assistant turns); once they run out the model says it is done. ``plan`` and
``replan`` answers are handed out one per request, the last one repeated. ``final`` is the
agent's closing text of each attempt (lessons are lines of it), ``summary`` the closing
summary of the night.
"""

from __future__ import annotations

import json
import os
from typing import Any

from overnight.messages.types import ModelRequest
from overnight.testing import text_answer, tool_answer, usage_dict

_asked: dict[str, int] = {}


def _script() -> dict[str, Any]:
    with open(os.environ["HOSTILE_SCRIPT"], encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def model(request: ModelRequest) -> dict[str, Any]:
    with open(os.environ["HOSTILE_LOG"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps(request.model_dump(mode="json")) + "\n")
    script = _script()
    usage = usage_dict(input=1200, output=150)
    purpose = request.purpose
    if purpose in ("plan", "replan"):
        answers = script.get(purpose) or [{"reasoning": "nothing to add", "add": []}]
        n = _asked.get(purpose, 0)
        _asked[purpose] = n + 1
        tool = "submit_plan" if purpose == "plan" else "submit_replan"
        return tool_answer(tool, answers[min(n, len(answers) - 1)], usage)
    if purpose == "drift":
        verdict = {"reasoning": "on goal", "off_goal_task_ids": [], "drift_score": 0.0}
        return tool_answer("submit_drift_verdict", verdict, usage)
    if purpose == "execute":
        steps = script.get("execute", [])
        step = sum(1 for m in request.messages if m["role"] == "assistant")
        if step < len(steps):
            name, payload = steps[step]
            return tool_answer(name, payload, usage)
        return text_answer(script.get("final", "All done: the tests pass now."), usage)
    return text_answer(script.get("summary", "Closing note: everything went to plan."), usage)
