"""Structured answers: a plan, a replan, a drift verdict.

A model may answer with a ``tool_use`` block whose ``input`` is the object, or with a text
block holding the JSON object (bare or fenced). Either way the object is validated against
its schema; an invalid answer is an ``InvalidModelOutput`` naming what was wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from overnight.core.errors import InvalidModelOutput
from overnight.messages.types import ModelRequest, ModelResponse

M = TypeVar("M", bound=BaseModel)


def _json_object_in(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    end = text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def parse_answer(response: ModelResponse, schema: type[M], tool_name: str, purpose: str) -> M:
    candidate: dict[str, Any] | None = None
    uses = response.tool_uses()
    named = [u for u in uses if u.name == tool_name]
    if named:
        candidate = named[0].input
    elif len(uses) == 1:
        candidate = uses[0].input
    else:
        candidate = _json_object_in(response.text())
    if candidate is None:
        raise InvalidModelOutput(
            f"the {purpose} answer holds no JSON object: expected a {tool_name} tool call "
            "or a text block containing the object"
        )
    try:
        return schema.model_validate(candidate)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidModelOutput(f"the {purpose} answer failed its schema: {problems}") from exc


def with_feedback(messages: list[dict[str, Any]], feedback: str) -> list[dict[str, Any]]:
    """The same conversation with ``feedback`` appended to its last (user) message."""
    out = [dict(m) for m in messages]
    last = out[-1]
    content = last.get("content")
    if isinstance(content, str):
        last["content"] = f"{content}\n\n{feedback}"
    else:
        last["content"] = [*(content or []), {"type": "text", "text": feedback}]
    return out


def ask_structured(
    call: Callable[[ModelRequest], ModelResponse],
    request: ModelRequest,
    schema: type[M],
    tool_name: str,
    retries: int = 1,
    check: Callable[[M], None] | None = None,
) -> M:
    """Call, validate; on an invalid answer ask again (``retries`` times) saying what was
    wrong. ``check`` judges what the schema cannot (it raises ``InvalidModelOutput``). The
    last failure is raised as ``InvalidModelOutput``."""
    attempt = request
    while True:
        try:
            answer = parse_answer(call(attempt), schema, tool_name, request.purpose)
            if check is not None:
                check(answer)
            return answer
        except InvalidModelOutput as exc:
            if retries <= 0:
                raise
            retries -= 1
            note = (
                f"Your previous answer was rejected: {exc.detail}. Answer again with the "
                f"{tool_name} tool, following its schema exactly."
            )
            attempt = request.model_copy(update={"messages": with_feedback(request.messages, note)})
