"""Prompt caching that lowers the bill instead of raising it.

A cache write costs 1.25x the input price (2x for the 1-hour TTL) and pays only if a read
follows before the entry expires. Whether one will depends on the gap between calls, which
depends on how slow the task's tools are. So the policy measures those gaps per kind of task
and decides per call:

- gaps comfortably under 5 minutes: 5-minute breakpoints;
- gaps under an hour (and the 1-hour TTL allowed): 1-hour breakpoints, which pay after two
  reads;
- longer gaps, or a kind of task not seen yet (``adaptive`` probes its first call unmarked):
  no breakpoint, so nothing is paid for a write that would expire unread.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from overnight.core.budget import CacheTTL

TTL_SECONDS: dict[CacheTTL, float] = {"5m": 300.0, "1h": 3600.0}
#: A gap this close to the TTL is treated as too long: the entry may expire in flight.
SAFETY_MARGIN_S = 30.0
RECENT_GAPS = 8


@dataclass
class CachePolicy:
    mode: Literal["adaptive", "always", "off"] = "adaptive"
    allow_1h: bool = True
    gaps: dict[str, deque[float]] = field(default_factory=dict)

    def observe(self, kind: str, gap_s: float) -> None:
        self.gaps.setdefault(kind, deque(maxlen=RECENT_GAPS)).append(gap_s)

    def expected_gap(self, kind: str) -> float | None:
        """The longest recent gap: every read must arrive in time for a write to pay."""
        seen = self.gaps.get(kind)
        return max(seen) if seen else None

    def ttl_for(self, gap_s: float) -> CacheTTL | None:
        if gap_s <= TTL_SECONDS["5m"] - SAFETY_MARGIN_S:
            return "5m"
        if self.allow_1h and gap_s <= TTL_SECONDS["1h"] - SAFETY_MARGIN_S:
            return "1h"
        return None

    def decide(self, kind: str) -> CacheTTL | None:
        """The TTL to mark on the next call of a task of this kind, or None for no marking."""
        if self.mode == "off":
            return None
        if self.mode == "always":
            return "5m"
        gap = self.expected_gap(kind)
        return None if gap is None else self.ttl_for(gap)


def marker(ttl: CacheTTL) -> dict[str, str]:
    return {"type": "ephemeral", "ttl": ttl}
