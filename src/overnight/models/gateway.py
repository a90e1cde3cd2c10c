"""Every model call goes through ``ModelGateway.call``: reserve the worst case (refusing the
call if it would cross a line), write the reservation to the spend journal durably, call,
price every usage field, record, trace.

The spend journal is the record of money: on resume the ledger is rebuilt from it, and a
reservation with no recorded answer (the process died mid-call) counts at its worst case.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from overnight.core.budget import (
    Band,
    BudgetFractions,
    Ledger,
    Usage,
    money_band,
)
from overnight.core.errors import BudgetRefused, ModelCallFailed, RunError
from overnight.models.seam import ModelClient
from overnight.models.types import (
    ModelRequest,
    ModelResponse,
    coerce_response,
    estimate_input_tokens,
)
from overnight.store.journal import Journal
from overnight.trace import Trace


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


@dataclass
class SpendTotals:
    usd: float = 0.0
    tokens: int = 0
    dangling_usd: float = 0.0
    dangling_tokens: int = 0
    curve: list[tuple[float, float]] = field(default_factory=list)
    by_purpose: dict[str, float] = field(default_factory=dict)
    calls: int = 0


def spend_totals(records: list[dict[str, Any]]) -> SpendTotals:
    """Fold the spend journal. Open reservations (no spend, no release) count at worst case."""
    totals = SpendTotals()
    open_: dict[str, dict[str, Any]] = {}
    for rec in records:
        kind = rec.get("kind")
        if kind == "reserve":
            open_[str(rec["id"])] = rec
        elif kind == "release":
            open_.pop(str(rec["id"]), None)
        elif kind == "spend":
            open_.pop(str(rec["id"]), None)
            totals.usd += float(rec["usd"])
            totals.tokens += int(rec["tokens"])
            totals.calls += 1
            purpose = str(rec.get("purpose", "?"))
            totals.by_purpose[purpose] = totals.by_purpose.get(purpose, 0.0) + float(rec["usd"])
            totals.curve.append((float(rec.get("t", 0.0)), totals.usd))
    for rec in open_.values():
        totals.dangling_usd += float(rec["usd"])
        totals.dangling_tokens += int(rec["tokens"])
    return totals


class ModelGateway:
    def __init__(
        self,
        client: ModelClient,
        ledger: Ledger,
        spend: Journal,
        trace: Trace,
        seconds: Callable[[], float],
        fractions: BudgetFractions,
    ) -> None:
        self.client = client
        self.ledger = ledger
        self.spend = spend
        self.trace = trace
        self.seconds = seconds
        self.fractions = fractions

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
        estimate = estimate_input_tokens(request)
        try:
            reservation = self.ledger.reserve(
                request.model, estimate, request.max_tokens, request.cache_ttl, line=line
            )
        except BudgetRefused as refused:
            self.trace.event(
                "decision",
                decision="call_refused",
                purpose=request.purpose,
                budget=refused.budget,
                detail=refused.detail,
            )
            raise
        call_id = uuid.uuid4().hex[:12]
        self.spend.append(
            {
                "kind": "reserve",
                "id": call_id,
                "usd": reservation.worst_usd,
                "tokens": reservation.worst_tokens,
                "purpose": request.purpose,
                "model": request.model,
                "t": self.seconds(),
            }
        )
        try:
            raw = self.client.complete(request)
            response = coerce_response(raw)
        except Exception as exc:
            self.ledger.release(reservation)
            self.spend.append({"kind": "release", "id": call_id, "t": self.seconds()})
            self.trace.event(
                "model_call", purpose=request.purpose, model=request.model, error=repr(exc)
            )
            if isinstance(exc, RunError):
                raise
            raise ModelCallFailed(f"{request.purpose} call failed: {exc!r}") from exc
        cost = self.ledger.record(request.model, response.usage, reservation)
        self.spend.append(
            {
                "kind": "spend",
                "id": call_id,
                "usd": cost,
                "tokens": response.usage.total_tokens,
                "usage": _usage_dict(response.usage),
                "purpose": request.purpose,
                "model": request.model,
                "t": self.seconds(),
            }
        )
        warning = {"usage_warning": response.usage_warning} if response.usage_warning else {}
        self.trace.event(
            "model_call",
            purpose=request.purpose,
            model=request.model,
            reserved_usd=round(reservation.worst_usd, 6),
            cost_usd=round(cost, 6),
            usage=_usage_dict(response.usage),
            stop_reason=response.stop_reason,
            tool_calls=[u.name for u in response.tool_uses()],
            text=response.text()[:500],
            **warning,
        )
        return response


def _usage_dict(usage: Usage) -> dict[str, int]:
    return {
        "input": usage.input,
        "output": usage.output,
        "cache_read": usage.cache_read,
        "cache_write_5m": usage.cache_write_5m,
        "cache_write_1h": usage.cache_write_1h,
    }
