"""User-defined Python tools (``[[tools.external]]``): the agent's only way to touch the world.

A mutating external tool goes through the effects ledger: written down before the call,
keyed by the run-step key (handed to the tool as its idempotency key) and by a task-scoped
key (a unique index: a second delivery of the same task is refused by the database).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, model_validator

from overnight.core.errors import ConfigError
from overnight.effects.ledger import EffectRefused, ToolFailure, dispatch_with_ledger
from overnight.tools.base import ToolContext, ToolError, ToolOutcome

MAX_RESULT_CHARS = 4000


class ExternalToolSpec(BaseModel):
    """One ``[[tools.external]]`` entry."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The tool's name as the model sees it."""
    target: str
    """``module:attr`` of ``fn(args, idempotency_key) -> result`` (JSON-able); it raises
    ``overnight.effects.ToolFailure(message, retryable=...)`` when the call fails."""
    description: str = ""
    """What the tool does, for the model (default: the callable's docstring)."""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    """JSON Schema of the arguments."""
    mutating: bool
    """Changes the world. Mutating calls are written to the effects ledger before they run."""
    task_key: str | None = None
    """For a mutating tool: a template over the arguments naming the effect for the task,
    e.g. ``"{order_id}:refund"``. Two runs can never both perform the same task key."""

    @model_validator(mode="after")
    def _keyed(self) -> ExternalToolSpec:
        if self.mutating and not self.task_key:
            raise ValueError(
                f'the mutating tool {self.name!r} needs a task_key, e.g. "{{order_id}}:refund"'
            )
        try:
            Draft202012Validator.check_schema(self.input_schema)
        except SchemaError as exc:
            raise ValueError(
                f"the input_schema of {self.name!r} is not a valid JSON Schema: {exc.message}"
            ) from None
        return self


ToolFn = Callable[[dict[str, Any], str | None], Any]


def _key_value(value: Any) -> Any:
    """One spelling per value in a task key: JSON Schema's ``integer`` accepts ``4471.0``,
    which must name the same effect as ``4471``."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class ExternalTool:
    def __init__(self, spec: ExternalToolSpec, fn: ToolFn) -> None:
        self.spec = spec
        self.fn = fn
        self.name = spec.name
        self.description = spec.description or inspect.getdoc(fn) or spec.name
        self.input_schema: Mapping[str, Any] = spec.input_schema
        self.mutating = spec.mutating

    def task_key(self, args: Mapping[str, Any]) -> str | None:
        if not self.spec.task_key:
            return None
        try:
            return self.spec.task_key.format(**{k: _key_value(v) for k, v in args.items()})
        except (KeyError, IndexError, ValueError) as exc:
            raise ToolError(
                f"{self.name}: the arguments do not name the effect ({exc!r}); "
                f"pass every field of {self.spec.task_key!r}"
            ) from None

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        plain = dict(args)  # already checked against input_schema by the toolbox
        if not self.mutating:
            return self._outcome(self._call(plain, None), replayed=False)
        if ctx.effects is None:
            raise ToolError(f"{self.name} changes the world and no effects ledger is open")
        try:
            outcome = dispatch_with_ledger(
                ctx.effects,
                run_id=ctx.run_id,
                task_id=ctx.task_id,
                step_key=ctx.effect_key(self.name, plain),
                task_key=self.task_key(plain),
                tool=self.name,
                args=plain,
                call=lambda key: self.fn(plain, key),
            )
        except EffectRefused as refused:
            ctx.on_refused(
                {
                    "tool": self.name,
                    "task": ctx.task_id,
                    "run_id": ctx.run_id,
                    "task_key": self.task_key(plain),
                    "args": plain,
                    "state": "refused",
                    "key": None,
                    "detail": None,
                    "error": str(refused),
                    "earlier": refused.existing.as_dict(),
                }
            )
            raise ToolError(str(refused)) from None
        except ToolFailure as failure:
            state = "may or may not have happened" if failure.retryable else "did not happen"
            raise ToolError(
                f"{self.name} failed: {failure.message}. The effect {state}; it is recorded "
                "for a person to check. Do not call it again."
            ) from None
        return self._outcome(outcome.result, replayed=outcome.replayed)

    def _call(self, args: dict[str, Any], key: str | None) -> Any:
        try:
            return self.fn(args, key)
        except ToolFailure as failure:
            raise ToolError(f"{self.name} failed: {failure.message}") from None

    def _outcome(self, result: Any, *, replayed: bool) -> ToolOutcome:
        text = json.dumps(result, sort_keys=True, default=str)[:MAX_RESULT_CHARS]
        if replayed:
            text += "\n(already done in an earlier attempt: this is the recorded result; the "
            text += "tool was not called again)"
        return ToolOutcome(text)


def load_external(spec: ExternalToolSpec) -> ExternalTool:
    from overnight.models.seam import resolve_target

    fn = resolve_target(spec.target, f"tools.external.{spec.name}.target")
    if not callable(fn):
        raise ConfigError(f"tools.external.{spec.name}.target", f"{spec.target} is not callable")
    return ExternalTool(spec, fn)
