"""Structured answers: a plan, a replan, a drift verdict.

A model may answer with a ``tool_use`` block whose ``input`` is the object, or with a text
block holding the JSON object (bare or fenced). Either way the object is validated against
its schema; an invalid answer is an ``InvalidModelOutput`` naming what was wrong.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from overnight.core.errors import InvalidModelOutput
from overnight.models.types import ModelResponse, ToolSpec

M = TypeVar("M", bound=BaseModel)


def answer_tool(name: str, description: str, schema: type[BaseModel]) -> ToolSpec:
    """The tool a model calls to hand in a structured answer."""
    return ToolSpec(name=name, description=description, input_schema=schema.model_json_schema())


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
