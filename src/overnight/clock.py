"""The clocks behind the ``Clock`` seam (``overnight.seams``): the system's, and a fake that
moves only when told to."""

from __future__ import annotations

import time
from datetime import UTC, datetime


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

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

    # Waiting on a fake clock is moving it on.
    sleep = advance

    def monotonic(self) -> float:
        return self._t

    def now_iso(self) -> str:
        return datetime.fromtimestamp(1_800_000_000 + self._t, UTC).isoformat(timespec="seconds")
