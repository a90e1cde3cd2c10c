"""The scripted model of the MCP nights run through the CLI (``[model] provider = "python"``,
``target = "tests.tools.mcp_model:model"``).

A task's brief says the one call to make: ``CALL create_ticket {"title": "printer",
"priority": 2}``. The model makes it, then reports what came back and stops; like a careful
model it does not repeat a call it is told was already done.
"""

from __future__ import annotations

import json
import re
from typing import Any

from overnight.messages.types import ModelRequest, ModelResponse, coerce_response
from overnight.testing import text_answer, tool_answer, usage_dict

CALL = re.compile(r"CALL (\S+) (\{.*?\})\s*$", re.MULTILINE)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(
        str(b.get("text", b.get("content", ""))) for b in content if isinstance(b, dict)
    )


class McpNightModel:
    def complete(self, request: ModelRequest) -> ModelResponse:
        usage = usage_dict(input=800, output=60)
        if request.purpose != "execute":
            return coerce_response(text_answer("Scripted summary.", usage))
        first = _text(request.messages[0]["content"])
        step = sum(1 for m in request.messages if m["role"] == "assistant")
        found = CALL.search(first)
        if found is None:
            return coerce_response(text_answer("Nothing to call.", usage))
        tool, args = found.group(1), json.loads(found.group(2))
        if step == 0:
            if "Already done in an earlier attempt" in first and f"{tool}(" in first:
                return coerce_response(text_answer(f"{tool} was already done.", usage))
            return coerce_response(tool_answer(tool, args, usage))
        said = _text(request.messages[-1]["content"])[:300]
        return coerce_response(text_answer(f"{tool} answered: {said}", usage))


model = McpNightModel()
