"""A model outage, shown while it lasts.

Before each wait of a call whose provider keeps failing, the trace gets a ``model_retry`` line
and ``RUN_DIR/outage.json`` says since when the model has been unreachable, how many retries
were made, when the next try is and when the call gives up (the outage limit); ``overnight
status`` and the live panel read it. The file is removed when the call gets through, gives up
or is stopped, and when a process of the run starts (a file left by a killed one says nothing
of this one).
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from pathlib import Path

from overnight.core.errors import DiskFull
from overnight.models.retry import Outage
from overnight.seams import Clock
from overnight.secrecy import secret_values
from overnight.store.rundir import write_json_atomic
from overnight.store.trace import Trace, redact


class OutageBoard:
    """The night's ``OutageWatch`` (``overnight.models.retry``)."""

    def __init__(self, path: Path, trace: Trace, clock: Clock) -> None:
        self.path = path
        self.trace = trace
        self.clock = clock
        self._since: datetime | None = None
        """When the outage going on began (wall clock), once there is one."""
        self._clear()

    def retrying(self, outage: Outage) -> None:
        err = outage.error
        self.trace.event(
            "model_retry",
            error=str(err),
            status=err.status,
            wait_s=round(outage.wait_s, 3),
            retries=outage.retries,
            down_s=round(outage.down_s, 3),
        )
        now = datetime.fromisoformat(self.clock.now_iso())
        if self._since is None or outage.retries == 1:
            self._since = now - timedelta(seconds=outage.down_s)
        since = self._since
        record = {
            "since": _iso(since),
            "retries": outage.retries,
            "next_try_at": _iso(now + timedelta(seconds=outage.wait_s)),
            "gives_up_at": _iso(since + timedelta(seconds=outage.limit_s)),
            "outage_limit_s": outage.limit_s,
            "attempts_left": outage.attempts_left,
            "status": err.status,
            "error": str(err)[:300],
            "updated_at": _iso(now),
        }
        # A view of the night, not its state: the retry goes on without it.
        with contextlib.suppress(OSError, DiskFull):
            write_json_atomic(self.path, redact(record, secret_values()))

    def over(self) -> None:
        self._since = None
        self._clear()

    def _clear(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="seconds")
