"""Every model call goes through ``ModelGateway.call``, and every attempt at it is booked.

Per attempt (a retrying client makes several, each of which a provider may bill): reserve the
worst case, refusing the attempt if it would cross a line; write the reservation to the spend
journal durably; make the attempt; then book it and write what was booked:

- an answer with a readable bill: that bill, every usage field priced at its own rate and at
  the price tier its input falls in, even when it is more than was reserved (it was spent; a
  ``over_reservation`` warning says so, and the next stop check sees the money);
- an answer whose bill is missing or unreadable, or an answer that cannot be read at all: the
  reservation, its worst case, with a warning;
- a failed attempt the provider may have billed (a timeout after the request was sent, a
  stream that broke or carried an error): the bill the provider reported, else the worst case,
  with a warning;
- a failed attempt that cannot have been billed, and a python model that raised: released, at
  $0, the release record saying why: ``not_sent`` (the request never reached the provider: the
  host name did not resolve, the connection was refused or timed out, the TLS handshake
  failed) or ``status`` (an error status answered before any output).

The spend journal is the record of money: on resume the ledger is rebuilt from it, and a
reservation with no recorded answer (the process died mid-call) counts at its worst case.
Warnings travel in the journal's spend records, so that ``result.json`` lists every one of the
run's, across all its processes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Literal, Protocol

from overnight.core.budget import (
    FLEET_MONEY,
    ONE,
    Band,
    Booking,
    BudgetFractions,
    Ledger,
    Reservation,
    Usage,
    money_band,
    to_usd,
)
from overnight.core.errors import (
    BudgetRefused,
    Interrupted,
    ModelCallFailed,
    RunError,
    UnreadableAnswer,
)
from overnight.messages.types import (
    ModelRequest,
    ModelResponse,
    coerce_response,
    estimate_input_tokens,
)
from overnight.models.provider_errors import NotSent, ProviderError
from overnight.models.retry import MeteredClient
from overnight.seams import ModelClient, SharedCap


def budget_notice(spent: float, limit: float, band: Band) -> str:
    share = 100 * spent / limit if limit else 100.0
    if band == "finish":
        return (
            f"[budget] {share:.0f}% of the money for this night is spent (${spent:.2f} of "
            f"${limit:.2f}). Finish the current task with as few calls as possible; no new "
            "task will start after it."
        )
    return (
        f"[budget] {share:.0f}% of the money for this night is spent (${spent:.2f} of "
        f"${limit:.2f}). Do the most valuable part of this task first and skip optional work."
    )


def with_notice_at_end(messages: list[dict[str, Any]], notice: str) -> list[dict[str, Any]]:
    """Append the notice after everything else (after the last cache breakpoint), never in the
    system prompt: it changes on every call and would invalidate a cached prefix there."""
    out = [dict(m) for m in messages]
    block = {"type": "text", "text": notice}
    if out and out[-1].get("role") == "user":
        content = out[-1].get("content")
        if isinstance(content, str):
            out[-1]["content"] = [{"type": "text", "text": content}, block]
        else:
            out[-1]["content"] = [*(content or []), block]
    else:
        out.append({"role": "user", "content": [block]})
    return out


#: The kinds of money warning a run reports (``result.json`` ``warnings``).
WarningKind = Literal[
    "usage_unknown",
    "answer_unreadable",
    "attempt_failed",
    "over_reservation",
    "usage_suspect",
    "unanswered_reservation",
]


class SpendSink(Protocol):
    """Where the gateway writes its reserve and book records: the run's ``spend.jsonl``
    journal, or a list when nothing outlives the process (calibration)."""

    def append(self, record: dict[str, Any]) -> None: ...


class EventSink(Protocol):
    """Where the gateway reports refusals and warnings: the run's trace."""

    def event(self, kind: str, **fields: Any) -> None: ...


class AnswerSink(Protocol):
    """Where the gateway keeps each answered call in full (``overnight replay``)."""

    def record(self, request: ModelRequest, response: ModelResponse) -> None: ...


class KeptRecords(list[dict[str, Any]]):
    """A ``SpendSink`` in memory."""


class NoEvents:
    """An ``EventSink`` that keeps nothing."""

    def event(self, kind: str, **fields: Any) -> None:
        return None


def _warning(kind: WarningKind, message: str) -> dict[str, str]:
    return {"kind": kind, "message": message}


class CallMeter:
    """The attempts at one call: each reserved before it is made, and booked or released
    after it. The retrying client calls ``begin`` and ``failed``; the gateway settles the
    attempt that answered (``answered``, ``unreadable``) or that raised something other than a
    ``ProviderError`` (``abandoned``)."""

    def __init__(
        self, gateway: ModelGateway, request: ModelRequest, line: Literal["work", "reserve"]
    ) -> None:
        self.gateway = gateway
        self.request = request
        self.line = line
        self.estimate = estimate_input_tokens(request)
        self.rate = ONE
        """The multiplier the call's tokens are priced at (a request served a dearer way)."""
        self.fees_nanos = 0
        """Billed by the use beside the tokens (server tools): the most, when reserved; what
        the answer reported, once it answered."""
        self.attempts = 0
        self.started = 0.0
        """The night's seconds when the latest attempt began (``t_start`` of its record)."""
        self._open: tuple[Reservation, str] | None = None

    # -- the attempt-level seam (``overnight.models.retry.AttemptMeter``) --------------------

    def begin(self) -> None:
        if self._open is not None:
            raise RuntimeError("an attempt began before the previous one was settled")
        g, r = self.gateway, self.request
        self.attempts += 1
        self.started = round(g.seconds(), 3)
        try:
            reservation = g.ledger.reserve(
                r.model,
                self.estimate,
                r.max_tokens,
                r.cache_ttl,
                line=self.line,
                rate=self.rate,
                fees_nanos=self.fees_nanos,
            )
        except BudgetRefused as refused:
            g.trace.event(
                "decision",
                decision="call_refused",
                purpose=r.purpose,
                attempt=self.attempts,
                budget=refused.budget,
                detail=refused.detail,
            )
            raise
        call_id = uuid.uuid4().hex[:12]
        if g.cap is not None:
            self._hold_shared(call_id, reservation)
        g.spend.append(
            {
                "kind": "reserve",
                "id": call_id,
                "usd": reservation.worst_usd,
                "tokens": reservation.worst_tokens,
                "purpose": r.purpose,
                "model": r.model,
                "attempt": self.attempts,
                "t": g.seconds(),
            }
        )
        self._open = (reservation, call_id)

    def _hold_shared(self, call_id: str, reservation: Reservation) -> None:
        """Hold the attempt against the cap shared with other nights, or refuse it."""
        g, r = self.gateway, self.request
        assert g.cap is not None
        try:
            would_reach = g.cap.hold(call_id, reservation.worst_nanos)
        except BaseException:
            g.ledger.release(reservation)
            raise
        if would_reach is None:
            return
        g.ledger.release(reservation)
        if self.line == "work":
            g.ledger.blocked = g.ledger.blocked or FLEET_MONEY
            g.ledger.refused_at[FLEET_MONEY] = would_reach
        refused = BudgetRefused(FLEET_MONEY, would_reach, g.cap.limit_usd)
        g.trace.event(
            "decision",
            decision="call_refused",
            purpose=r.purpose,
            attempt=self.attempts,
            budget=refused.budget,
            detail=refused.detail,
        )
        raise refused

    def failed(self, err: ProviderError) -> None:
        reservation, call_id = self._take()
        if err.usage is None and not err.maybe_billed:
            self._release(
                call_id, reservation, error=str(err), not_sent=err.not_sent, status=err.status
            )
            return
        booking = self.gateway.ledger.book(
            self.request.model, err.usage, reservation, rate=self.rate, fees_nanos=self.fees_nanos
        )
        if err.usage is None:
            text = (
                f"attempt {self.attempts} failed after the provider had the request ({err}); "
                "booked at its worst case"
            )
        else:
            text = f"attempt {self.attempts} failed ({err}); booked at the usage it reported"
        warnings = [_warning("attempt_failed", text)]
        if booking.over_reservation:
            warnings.append(_over(booking))
        self._book(call_id, booking, err.usage, warnings, error=str(err))

    # -- the gateway's side ------------------------------------------------------------------

    def answered(self, response: ModelResponse) -> ModelResponse:
        """Book the attempt that answered. An unknown bill books the reservation, and the
        response is handed on carrying that worst case as its usage."""
        reservation, call_id = self._take()
        r = self.request
        usage = response.usage if response.usage_known else None
        booking = self.gateway.ledger.book(
            r.model, usage, reservation, rate=self.rate, fees_nanos=self.fees_nanos
        )
        warnings: list[dict[str, str]] = []
        if usage is None:
            why = response.usage_warning or "the answer carried no usage"
            warnings.append(_warning("usage_unknown", why))
        elif response.usage_warning:
            warnings.append(_warning("usage_suspect", response.usage_warning))
        if booking.over_reservation:
            warnings.append(_over(booking))
        self._book(call_id, booking, usage, warnings, response=response)
        if usage is None:
            worst = self.gateway.ledger.worst_usage(
                r.model, self.estimate, r.max_tokens, r.cache_ttl
            )
            response = response.model_copy(update={"usage": worst})
        return response

    def unreadable(self, detail: str) -> None:
        """The attempt answered with something that cannot be read: paid for, so the
        reservation is booked."""
        if self._open is None:
            return
        reservation, call_id = self._take()
        booking = self.gateway.ledger.book(self.request.model, None, reservation)
        text = f"the answer could not be read ({detail}); booked at its worst case"
        self._book(call_id, booking, None, [_warning("answer_unreadable", text)], error=detail)

    def cut(self, why: str) -> None:
        """A stop cut the attempt short while the provider had the request: it may be billed,
        so its worst case is booked."""
        if self._open is None:
            return
        reservation, call_id = self._take()
        booking = self.gateway.ledger.book(self.request.model, None, reservation)
        text = f"the call was cut short by a stop ({why}); booked at its worst case"
        self._book(call_id, booking, None, [_warning("attempt_failed", text)], error=why)

    def abandoned(self, exc: BaseException) -> None:
        """The attempt raised something that says nothing of a bill (a python model's own
        exception): released."""
        if self._open is None:
            return
        reservation, call_id = self._take()
        self._release(call_id, reservation, error=repr(exc))

    # -- journal and trace -------------------------------------------------------------------

    def _take(self) -> tuple[Reservation, str]:
        if self._open is None:
            raise RuntimeError("no attempt is open")
        opened, self._open = self._open, None
        return opened

    def _release(
        self,
        call_id: str,
        reservation: Reservation,
        *,
        error: str,
        not_sent: NotSent | None = None,
        status: int | None = None,
    ) -> None:
        g, r = self.gateway, self.request
        g.ledger.release(reservation)
        if g.cap is not None:
            g.cap.release(call_id)
        record: dict[str, Any] = {
            "kind": "release",
            "id": call_id,
            "attempt": self.attempts,
            "t": g.seconds(),
        }
        why: dict[str, Any] = {}
        if not_sent is not None:
            why["not_sent"] = not_sent
        elif status is not None:
            why["status"] = status
        g.spend.append({**record, **why})
        g.trace.event(
            "model_call",
            purpose=r.purpose,
            model=r.model,
            attempt=self.attempts,
            reserved_usd=reservation.worst_usd,
            released=True,
            error=error[:500],
            t_start=self.started,
            **why,
        )

    def _book(
        self,
        call_id: str,
        booking: Booking,
        usage: Usage | None,
        warnings: list[dict[str, str]],
        *,
        response: ModelResponse | None = None,
        error: str | None = None,
    ) -> None:
        g, r = self.gateway, self.request
        record: dict[str, Any] = {
            "kind": "spend",
            "id": call_id,
            "usd": booking.usd,
            "tokens": booking.tokens,
            "usage": _usage_dict(usage) if usage is not None else None,
            "purpose": r.purpose,
            "model": r.model,
            "attempt": self.attempts,
            "reserved_usd": to_usd(booking.reserved_nanos or 0),
            "t": g.seconds(),
        }
        if usage is not None and self.rate != ONE:
            record["rate"] = str(self.rate)  # every rate scaled: re-priced the same way
        if usage is not None and self.fees_nanos:
            record["fees_usd"] = to_usd(self.fees_nanos)  # billed by the use, not by the token
        if warnings:
            record["warnings"] = warnings
        g.spend.append(record)
        event: dict[str, Any] = {
            "purpose": r.purpose,
            "model": r.model,
            "attempt": self.attempts,
            "reserved_usd": record["reserved_usd"],
            "cost_usd": booking.usd,
            "usage": record["usage"],
            "booked_at_worst_case": booking.at_reservation,
            "t_start": self.started,
        }
        if response is not None:
            event.update(
                stop_reason=response.stop_reason,
                tool_calls=[u.name for u in response.tool_uses()],
                text=response.text()[:500],
            )
            if response.usage_warning:
                event["usage_warning"] = response.usage_warning
        if error is not None:
            event["error"] = error[:500]
        if warnings:
            event["warnings"] = warnings
        g.trace.event("model_call", **event)
        if g.cap is not None:  # after the night's own records: the spend is kept either way
            g.cap.book(call_id, booking.nanos)


def _over(booking: Booking) -> dict[str, str]:
    return _warning(
        "over_reservation",
        f"billed ${booking.usd} and {booking.tokens:,} tokens against "
        f"${to_usd(booking.reserved_nanos or 0)} and {booking.reserved_tokens or 0:,} "
        "tokens reserved; booked in full",
    )


class ModelGateway:
    def __init__(
        self,
        client: ModelClient,
        ledger: Ledger,
        spend: SpendSink,
        trace: EventSink,
        seconds: Callable[[], float],
        fractions: BudgetFractions,
        cap: SharedCap | None = None,
    ) -> None:
        self.cap = cap
        """A money cap shared with other nights, held against before every attempt."""
        self.client = client
        self.ledger = ledger
        self.spend = spend
        self.trace = trace
        self.seconds = seconds
        self.fractions = fractions
        self.answers: AnswerSink | None = None
        """Where every answered call's request and response are kept (``answers.jsonl``)."""

    def band(self) -> Band:
        return money_band(self.ledger.spent_usd, self.ledger.limit_usd, self.fractions)

    def call(
        self, request: ModelRequest, *, line: Literal["work", "reserve"] = "work"
    ) -> ModelResponse:
        if request.purpose == "execute":
            band = self.band()
            if band != "free":
                notice = budget_notice(self.ledger.spent_usd, self.ledger.limit_usd, band)
                request = request.model_copy(
                    update={"messages": with_notice_at_end(request.messages, notice)}
                )
        meter = CallMeter(self, request, line)
        try:
            response = coerce_response(self._attempts(request, meter))
        except BudgetRefused:
            raise  # traced by the meter; nothing is open
        except Interrupted as stop:
            meter.cut(str(stop))
            raise
        except UnreadableAnswer as exc:
            meter.unreadable(exc.detail)
            raise
        except Exception as exc:
            meter.abandoned(exc)
            if isinstance(exc, RunError):
                raise
            raise ModelCallFailed(f"{request.purpose} call failed: {exc!r}") from exc
        answered = meter.answered(response)
        if self.answers is not None:
            self.answers.record(request, response)
        return answered

    def _attempts(self, request: ModelRequest, meter: CallMeter) -> ModelResponse:
        """The client's answer, every attempt metered: by the client itself when it makes
        several, else as the single attempt it is."""
        if isinstance(self.client, MeteredClient):
            return self.client.complete_metered(request, meter)
        meter.begin()
        try:
            return self.client.complete(request)
        except ProviderError as err:
            meter.failed(err)
            raise


def _usage_dict(usage: Usage) -> dict[str, int]:
    return {
        "input": usage.input,
        "output": usage.output,
        "cache_read": usage.cache_read,
        "cache_write_5m": usage.cache_write_5m,
        "cache_write_1h": usage.cache_write_1h,
    }
