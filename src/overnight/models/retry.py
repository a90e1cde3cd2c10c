"""The one retry policy for model calls (the SDKs' own retries are switched off).

``RetryingClient`` retries a ``ProviderError`` that is retryable, waiting an exponential
backoff with jitter, and never less than the provider's ``retry-after``. Waits go through the
``sleep`` it is given: the harness passes one that matches its clock, so the time spent
waiting counts against the night's wall clock (and a ``FakeClock`` simply moves on).

How a call ends when it does not succeed:

- a non-retryable error -> ``ModelCallFailed`` carrying the provider's message;
- a retryable error that outlasts ``outage_limit_s`` (measured from the first failure, and
  checked before each wait: a wait that would end past the limit is not started) or
  ``max_attempts`` -> ``DependencyUnavailable``, which the endings table marks resumable:
  the error was transient in kind, so a later resume may well succeed.

Anything that is not a ``ProviderError`` passes through untouched.

While a call's attempts keep failing, its ``OutageWatch`` is told before each wait (since when,
how many retries, when the call gives up) and told once more when the outage is over for that
call: it answered, or gave up, or was stopped.

Every attempt may be billed, so every attempt is metered: ``complete_metered`` takes an
``AttemptMeter`` (the gateway's) and calls ``begin`` before each attempt (which reserves its
worst case, and refuses it with ``BudgetRefused`` when that would cross a line: the retrying
stops there) and ``failed`` after each attempt that raised a ``ProviderError`` (which books it
or releases it). The attempt that succeeds is left open for its caller to book with the answer.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from overnight.core.errors import DependencyUnavailable, ModelCallFailed
from overnight.messages.types import ModelRequest, ModelResponse
from overnight.models.provider_errors import ProviderError
from overnight.seams import Clock, ModelClient


@dataclass(frozen=True)
class Outage:
    """A provider failing one call's attempts, the call about to be tried again."""

    error: ProviderError
    """The latest failure."""
    retries: int
    """Attempts of the call that failed so far."""
    down_s: float
    """Seconds since the call's first failure."""
    wait_s: float
    """Seconds before the next attempt."""
    limit_s: float
    """``outage_limit_s``: failing for longer than this, the call gives up."""
    attempts_left: int
    """Attempts the call may still make (``max_attempts``)."""

    @property
    def gives_up_in_s(self) -> float:
        return max(0.0, self.limit_s - self.down_s)


class OutageWatch(Protocol):
    """Told of an outage while one call's attempts keep failing."""

    def retrying(self, outage: Outage) -> None:
        """Before each wait for the next attempt."""
        ...

    def over(self) -> None:
        """The call that was failing answered, gave up or was stopped."""
        ...


class AttemptMeter(Protocol):
    """Told of every attempt at one call (see the module's docstring)."""

    def begin(self) -> None:
        """Before an attempt: hold its worst case (raises ``BudgetRefused`` to refuse it)."""
        ...

    def failed(self, err: ProviderError) -> None:
        """After an attempt that failed: book what it may have cost, or release it."""
        ...


@runtime_checkable
class MeteredClient(Protocol):
    """A client that may make several attempts per call, and reports each one."""

    def complete_metered(self, request: ModelRequest, meter: AttemptMeter) -> ModelResponse: ...


class _Unmetered:
    def begin(self) -> None:
        return None

    def failed(self, err: ProviderError) -> None:
        return None


class RetryingClient:
    """Wraps a ``ModelClient`` whose failures are ``ProviderError``s."""

    def __init__(
        self,
        inner: ModelClient,
        *,
        max_attempts: int = 20,
        base_delay_s: float = 1.0,
        max_delay_s: float = 60.0,
        outage_limit_s: float = 900.0,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
        watch: OutageWatch | None = None,
        time_left: Callable[[], float] = lambda: float("inf"),
        call_guard: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.inner = inner
        self.max_attempts = max_attempts
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.outage_limit_s = outage_limit_s
        self._sleep = sleep
        self._monotonic = monotonic
        self._jitter = jitter
        self._watch = watch
        self._time_left = time_left
        self._call_guard = call_guard

    def backoff(self, attempt: int) -> float:
        """The wait after failed attempt ``attempt`` (1-based) before the provider's word:
        ``base * 2**(attempt-1)`` capped at ``max_delay_s``, then jittered down by up to half
        (so parallel callers spread out, and no wait is below half the backoff)."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0 ** min(attempt - 1, 64))
        return ceiling * (0.5 + 0.5 * self._jitter())

    def complete(self, request: ModelRequest) -> ModelResponse:
        return self.complete_metered(request, _Unmetered())

    def complete_metered(self, request: ModelRequest, meter: AttemptMeter) -> ModelResponse:
        outage = _Failing()
        try:
            return self._attempts(request, meter, outage)
        finally:
            if outage.since is not None and self._watch is not None:
                self._watch.over()

    def _attempts(
        self, request: ModelRequest, meter: AttemptMeter, outage: _Failing
    ) -> ModelResponse:
        attempt = 0
        while True:
            attempt += 1
            meter.begin()
            try:
                # Only the provider's own call is guarded: a stop may cut it short (the
                # attempt is then booked like a broken stream), never our bookkeeping.
                with self._call_guard():
                    return self.inner.complete(request)
            except ProviderError as err:
                meter.failed(err)
                if not err.retryable:
                    verb = "failed at" if err.maybe_billed else "refused by"
                    raise ModelCallFailed(
                        f"{request.purpose} call {verb} {err.provider}{_status(err)}: {err.message}"
                    ) from err
                now = self._monotonic()
                if outage.since is None:
                    outage.since = now
                down_for = now - outage.since
                if attempt >= self.max_attempts:
                    raise DependencyUnavailable(
                        f"{err.provider} still failing after {attempt} attempts over "
                        f"{down_for:.0f}s{_status(err)}: {err.message}"
                    ) from err
                wait = self.backoff(attempt)
                if err.retry_after is not None:
                    wait = max(wait, err.retry_after)
                if down_for + wait > self.outage_limit_s:
                    raise DependencyUnavailable(
                        f"{err.provider} unavailable for {down_for:.0f}s; the next try "
                        f"(in {wait:.0f}s) would pass the {self.outage_limit_s:.0f}s outage "
                        f"limit{_status(err)}: {err.message}"
                    ) from err
                if wait > self._time_left():
                    raise DependencyUnavailable(
                        f"{err.provider} unavailable{_status(err)}: {err.message}; the next try "
                        f"(in {wait:.0f}s) would come after the night's clock runs out"
                    ) from err
                if self._watch is not None:
                    self._watch.retrying(
                        Outage(
                            error=err,
                            retries=attempt,
                            down_s=down_for,
                            wait_s=wait,
                            limit_s=self.outage_limit_s,
                            attempts_left=self.max_attempts - attempt,
                        )
                    )
                self._sleep(wait)


@dataclass
class _Failing:
    """When a call's first failure happened (``monotonic``), once it has failed."""

    since: float | None = None


def _status(err: ProviderError) -> str:
    return f" (HTTP {err.status})" if err.status is not None else " (no response)"


def sleep_for_clock(clock: Clock) -> Callable[[float], None]:
    """The sleep of a clock: retry waits count against the clock the night reads."""
    return clock.sleep
