"""``RecordingMeter``: a ``Meter`` (``overnight.proxy.metering``) for tests and benchmarks.

It holds tokens, not dollars: a request's worst case is its input bound plus its output cap,
held against an optional token ``cap`` until the request is settled, when what the answer
reported (or, unread, the worst case) is booked instead. Every open, answer and failure is
recorded, and an attempt settled twice is an error.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from overnight.core.budget import Usage
from overnight.proxy.metering import Answered, Api, Asked, Refused


@dataclass(frozen=True)
class Failure:
    """One ``Attempt.failed`` as it was called."""

    status: int | None
    sent: bool
    usage: Usage | None
    error: str


@dataclass
class Settled:
    """One request the meter let through, and how it was settled (once)."""

    asked: Asked
    max_tokens: int
    held: int
    answer: Answered | None = None
    failure: Failure | None = None
    booked: int = 0


@dataclass
class RecordingAttempt:
    meter: RecordingMeter
    record: Settled
    max_tokens: int = field(init=False)

    def __post_init__(self) -> None:
        self.max_tokens = self.record.max_tokens

    def answered(self, answer: Answered) -> None:
        booked = self.record.held if answer.usage is None else answer.usage.total_tokens
        self.meter.settle(self.record, booked, answer=answer)

    def failed(self, *, status: int | None, sent: bool, usage: Usage | None, error: str) -> None:
        if usage is not None:
            booked = usage.total_tokens
        elif sent and status is None:
            booked = self.record.held  # it may have been billed, and nobody said what
        else:
            booked = 0
        failure = Failure(status=status, sent=sent, usage=usage, error=error)
        self.meter.settle(self.record, booked, failure=failure)


class RecordingMeter:
    """Grants each request ``min(asked, max_output)`` output tokens (``max_output`` when it
    asked for none), lowered to what the ``cap`` has left after its input bound; refuses when
    fewer than ``least`` would remain, or every request when ``refuse`` is set."""

    def __init__(
        self,
        *,
        cap: int | None = None,
        max_output: int = 4096,
        least: int = 1,
        refuse: str | None = None,
    ) -> None:
        self.cap = cap
        self.max_output = max_output
        self.least = least
        self.refuse = refuse
        self.asked: list[Asked] = []
        """Every request opened, the refused ones too."""
        self.refused: list[Asked] = []
        self.records: list[Settled] = []
        """Every request let through, in order, with its settlement once it has one."""
        self.booked = 0
        self.held = 0
        self.unforwarded: list[str] = []
        """The refusal of every request the allowlist kept back, in order."""
        self._done = threading.Condition()

    def unforwardable(self, api: Api, message: str) -> None:
        with self._done:
            self.unforwarded.append(message)

    def open(self, asked: Asked) -> RecordingAttempt:
        with self._done:
            self.asked.append(asked)
            grant = min(asked.max_tokens or self.max_output, self.max_output)
            if self.cap is not None:
                grant = min(grant, self.cap - self.booked - self.held - asked.input_bound)
            if self.refuse is not None or grant < self.least:
                self.refused.append(asked)
                raise Refused(self.refuse or "the token cap is spent", budget="tokens")
            record = Settled(asked=asked, max_tokens=grant, held=asked.input_bound + grant)
            self.held += record.held
            self.records.append(record)
            return RecordingAttempt(self, record)

    def settle(
        self,
        record: Settled,
        booked: int,
        *,
        answer: Answered | None = None,
        failure: Failure | None = None,
    ) -> None:
        with self._done:
            if record.answer is not None or record.failure is not None:
                raise AssertionError(f"an attempt was settled twice: {record}")
            record.answer, record.failure, record.booked = answer, failure, booked
            self.held -= record.held
            self.booked += booked
            self._done.notify_all()

    @property
    def answers(self) -> list[Answered]:
        return [r.answer for r in self.records if r.answer is not None]

    @property
    def failures(self) -> list[Failure]:
        return [r.failure for r in self.records if r.failure is not None]

    def settled(self, count: int = 1, timeout: float = 10.0) -> list[Settled]:
        """The first ``count`` requests let through, once all of them are settled (a stream
        is settled as it ends, which its client may see a moment before)."""

        def ready() -> bool:
            done = [r for r in self.records if r.answer is not None or r.failure is not None]
            return len(done) >= count

        with self._done:
            if not self._done.wait_for(ready, timeout):
                raise AssertionError(f"{count} settled requests awaited, got {self.records}")
            return [r for r in self.records if r.answer is not None or r.failure is not None][
                :count
            ]
