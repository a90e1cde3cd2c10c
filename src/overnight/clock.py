"""The clock seam. The harness reads time only through a ``Clock``."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; never goes backwards."""
        ...

    def now_iso(self) -> str:
        """The wall-clock time, ISO 8601 in UTC, for reports."""
        ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def now_iso(self) -> str:
        return datetime.now(UTC).isoformat(timespec="seconds")


class FakeClock:
    """A clock that moves only when told to: for tests and scripted nights."""

    def __init__(self, start: float = 0.0) -> None:
        self._t = start

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._t += seconds

    def monotonic(self) -> float:
        return self._t

    def now_iso(self) -> str:
        return datetime.fromtimestamp(1_800_000_000 + self._t, UTC).isoformat(timespec="seconds")
