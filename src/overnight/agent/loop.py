"""``AgentExecutor``: one task's ReAct loop.

The loop ends when the model stops calling tools, or at the task's limits (calls, tokens,
seconds), or when the same tool call keeps returning the same result. Each of those is a
normal outcome that the harness then verifies; none is a crash.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from overnight.agent.cache import CachePolicy, marker
from overnight.agent.lessons import extract_lessons, render_lessons
from overnight.agent.prompts import COMPACT_SYSTEM, SYSTEM, first_message
from overnight.config.agent import AgentSpec
from overnight.core.budget import CacheTTL
from overnight.core.tasks import Task
from overnight.messages.types import ModelRequest, ModelResponse, TextBlock, ToolUseBlock
from overnight.seams import ExecContext, ExecResult, ToolContext, ToolSet

BYTES_PER_TOKEN_GUESS = 4


def _size_tokens(payload: object) -> int:
    return len(json.dumps(payload, ensure_ascii=False).encode("utf-8")) // BYTES_PER_TOKEN_GUESS


def assistant_message(response: ModelResponse) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for b in response.content:
        if isinstance(b, TextBlock):
            blocks.append({"type": "text", "text": b.text})
        elif isinstance(b, ToolUseBlock):
            blocks.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
        else:  # thinking goes back exactly as it came (the API checks its signature)
            blocks.append(b.model_dump())
    return {"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]}


@dataclass
class TaskLoop:
    """The state of one task's conversation."""

    task: Task
    model: str
    messages: list[dict[str, Any]]
    calls: int = 0
    tokens: int = 0
    started_at: float = 0.0
    last_answer_at: float | None = None
    repeats: list[str] = field(default_factory=list)
    final_text: str = ""


class AgentExecutor:
    """The built-in executor for agent tasks. One per run: it remembers, across tasks, how
    slow each kind of task's tools are (for caching) and the lessons learned."""

    def __init__(self, spec: AgentSpec, toolbox: ToolSet) -> None:
        self.spec = spec
        self.toolbox = toolbox
        self.cache = CachePolicy(spec.cache, spec.cache_1h)
        self.system = SYSTEM + (f"\n{spec.instructions.strip()}\n" if spec.instructions else "")
        self._warned_small_prefix: set[str] = set()

    def kind_of(self, task: Task, model: str) -> str:
        return f"{model}:{'mechanical' if task.mechanical else 'task'}"

    def execute(self, task: Task, ctx: ExecContext) -> ExecResult:
        model = (
            self.spec.mechanical_model
            if task.mechanical and self.spec.mechanical_model
            else ctx.model
        )
        lessons = render_lessons(
            ctx.lessons[-self.spec.max_lessons :] if self.spec.max_lessons else []
        )
        loop = TaskLoop(
            task=task,
            model=model,
            messages=[{"role": "user", "content": first_message(task, lessons, ctx.earlier)}],
            started_at=ctx.now(),
        )
        kind = self.kind_of(task, model)
        mutations: dict[str, itertools.count[int]] = {}

        def effect_key(tool: str, args: Mapping[str, Any]) -> str:
            # Named by the call itself (tool and arguments), counted from 1 on every execution
            # of the task: a resumed or retried execution that makes the same call reproduces
            # its key and finds its row, whatever other calls it skips or adds.
            digest = hashlib.sha256(
                json.dumps([tool, args], sort_keys=True, default=str).encode()
            ).hexdigest()[:16]
            n = next(mutations.setdefault(digest, itertools.count(1)))
            return f"{ctx.run_id}:{task.id}:{tool}:{digest}:{n}"

        while True:
            limit = self._limit_reached(loop, ctx)
            if limit:
                return self._result("limit_reached", loop, limit)
            if ctx.stop_requested():
                return self._result("gave_up", loop, "stop requested")
            now = ctx.now()
            if loop.last_answer_at is not None:
                self.cache.observe(kind, now - loop.last_answer_at)
            ttl = self.cache.decide(kind)
            response = ctx.call_model(self._request(loop, ttl, ctx))
            loop.calls += 1
            loop.tokens += response.usage.total_tokens
            loop.last_answer_at = ctx.now()
            self._check_first_write(loop, ttl, response, ctx, kind)
            loop.messages.append(assistant_message(response))
            uses = response.tool_uses()
            if not uses:
                loop.final_text = response.text()
                return self._result("finished", loop, "the model stopped calling tools")
            results: list[dict[str, Any]] = []
            for use in uses:
                tool_ctx = ToolContext(
                    root=ctx.workdir,
                    artifacts=ctx.artifacts,
                    call_id=f"{task.id}-{ctx.attempt}-{loop.calls}-{use.id}"[:120],
                    seconds_left=ctx.seconds_left,
                    stop_requested=ctx.stop_requested,
                    run_id=ctx.run_id,
                    task_id=task.id,
                    effects=ctx.effects,
                    effect_key=effect_key,
                    on_refused=ctx.on_refused,
                    protected=ctx.protected,
                    confine=ctx.confine,
                    trace_context=ctx.trace_context,
                )
                started = round(ctx.now(), 3)
                outcome = self.toolbox.dispatch(use.name, use.input, tool_ctx)
                ctx.note(
                    "tool_call",
                    {
                        "task": task.id,
                        "tool": use.name,
                        "error": outcome.is_error,
                        "t_start": started,
                    },
                )
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": use.id,
                        "content": outcome.content,
                        "is_error": outcome.is_error,
                    }
                )
                same = outcome.content if outcome.repeat_key is None else outcome.repeat_key
                loop.repeats.append(
                    json.dumps([use.name, use.input, same], sort_keys=True, default=str)
                )
            loop.messages.append({"role": "user", "content": results})
            if self._looping(loop):
                return self._result("looping", loop, "the same tool call returned the same result")
            if _size_tokens(loop.messages) > self.spec.compact_at_tokens:
                self._compact(loop, ctx)

    # -- pieces ---------------------------------------------------------------------------

    def _limit_reached(self, loop: TaskLoop, ctx: ExecContext) -> str:
        s = self.spec
        if loop.calls >= s.max_calls:
            return f"call limit ({s.max_calls}) reached"
        if s.task_tokens is not None and loop.tokens >= s.task_tokens:
            return f"token limit ({s.task_tokens}) reached"
        if s.task_seconds is not None and ctx.now() - loop.started_at >= s.task_seconds:
            return f"time limit ({s.task_seconds:.0f}s) reached"
        if ctx.seconds_left() <= 0:
            return "the night's clock ran out"
        return ""

    def _looping(self, loop: TaskLoop) -> bool:
        n = self.spec.loop_repeats
        tail = loop.repeats[-n:]
        return len(tail) == n and len(set(tail)) == 1

    def _request(self, loop: TaskLoop, ttl: CacheTTL | None, ctx: ExecContext) -> ModelRequest:
        """Breakpoints, when caching: after the tools, after the system prompt, and on the last
        block of the conversation (the growing prefix). Nothing volatile comes before them."""
        tools = self.toolbox.specs()
        system: str | list[dict[str, Any]] = self.system
        messages = copy.deepcopy(loop.messages)
        if ttl is not None:
            if tools:
                tools = [*tools[:-1], tools[-1].model_copy(update={"cache_control": marker(ttl)})]
            system = [{"type": "text", "text": self.system, "cache_control": marker(ttl)}]
            last = messages[-1]
            if isinstance(last["content"], str):
                last["content"] = [{"type": "text", "text": last["content"]}]
            last["content"][-1]["cache_control"] = marker(ttl)
        budget = ctx.tokens_affordable(loop.model) if self.spec.task_budget else None
        return ModelRequest(
            model=loop.model,
            purpose="execute",
            system=system,
            messages=messages,
            tools=tools,
            max_tokens=self.spec.max_tokens,
            cache_ttl=ttl,
            task_budget_tokens=budget,
            effort=self.spec.effort,
        )

    def _check_first_write(
        self,
        loop: TaskLoop,
        ttl: CacheTTL | None,
        response: ModelResponse,
        ctx: ExecContext,
        kind: str,
    ) -> None:
        """A marked prefix that wrote and read nothing was too short to cache: say so once."""
        u = response.usage
        if ttl is None or kind in self._warned_small_prefix:
            return
        if u.cache_write_5m + u.cache_write_1h + u.cache_read == 0:
            self._warned_small_prefix.add(kind)
            ctx.note(
                "cache_warning",
                {
                    "task": loop.task.id,
                    "model": loop.model,
                    "detail": "a cache breakpoint wrote nothing: the prefix is probably below "
                    f"the model's minimum cacheable length (~{self.spec.min_cacheable_tokens} "
                    "tokens); caching saves nothing here",
                },
            )

    def _compact(self, loop: TaskLoop, ctx: ExecContext) -> None:
        transcript = json.dumps(loop.messages, ensure_ascii=False)
        response = ctx.call_model(
            ModelRequest(
                model=loop.model,
                purpose="compact",
                system=COMPACT_SYSTEM,
                messages=[{"role": "user", "content": transcript}],
                max_tokens=min(self.spec.max_tokens, 4096),
            )
        )
        loop.tokens += response.usage.total_tokens
        summary = response.text().strip() or "(the compaction returned nothing)"
        first = loop.messages[0]
        loop.messages = [
            {
                "role": "user",
                "content": f"{first['content'] if isinstance(first['content'], str) else ''}"
                f"\n\nProgress so far (compacted):\n{summary}",
            }
        ]
        ctx.note("compacted", {"task": loop.task.id, "calls": loop.calls})

    def _result(self, status: str, loop: TaskLoop, why: str) -> ExecResult:
        lessons = extract_lessons(loop.final_text)
        summary = f"{why}; {loop.calls} call(s), {loop.tokens} tokens. {loop.final_text[:400]}"
        return ExecResult(status, summary.strip(), lessons=lessons)  # type: ignore[arg-type]
