"""Stopping a night from outside: SIGTERM and SIGINT drain it (no new task starts, the task in
flight is cut or finishes, result.json is written) and cut a model call or a retry wait short."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from overnight.core.errors import Interrupted


@dataclass
class Signals:
    """Set by the SIGTERM/SIGINT handlers; read at the top of every lap and while waiting.

    Inside ``interruptible()`` (a provider's HTTP call) a signal also raises ``Interrupted``
    at once, so a drain never waits out a call of many minutes."""

    requested: str | None = None
    _interruptible: int = 0

    def request(self, name: str) -> None:
        if self.requested is None:
            self.requested = name
        if self._interruptible:
            raise Interrupted(name)

    def check(self) -> str | None:
        return self.requested

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        if self.requested is not None:
            raise Interrupted(self.requested)
        self._interruptible += 1
        try:
            yield
        finally:
            self._interruptible -= 1


def sleep_until_stopped(
    sleep: Callable[[float], None], signals: Signals
) -> Callable[[float], None]:
    """``sleep`` in slices of at most a fifth of a second, ending with ``Interrupted`` as soon
    as a stop is requested (a retry wait may be minutes long)."""

    def wait(seconds: float) -> None:
        left = seconds
        while left > 0:
            if signals.requested is not None:
                raise Interrupted(signals.requested)
            step = min(0.2, left)
            sleep(step)
            left -= step
        if signals.requested is not None:
            raise Interrupted(signals.requested)

    return wait


@contextlib.contextmanager
def drained_on_signals(signals: Signals) -> Iterator[None]:
    """SIGTERM and SIGINT set a flag: no new task starts, the run ends TIME_LIMIT:<signal>."""

    def handler(signum: int, _frame: object) -> None:
        signals.request(signal.Signals(signum).name.lower())

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
