"""Fake models return what a real provider would: content blocks, a stop reason, and usage
with every field a bill is made of. The ledger prices them exactly as it would a real call.

Some return what a careless or hostile provider would: a bill above anything the request could
cost (``over_billed``), no usage (``unbilled_answer``), usage in a foreign shape or with
unreadable counts (``foreign_usage_answer``, ``malformed_usage_answer``), and attempts that fail
the ways a network does (``FlakyModel`` with ``provider_failure``), so that the ledger can be
checked against them."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from overnight.core.budget import Usage
from overnight.core.tasks import Task
from overnight.messages.types import (
    ModelRequest,
    ModelResponse,
    coerce_response,
    estimate_input_tokens,
)
from overnight.models.provider_errors import ProviderError
from overnight.seams import ExecContext, ExecResult

Answer = dict[str, Any] | ModelResponse
Responder = Callable[[ModelRequest], Answer] | Answer | str

_ids = itertools.count(1)


def usage_dict(
    input: int = 0,
    output: int = 0,
    cache_read: int = 0,
    cache_write_5m: int = 0,
    cache_write_1h: int = 0,
) -> dict[str, Any]:
    """An Anthropic-shaped ``usage`` object."""
    return {
        "input_tokens": input,
        "output_tokens": output,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_write_5m + cache_write_1h,
        "cache_creation": {
            "ephemeral_5m_input_tokens": cache_write_5m,
            "ephemeral_1h_input_tokens": cache_write_1h,
        },
    }


def text_answer(text: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": usage or usage_dict(input=400, output=120),
    }


def tool_answer(
    name: str, payload: dict[str, Any], usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": f"toolu_fake_{next(_ids)}", "name": name, "input": payload}
        ],
        "stop_reason": "tool_use",
        "usage": usage or usage_dict(input=900, output=180),
    }


def over_billed(request: ModelRequest, factor: int = 3, text: str = "done") -> dict[str, Any]:
    """A text answer billing ``factor`` times more input and output than the request could
    use: more input tokens than its UTF-8 bytes, more output than its ``max_tokens``."""
    usage = usage_dict(
        input=estimate_input_tokens(request) * factor, output=request.max_tokens * factor
    )
    return text_answer(text, usage)


def unbilled_answer(text: str = "done") -> dict[str, Any]:
    """An Anthropic-shaped text answer with no ``usage`` at all."""
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
    }


def foreign_usage_answer(text: str = "done") -> dict[str, Any]:
    """A text answer whose usage is in another provider's shape (Bedrock's camelCase)."""
    answer = unbilled_answer(text)
    answer["usage"] = {"inputTokens": 1_200, "outputTokens": 300, "totalTokens": 1_500}
    return answer


def malformed_usage_answer(count: object, text: str = "done") -> dict[str, Any]:
    """A text answer whose ``output_tokens`` is ``count`` (a float, a negative number, a
    string: anything but a non-negative integer)."""
    answer = unbilled_answer(text)
    answer["usage"] = {"input_tokens": 100, "output_tokens": count}
    return answer


#: How an attempt can fail (see ``provider_failure``).
FAILURES = ("overloaded", "refused", "dropped", "timeout", "stream_error", "failed_billed")


def provider_failure(kind: str, usage: Usage | None = None) -> ProviderError:
    """The ``ProviderError`` an adapter raises for one way an attempt fails.

    ``overloaded`` (HTTP 529) and ``refused`` (HTTP 400) come before any output and cannot have
    been billed; ``dropped`` (the stream broke), ``timeout`` (no answer after the request was
    sent) and ``stream_error`` (an overload event inside a stream) may have been, and report no
    usage; ``failed_billed`` is a failed answer that reports what it billed (``usage``)."""
    if kind == "overloaded":
        return ProviderError("fake", "overloaded", status=529, retryable=True)
    if kind == "refused":
        return ProviderError("fake", "invalid request", status=400, retryable=False)
    if kind == "dropped":
        return ProviderError(
            "fake", "the connection broke", status=None, retryable=True, maybe_billed=True
        )
    if kind == "timeout":
        return ProviderError(
            "fake", "the request timed out", status=None, retryable=True, maybe_billed=True
        )
    if kind == "stream_error":
        return ProviderError(
            "fake", "overloaded mid-stream", status=529, retryable=True, maybe_billed=True
        )
    if kind == "failed_billed":
        return ProviderError(
            "fake",
            "the response failed",
            status=500,
            retryable=True,
            maybe_billed=True,
            usage=usage or Usage(input=50, output=10),
        )
    raise ValueError(f"unknown failure {kind!r}; one of {', '.join(FAILURES)}")


class FlakyModel:
    """A model whose attempts fail by script before it answers: ``failures(request)`` names
    the failures (see ``provider_failure``) of that call's attempts, in order; once they are
    used up, ``answer`` answers. Put it behind ``RetryingClient`` to have it retried, as an
    SDK-backed provider is. ``attempts`` counts every attempt made."""

    def __init__(
        self,
        answer: Callable[[ModelRequest], Answer],
        failures: Callable[[ModelRequest], list[str]],
    ) -> None:
        self.answer = answer
        self.failures = failures
        self.attempts: list[tuple[ModelRequest, str]] = []
        self._current: ModelRequest | None = None
        self._left: list[str] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        if request is not self._current:  # a retry passes the same request again
            self._current = request
            self._left = list(self.failures(request))
        if self._left:
            kind = self._left.pop(0)
            self.attempts.append((request, kind))
            raise provider_failure(kind)
        self.attempts.append((request, "answered"))
        return coerce_response(self.answer(request))


DEFAULT_TOOL = {
    "plan": "submit_plan",
    "replan": "submit_replan",
    "drift": "submit_drift_verdict",
}


class ScriptedModel:
    """Answers by purpose. Each answer may be a callable of the request, a dict (a structured
    answer, sent as the purpose's tool call, or a full Anthropic-shaped message if it has a
    ``content`` key), or a string (a text answer). Every request is kept in ``calls``."""

    def __init__(
        self,
        *,
        plan: Responder | None = None,
        replan: Responder | None = None,
        drift: Responder | None = None,
        execute: Responder | None = None,
        compact: Responder | None = None,
        summarize: Responder | None = None,
        usage: dict[str, Any] | None = None,
    ) -> None:
        self.answers: dict[str, Responder | None] = {
            "plan": plan,
            "replan": replan if replan is not None else {"reasoning": "nothing to add", "add": []},
            "drift": drift
            if drift is not None
            else {
                "reasoning": "all tasks serve the goal",
                "off_goal_task_ids": [],
                "drift_score": 0.0,
            },
            "execute": execute,
            "compact": compact,
            "summarize": summarize if summarize is not None else "Scripted closing summary.",
        }
        self.usage = usage
        self.calls: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        return coerce_response(self.answer(request))

    def answer(self, request: ModelRequest) -> Answer:
        """The answer as scripted (a dict may be any shape, to test how it is read)."""
        self.calls.append(request)
        answer = self.answers.get(request.purpose)
        if answer is None:
            raise RuntimeError(f"ScriptedModel has no answer for purpose {request.purpose!r}")
        if callable(answer):
            answer = answer(request)
        if isinstance(answer, ModelResponse):
            return answer
        if isinstance(answer, str):
            return text_answer(answer, self.usage)
        if "content" in answer:
            return answer
        tool = DEFAULT_TOOL.get(request.purpose, request.purpose)
        return tool_answer(tool, answer, self.usage)

    def purposes(self) -> list[str]:
        return [c.purpose for c in self.calls]


class FunctionModel:
    """The simplest model: a function of the request."""

    def __init__(self, fn: Callable[[ModelRequest], Answer]) -> None:
        self.fn = fn
        self.calls: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls.append(request)
        return coerce_response(self.fn(request))


Step = Callable[[Task, ExecContext], None]


class ScriptedExecutor:
    """Carries out agent tasks by script: ``steps[task_id]`` is a list of callables run in
    order with the task and the context; ``default`` runs for tasks with no script."""

    def __init__(
        self, steps: dict[str, list[Step]] | None = None, default: list[Step] | None = None
    ):
        self.steps = steps or {}
        self.default = default or []
        self.executed: list[tuple[str, int]] = []

    def execute(self, task: Task, ctx: ExecContext) -> ExecResult:
        self.executed.append((task.id, ctx.attempt))
        for step in self.steps.get(task.id, self.default):
            if ctx.stop_requested():
                return ExecResult("gave_up", "stop requested")
            step(task, ctx)
        return ExecResult("finished", f"ran {len(self.steps.get(task.id, self.default))} step(s)")


# -- steps for ScriptedExecutor ------------------------------------------------------------


def write_file(relpath: str, text: str) -> Step:
    def step(_task: Task, ctx: ExecContext) -> None:
        target = ctx.workdir / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")

    return step


def append_line(path: Path | str, line: str) -> Step:
    def step(_task: Task, ctx: ExecContext) -> None:
        p = Path(path) if Path(path).is_absolute() else ctx.workdir / path
        with open(p, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    return step


def model_call(max_tokens: int = 4000, prompt: str = "work on the task") -> Step:
    """One execute call through the context: reserved, priced, traced like any other."""

    def step(task: Task, ctx: ExecContext) -> None:
        ctx.call_model(
            ModelRequest(
                model=ctx.model,
                purpose="execute",
                system="You carry out one task in a repository.",
                messages=[{"role": "user", "content": f"{task.brief}\n{prompt}"}],
                max_tokens=max_tokens,
            )
        )

    return step


def advance(seconds: float) -> Step:
    def step(_task: Task, ctx: ExecContext) -> None:
        ctx.sleep(seconds)

    return step
