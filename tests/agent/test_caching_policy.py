"""Prompt caching must lower the bill, never raise it.

The seed's six-call task: a 3.0k stable prefix (tools + system), a 0.5k brief, and each later
call adds a 3.0k tool result and the 0.3k reply before it: 70.5k input tokens uncached. With
5-minute breakpoints on fast tools it bills 30.05k effective tokens. On tools slower than the
TTL every write expires unread, and a policy that kept writing would pay 1.25x for nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from overnight.agent.loop import AgentExecutor
from overnight.agent.prompts import first_message
from overnight.clock import FakeClock
from overnight.config.agent import AgentSpec
from overnight.core.budget import Price, Usage
from overnight.core.tasks import Task
from overnight.messages.types import ModelRequest, TextBlock, ToolSpec, ToolUseBlock
from overnight.seams import ExecContext, ToolContext, ToolOutcome
from overnight.testing.cache_sim import CachingProvider, effective_input_tokens, words

OPUS = Price(5.0, 25.0, 0.5, 6.25, 10.0)
PREFIX, BRIEF, RESULT, REPLY, CALLS = 3000, 500, 3000, 300, 6


class SlowishTool:
    """A tool whose result is exactly 3,000 tokens and which takes ``gap_s`` of wall clock."""

    def __init__(self, clock: FakeClock, gap_s: float) -> None:
        self.clock, self.gap_s = clock, gap_s

    def specs(self) -> list[ToolSpec]:
        return [ToolSpec(name="probe", description="probe", input_schema={"type": "object"})]

    def dispatch(self, name: str, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        self.clock.advance(self.gap_s)
        return ToolOutcome(" ".join(["tok"] * RESULT))


def padded_spec(mode: str, allow_1h: bool = True) -> AgentSpec:
    base = AgentExecutor(AgentSpec(), SlowishTool(FakeClock(), 0)).system  # type: ignore[arg-type]
    pad = PREFIX - words(base) - words("probe")
    return AgentSpec(
        max_calls=CALLS,
        cache=mode,
        cache_1h=allow_1h,  # type: ignore[arg-type]
        instructions=" ".join(["note"] * pad),
    )


def padded_task(tid: str = "t_1") -> Task:
    skeleton = first_message(Task(id=tid, brief="x", verify="true"), "")
    brief = " ".join(["do"] * (BRIEF - words(skeleton) + 1))
    return Task(id=tid, brief=brief, verify="true")


def run_task(
    mode: str,
    gap_s: float,
    *,
    allow_1h: bool = True,
    learned_gap: float | None = None,
    tasks: int = 1,
) -> list[list[Usage]]:
    clock = FakeClock()

    def answer(_request: ModelRequest, n: int) -> list[TextBlock | ToolUseBlock]:
        return [ToolUseBlock(id=f"toolu_{n}", name="probe", input={"n": n})]

    provider = CachingProvider(clock=clock.monotonic, answer=answer, output_tokens=REPLY)
    tool = SlowishTool(clock, gap_s)
    executor = AgentExecutor(padded_spec(mode, allow_1h), tool)  # type: ignore[arg-type]
    if learned_gap is not None:
        executor.cache.observe(executor.kind_of(padded_task(), "fake-opus"), learned_gap)
    per_task: list[list[Usage]] = []
    for i in range(tasks):
        before = len(provider.calls)
        ctx = ExecContext(
            workdir=Path("."),
            artifacts=Path("."),
            model="fake-opus",
            attempt=1,
            call_model=provider.complete,
            stop_requested=lambda: None,
            budget_band=lambda: "free",
            now=clock.monotonic,
        )
        result = executor.execute(padded_task(f"t_{i}"), ctx)
        assert result.status == "limit_reached"
        per_task.append(provider.calls[before:])
        clock.advance(gap_s)
    return per_task


def effective_k(calls: list[Usage]) -> float:
    return round(sum(effective_input_tokens(u) for u in calls) / 1000, 3)


def test_the_uncached_task_is_70_5k_input() -> None:
    [calls] = run_task("off", gap_s=5)
    assert [round((u.input + u.cache_read) / 1000, 1) for u in calls] == [
        3.5,
        6.8,
        10.1,
        13.4,
        16.7,
        20.0,
    ]
    assert effective_k(calls) == 70.5


def test_fast_tools_give_the_seed_schedule_30_05k() -> None:
    [calls] = run_task("always", gap_s=5)
    assert [round(effective_input_tokens(u) / 1000, 3) for u in calls] == [
        4.375,
        4.475,
        4.805,
        5.135,
        5.465,
        5.795,
    ]
    assert effective_k(calls) == 30.05


def test_adaptive_once_it_knows_the_tools_are_fast_gives_the_same_schedule() -> None:
    [calls] = run_task("adaptive", gap_s=5, learned_gap=5)
    assert effective_k(calls) == 30.05


def test_adaptive_first_task_probes_then_caches_and_later_tasks_reuse_the_prefix() -> None:
    first, second = run_task("adaptive", gap_s=5, tasks=2)
    assert first[0].cache_write_5m == 0 and first[0].cache_read == 0  # the probe
    assert effective_k(first) < 70.5
    # the stable prefix written by the first task is read by the second one
    assert second[0].cache_read >= PREFIX
    assert effective_k(second) < 30.05


@pytest.mark.parametrize("gap_s", [400, 4000])
@pytest.mark.parametrize("allow_1h", [True, False])
def test_slow_tools_never_cost_more_than_caching_off(gap_s: float, allow_1h: bool) -> None:
    off = run_task("off", gap_s=gap_s, tasks=3)
    adaptive = run_task("adaptive", gap_s=gap_s, allow_1h=allow_1h, tasks=3)
    for task_off, task_on in zip(off, adaptive, strict=True):
        cost_off = sum(u.cost(OPUS) for u in task_off)
        cost_on = sum(u.cost(OPUS) for u in task_on)
        assert cost_on <= cost_off + 1e-12
    if gap_s < 3600 and allow_1h:  # the 1-hour TTL pays where 5 minutes is too short
        assert sum(u.cost(OPUS) for t in adaptive for u in t) < sum(
            u.cost(OPUS) for t in off for u in t
        )


def test_the_trap_writing_on_slow_tools_raises_the_bill() -> None:
    # What the adaptive policy exists to avoid: 5-minute writes that always expire unread.
    [off] = run_task("off", gap_s=400)
    [always] = run_task("always", gap_s=400)
    assert sum(u.cache_read for u in always) == 0
    assert effective_k(always) == round(70.5 * 1.25, 3)
    assert sum(u.cost(OPUS) for u in always) > sum(u.cost(OPUS) for u in off)


def test_a_prefix_below_the_minimum_is_never_cached() -> None:
    clock = FakeClock()
    provider = CachingProvider(
        clock=clock.monotonic, answer=lambda _r, n: [TextBlock(text="done")], min_cacheable=100_000
    )
    executor = AgentExecutor(padded_spec("always"), SlowishTool(clock, 5))  # type: ignore[arg-type]
    notes: list[tuple[str, dict[str, Any]]] = []
    ctx = ExecContext(
        workdir=Path("."),
        artifacts=Path("."),
        model="fake-opus",
        attempt=1,
        call_model=provider.complete,
        stop_requested=lambda: None,
        budget_band=lambda: "free",
        now=clock.monotonic,
        note=lambda kind, fields: notes.append((kind, fields)),
    )
    executor.execute(padded_task(), ctx)
    [usage] = provider.calls
    assert usage.cache_write_5m == 0 and usage.input == PREFIX + BRIEF
    assert [k for k, _ in notes] == ["cache_warning"]
    assert "minimum cacheable" in notes[0][1]["detail"]
