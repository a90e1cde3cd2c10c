"""A delivery's heartbeat, carrying the night's progress, and the watchdog on that progress.

The heartbeat comes from a thread of its own, so that a long model call or tool call never
looks like a dead worker. What it proves is that the worker lives; whether the night moves is
told by its progress: trace events (a lap, a model call, a decision) and the growth of its
command logs. A night whose progress has not moved for ``stall_s`` is drained here (the
command in flight is ended with its process group) and handed back: its heartbeats stop, so
Temporal delivers it again even if the drain itself hangs.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio import activity

from overnight.core.errors import Interrupted
from overnight.fleet.lease import Lease
from overnight.night.signals import Signals

#: The name a stalled night is drained with: it ends ``TIME_LIMIT:stalled`` (resumable).
STALLED = "stalled"

#: The name a night whose lease is gone is drained with (it writes nothing more).
LEASE_LOST = "lease_lost"

#: How often the watchdog looks, whatever the heartbeat's period.
LOOK_S = 0.2


class Heartbeat:
    """Heartbeats every ``every_s`` with the night's progress; drains the night when that
    progress has stood still for ``stall_s``. The activity's context is carried into the
    thread."""

    def __init__(
        self,
        every_s: float,
        signals: Signals,
        *,
        stall_s: float,
        artifacts: Path,
        lease: Lease | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every_s = max(every_s, 0.2)
        self.signals = signals
        self.stall_s = stall_s
        self.artifacts = artifacts
        self.monotonic = monotonic
        self.laps = 0
        self.last_event = ""
        self.last_event_at = ""
        self.lease = lease
        self.stalled = False
        self.fenced = False
        self._moved = monotonic()
        self._output = -1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def moved(self) -> None:
        """Progress (the delivery's lease was taken: the night starts now)."""
        self._moved = self.monotonic()

    def saw(self, event: Any) -> None:
        """An event of the night (``on_event``): progress."""
        self._moved = self.monotonic()
        self.last_event = str(getattr(event, "kind", ""))
        self.last_event_at = str(getattr(event, "at", ""))
        if self.last_event == "task" and getattr(event, "event", None) == "started":
            self.laps += 1

    def details(self) -> dict[str, Any]:
        return {
            "laps": self.laps,
            "last_event": self.last_event,
            "last_event_at": self.last_event_at,
            "quiet_s": round(self.monotonic() - self._moved, 1),
        }

    def __enter__(self) -> Heartbeat:
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._beat,), name="night-heartbeat", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _output_size(self) -> int:
        """The size of the night's command logs: output is progress."""
        total = 0
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.artifacts):
                with contextlib.suppress(OSError):
                    total += entry.stat(follow_symlinks=False).st_size
        return total

    def _request(self, name: str) -> None:
        # Inside a model call ``request`` raises to cut the call short; that is for the
        # night's own thread, not this one.
        with contextlib.suppress(Interrupted):
            self.signals.request(name)

    def _beat(self) -> None:
        beaten = float("-inf")
        while not self._stop.is_set():
            if activity.is_cancelled():
                # Another worker may be resuming this night already; its lock keeps the two
                # apart, and this one stops at its next safe point.
                self._request("sigterm")
            lease = self.lease
            if not self.fenced and lease is not None and lease.token and not lease.valid():
                # Cut off from the fleet's database: the night stops itself (the command in
                # flight ends with its group) before the lease expires and another worker
                # takes it; its fence refuses every later write.
                self.fenced = True
                self._request(LEASE_LOST)
            size = self._output_size()
            if size != self._output:
                self._output = size
                self._moved = self.monotonic()
            if not self.stalled and self.monotonic() - self._moved > self.stall_s:
                self.stalled = True
                self._request(STALLED)
            now = self.monotonic()
            if not (self.stalled or self.fenced) and now - beaten >= self.every_s:
                activity.heartbeat(self.details())
                beaten = now
            self._stop.wait(min(self.every_s, LOOK_S))
