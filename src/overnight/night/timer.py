"""The night's own clock: seconds used across all of the run's processes, and seconds left
before the wall-clock enforcement line."""

from __future__ import annotations

from overnight.core.budget import SECONDS, BudgetFractions, reading
from overnight.seams import Clock


class RunTimer:
    def __init__(
        self, clock: Clock, seconds_before: float, hours: float, fractions: BudgetFractions
    ) -> None:
        self.clock = clock
        self._base = seconds_before
        self._t0 = clock.monotonic()
        self.limit_s = hours * 3600.0
        self.fractions = fractions

    def seconds_used(self) -> float:
        """Seconds of this run, the earlier processes' included."""
        return self._base + (self.clock.monotonic() - self._t0)

    def seconds_left(self) -> float:
        """Seconds until the wall-clock enforcement line."""
        line = reading(SECONDS, self.seconds_used(), self.limit_s, self.fractions).enforced_at
        return float("inf") if line is None else line - self.seconds_used()
