"""User-defined Python tools (``[[tools.external]]``): the agent's only way to touch the world.

A mutating external tool goes through the effects ledger: written down before the call,
keyed by the run-step key (handed to the tool as its idempotency key) and by a task-scoped
key (a unique index: a second delivery of the same task is refused by the database).

A tool is a Python callable of the user's, run in a worker thread of its own so that the
harness keeps the time: a call is bounded by the tool's ``timeout_s`` and by the night's
clock, and a stop (SIGTERM, SIGINT) stops the waiting at once. A thread cannot be killed, so
a call given up on may still be running: a mutating one is then an effect of unknown outcome
(recorded ``unknown``, never called again, its task parked for a person), and its late answer,
if it ever comes, is not used. Whatever a tool raises, ``SystemExit`` and
``KeyboardInterrupt`` included, is a failure of that call, never the end of the process.
"""

from __future__ import annotations

import inspect
import json
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

from overnight.config.targets import resolve_target
from overnight.config.tools import ExternalToolSpec
from overnight.core.errors import ConfigError
from overnight.effects.ledger import EffectRefused, ToolFailure, dispatch_with_ledger
from overnight.seams import ToolContext, ToolError, ToolOutcome

MAX_RESULT_CHARS = 4000

#: Seconds a call may take when neither the tool nor the toolbox says otherwise.
DEFAULT_TIMEOUT_S = 300.0

#: How often a call's wait looks at the stop flag.
_POLL_S = 0.05


class ExternalFunction(Protocol):
    """What an external tool's ``target`` names. It is called with the call's arguments
    (already checked against ``input_schema``) and an idempotency key (the run-step key of a
    mutating call, None for a read-only one); it returns a JSON-able result, or raises
    ``overnight.effects.ToolFailure`` when the call fails."""

    def __call__(self, args: dict[str, Any], idempotency_key: str | None, /) -> object: ...


def _key_value(value: Any) -> Any:
    """One spelling per value in a task key: JSON Schema's ``integer`` accepts ``4471.0``,
    which must name the same effect as ``4471``."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class ExternalTool:
    def __init__(
        self, spec: ExternalToolSpec, fn: ExternalFunction, default_timeout_s: float | None = None
    ) -> None:
        self.spec = spec
        self.fn = fn
        self.name = spec.name
        self.description = spec.description or inspect.getdoc(fn) or spec.name
        self.input_schema: Mapping[str, Any] = spec.input_schema
        self.mutating = spec.mutating
        self.timeout_s = spec.timeout_s or default_timeout_s or DEFAULT_TIMEOUT_S

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
        stopping = ctx.stop_requested()
        if stopping is not None:
            raise ToolError(f"the run is stopping ({stopping}): {self.name} was not called")
        limit = min(self.timeout_s, ctx.seconds_left())
        if limit <= 0:
            raise ToolError(f"no time is left in the night: {self.name} was not called")
        if not self.mutating:
            return self._outcome(self._call(plain, None, limit, ctx), replayed=False)
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
                call=lambda key: self._bounded(plain, key, limit, ctx),
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

    def _call(self, args: dict[str, Any], key: str | None, limit: float, ctx: ToolContext) -> Any:
        try:
            return self._bounded(args, key, limit, ctx)
        except ToolFailure as failure:
            raise ToolError(f"{self.name} failed: {failure.message}") from None

    def _bounded(
        self, args: dict[str, Any], key: str | None, limit: float, ctx: ToolContext
    ) -> Any:
        """Call the tool in a worker thread and wait at most ``limit`` seconds, or until a
        stop is requested. What the tool returns is returned; a ``ToolFailure`` or another
        ``Exception`` it raises is raised again here; anything else it raises (``SystemExit``,
        ``KeyboardInterrupt``), no answer in time, and a stop all raise a retryable
        ``ToolFailure``: the call may have done something."""
        done = threading.Event()
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["result"] = self.fn(args, key)
            except BaseException as exc:  # everything a tool raises is that call's failure
                box["error"] = exc
            finally:
                done.set()

        deadline = time.monotonic() + limit
        worker = threading.Thread(target=work, name=f"overnight-tool-{self.name}", daemon=True)
        worker.start()
        while not done.wait(max(0.0, min(_POLL_S, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                raise ToolFailure(
                    f"no answer within {limit:g} s (the call was given up on; it may still be "
                    "running)",
                    retryable=True,
                )
            stopping = ctx.stop_requested()
            if stopping is not None:
                raise ToolFailure(
                    f"the run is stopping ({stopping}); the call was given up on while it ran",
                    retryable=True,
                )
        error = box.get("error")
        if error is None:
            return box.get("result")
        if isinstance(error, Exception):
            raise error
        raise ToolFailure(f"the tool raised {error!r}", retryable=True) from error

    def _outcome(self, result: Any, *, replayed: bool) -> ToolOutcome:
        text = json.dumps(result, sort_keys=True, default=str)[:MAX_RESULT_CHARS]
        if replayed:
            text += "\n(already done in an earlier attempt: this is the recorded result; the "
            text += "tool was not called again)"
        return ToolOutcome(text)


def load_external(spec: ExternalToolSpec, default_timeout_s: float | None = None) -> ExternalTool:
    """The tool ``spec`` names; ``default_timeout_s`` bounds its calls unless it sets its own
    ``timeout_s`` (``DEFAULT_TIMEOUT_S`` when neither does)."""
    fn = resolve_target(spec.target, f"tools.external.{spec.name}.target")
    if not callable(fn):
        raise ConfigError(f"tools.external.{spec.name}.target", f"{spec.target} is not callable")
    return ExternalTool(spec, fn, default_timeout_s)
