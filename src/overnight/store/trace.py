"""The run's trace: one JSON line per model call, tool call and decision.

Secrets never reach it: every string is scrubbed of the values of secret-looking environment
variables before it is written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from overnight.core.errors import DiskFull
from overnight.secrecy import secret_values
from overnight.store.journal import Journal

REDACTED = "[redacted]"

__all__ = ["REDACTED", "Trace", "redact"]


def replaced(value: Any, pairs: Sequence[tuple[str, str]]) -> Any:
    """``value`` (JSON-like) with each ``(old, new)`` of ``pairs`` replaced, in order, in
    every string it holds."""
    if isinstance(value, str):
        for old, new in pairs:
            if old in value:
                value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {k: replaced(v, pairs) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [replaced(v, pairs) for v in value]
    return value


def redact(value: Any, secrets: list[str]) -> Any:
    return replaced(value, [(secret, REDACTED) for secret in secrets])


class Trace:
    def __init__(self, path: Path, seconds: Callable[[], float], now_iso: Callable[[], str]):
        self.path = path
        self._journal = Journal(path, durable=False)
        self._seconds = seconds
        self._now = now_iso
        self._secrets = secret_values()
        self.listener: Callable[[dict[str, Any]], None] | None = None
        self.dropped = 0
        # Written from the night's thread and the metering proxy's: one record at a time.
        self._lock = threading.RLock()

    def event(self, kind: str, **fields: Any) -> None:
        with self._lock:
            record = {"kind": kind, "t": round(self._seconds(), 3), "at": self._now(), **fields}
            clean = redact(record, self._secrets)
            try:
                self._journal.append(clean)
            except (OSError, DiskFull):
                # The trace is evidence, not state: losing a line must not end a run that
                # could otherwise finish. The count is reported in the result.
                self.dropped += 1
            if self.listener is not None:
                self.listener(clean)

    def close(self) -> None:
        self._journal.close()
