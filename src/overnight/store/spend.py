"""The spend journal folded: what a run has booked, and what its unanswered reservations count
at their worst case. Kept apart from the gateway that writes the journal (which re-exports
it), so that a reader of a run's money (``overnight status``) imports no model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from overnight.core.budget import to_nanos, to_usd


@dataclass
class SpendTotals:
    """The spend journal folded: money in whole nano-dollars, dollars as properties."""

    nanos: int = 0
    tokens: int = 0
    dangling_nanos: int = 0
    dangling_tokens: int = 0
    curve: list[tuple[float, float]] = field(default_factory=list)
    by_purpose_nanos: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    warnings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def usd(self) -> float:
        return to_usd(self.nanos)

    @property
    def dangling_usd(self) -> float:
        return to_usd(self.dangling_nanos)

    @property
    def total_nanos(self) -> int:
        """Booked, plus reservations that never had an answer at their worst case."""
        return self.nanos + self.dangling_nanos

    @property
    def by_purpose(self) -> dict[str, float]:
        return {k: to_usd(v) for k, v in self.by_purpose_nanos.items()}


UNANSWERED = (
    "a reservation has no answer in the spend journal (the process ended during the call); "
    "it counts at its worst case"
)


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
            nanos = to_nanos(float(rec["usd"]))
            totals.nanos += nanos
            totals.tokens += int(rec["tokens"])
            totals.calls += 1
            purpose = str(rec.get("purpose", "?"))
            totals.by_purpose_nanos[purpose] = totals.by_purpose_nanos.get(purpose, 0) + nanos
            totals.curve.append((float(rec.get("t", 0.0)), totals.usd))
            for warning in rec.get("warnings") or []:
                totals.warnings.append(
                    {
                        **warning,
                        "purpose": purpose,
                        "attempt": rec.get("attempt"),
                        "reserved_usd": rec.get("reserved_usd"),
                        "booked_usd": to_usd(nanos),
                        "seconds": rec.get("t"),
                    }
                )
    for rec in open_.values():
        nanos = to_nanos(float(rec["usd"]))
        totals.dangling_nanos += nanos
        totals.dangling_tokens += int(rec["tokens"])
        totals.warnings.append(
            {
                "kind": "unanswered_reservation",
                "message": UNANSWERED,
                "purpose": rec.get("purpose"),
                "attempt": rec.get("attempt"),
                "reserved_usd": to_usd(nanos),
                "booked_usd": to_usd(nanos),
                "seconds": rec.get("t"),
            }
        )
    return totals
