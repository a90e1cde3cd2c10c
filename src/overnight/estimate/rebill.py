"""Recorded calls billed again: under other prices, another model's price, or another cache
policy, from their exact recorded usage. Pure; ``overnight reprice`` and the estimate's
levers both use it.

A cache policy the recording answers exactly keeps its token counts: the policy it was made
with, or ``off`` (every input token then bills as uncached input). Any other is derived: each
task's conversation is replayed against a cache keyed by the call times the trace recorded.
A call reads the previous call's whole prompt when it started within the TTL of that call
(a read refreshes the entry) and writes the rest of its own prompt; a prompt shorter than the
model's minimum cacheable length is neither read nor written. Calls outside a conversation
(plan, replan, drift, summary) keep their reads and have their writes moved to the new TTL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from overnight.core.budget import Price, Usage, to_nanos
from overnight.night.workload import CallFacts, WorkloadFacts

CachePolicy = Literal["off", "5m", "1h"]
TTL_SECONDS: dict[str, float] = {"5m": 300.0, "1h": 3600.0}
#: The calls that carry a task's growing conversation.
CONVERSATION = ("execute", "compact")


@dataclass(frozen=True)
class Rebilled:
    """One call billed again."""

    call: CallFacts
    usage: Usage | None
    """The usage it is billed for now; None when it was booked without one (its booked
    dollars stand)."""
    model: str
    nanos: int
    old_nanos: int


def recorded_policy(calls: Sequence[CallFacts]) -> str:
    """The cache policy the calls were made with, as their usage shows it: ``off``, ``5m``,
    ``1h`` or ``mixed``."""
    five = any(c.cache_write_5m for c in calls)
    hour = any(c.cache_write_1h for c in calls)
    if five and hour:
        return "mixed"
    if hour:
        return "1h"
    if five or any(c.cache_read for c in calls):
        return "5m"
    return "off"


def is_exact(calls: Sequence[CallFacts], policy: CachePolicy | None) -> bool:
    """Whether the recording answers ``policy`` exactly (``None``: as recorded)."""
    return policy is None or policy == "off" or recorded_policy(calls) == policy


def _off(c: CallFacts) -> Usage:
    return Usage(input=c.input_tokens, output=c.output)


def _ttl_write(tokens: int, policy: str) -> Usage:
    return Usage(cache_write_1h=tokens) if policy == "1h" else Usage(cache_write_5m=tokens)


def _relabel(c: CallFacts, policy: str) -> Usage:
    writes = _ttl_write(c.cache_write_5m + c.cache_write_1h, policy)
    return Usage(c.input, c.output, c.cache_read, writes.cache_write_5m, writes.cache_write_1h)


def _conversation(calls: Sequence[CallFacts], policy: str, floor: int) -> list[Usage]:
    ttl = TTL_SECONDS[policy]
    out: list[Usage] = []
    cached, cached_at = 0, float("-inf")
    for c in calls:
        total = c.input_tokens
        read = min(cached, total) if c.at - cached_at <= ttl and cached >= floor else 0
        write = total - read if total >= floor else 0
        out.append(
            Usage(
                input=total - read - write,
                output=c.output,
                cache_read=read,
                cache_write_5m=write if policy == "5m" else 0,
                cache_write_1h=write if policy == "1h" else 0,
            )
        )
        if total >= floor:
            cached, cached_at = total, c.at
        elif read:
            cached_at = c.at
    return out


def policy_usages(
    facts: WorkloadFacts, policy: CachePolicy | None, min_cacheable: int = 1024
) -> dict[int, Usage]:
    """Each call's usage under ``policy``, keyed by ``id()`` of its ``CallFacts``."""
    usages: dict[int, Usage] = {}
    exact = is_exact(facts.all_calls, policy)
    for task in facts.tasks:
        talk = [c for c in task.calls if c.purpose in CONVERSATION]
        if policy is not None and not exact and policy != "off":
            for c, u in zip(talk, _conversation(talk, policy, min_cacheable), strict=True):
                usages[id(c)] = u
    for c in facts.all_calls:
        if id(c) in usages:
            continue
        if policy is None or (exact and policy != "off"):
            usages[id(c)] = c.usage
        elif policy == "off":
            usages[id(c)] = _off(c)
        else:
            usages[id(c)] = _relabel(c, policy)
    return usages


def rebill(
    facts: WorkloadFacts,
    price_of: Callable[[str], Price],
    *,
    model: str | None = None,
    replaces: str | None = None,
    policy: CachePolicy | None = None,
    min_cacheable: int = 1024,
) -> list[Rebilled]:
    """Every call of ``facts`` in order (night calls first, then each task's), billed at
    ``price_of`` its model; with ``model``, the calls of ``replaces`` (default: every call)
    are billed at that model's price instead. A call booked without usage keeps its booked
    dollars."""
    usages = policy_usages(facts, policy, min_cacheable)
    out: list[Rebilled] = []
    for c in facts.all_calls:
        old = to_nanos(c.usd)
        billed_as = model if model is not None and replaces in (None, c.model) else c.model
        if not c.usage_known:
            out.append(Rebilled(c, None, billed_as, old, old))
            continue
        usage = usages[id(c)]
        out.append(Rebilled(c, usage, billed_as, usage.cost_nanos(price_of(billed_as)), old))
    return out
