"""The money, recomputed: every booked call of the spend journal re-priced from the usage it
recorded, with the price table the run recorded in its manifest, and summed.

A call booked without a readable usage was booked at its reservation (the worst case the
gateway held for it), so that is its price here too; a reservation that never had an answer
counts at its worst case, as the ledger counts it. A released reservation costs nothing: its
attempt never reached the provider (the release says ``not_sent`` and why) or was answered
with an error status before any output (``status``), and the figures name how many were.
What was spent when the stop was decided is the same sum without the closing summary, the
trailing calls of purpose ``summarize``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from overnight.audit.findings import AuditCheck, check
from overnight.audit.inputs import RunFiles
from overnight.config.price_record import table_from_record
from overnight.core.budget import PriceTable, Usage, to_nanos, to_usd
from overnight.core.errors import ConfigError

SUMMARY = "summarize"


def micro(nanos: int) -> int:
    """Nano-dollars to whole micro-dollars, the precision the audit compares at."""
    return int((Decimal(nanos) / 1000).to_integral_value(ROUND_HALF_EVEN))


def usd(nanos: int) -> str:
    return f"${to_usd(nanos):.6f}"


@dataclass
class Repriced:
    total_nanos: int = 0
    tokens: int = 0
    at_stop_nanos: int = 0
    at_stop_tokens: int = 0
    by_purpose_nanos: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    """Spend records (booked attempts)."""
    released: int = 0
    """Released reservations (attempts that cost nothing)."""
    not_sent: int = 0
    """Of those, attempts whose request never reached the provider."""
    problems: list[str] = field(default_factory=list)
    """Booked rows whose recorded bill is not what their usage costs."""
    prices_from: str = ""


def price_table(files: RunFiles) -> tuple[PriceTable | None, str]:
    """The table the run recorded; for a run made before runs recorded it, the spec's own
    tables and genai-prices today (which may have moved since)."""
    record = files.manifest.get("prices")
    if isinstance(record, dict):
        try:
            return table_from_record(record), "run.json (the prices the run used)"
        except (KeyError, TypeError, ValueError) as exc:
            return None, f"run.json's price table cannot be read: {exc!r}"
    try:
        return files.spec.price_table(), "spec.json and genai-prices today (run.json has none)"
    except ConfigError as exc:
        return None, f"no price table: {exc}"


def _purpose(rec: dict[str, Any], reserves: dict[str, dict[str, Any]]) -> str:
    if "purpose" in rec:
        return str(rec["purpose"])
    return str(reserves.get(str(rec.get("id")), {}).get("purpose", "?"))


def _booked_cost(
    rec: dict[str, Any], reservation: dict[str, Any] | None, table: PriceTable | None
) -> tuple[int, int, str | None]:
    """What one spend record should have booked (nano-dollars, tokens), and why it cannot be
    re-priced, if so."""
    usage = rec.get("usage")
    if usage is None:
        if reservation is None:
            booked = to_nanos(float(rec["usd"]))
            return booked, int(rec["tokens"]), "booked with no usage and no reservation"
        return to_nanos(float(reservation["usd"])), int(reservation["tokens"]), None
    if table is None:
        return to_nanos(float(rec["usd"])), int(rec["tokens"]), "no price table to re-price it"
    try:
        bill = Usage(**dict(usage))
        price = table.price(str(rec.get("model")))
    except ConfigError as exc:
        return to_nanos(float(rec["usd"])), int(rec["tokens"]), exc.problem
    except (TypeError, ValueError) as exc:
        return to_nanos(float(rec["usd"])), int(rec["tokens"]), f"unreadable usage: {exc}"
    rate = Decimal(str(rec["rate"])) if "rate" in rec else None
    fees = to_nanos(float(rec.get("fees_usd") or 0))
    return bill.cost_nanos(price, rate) + fees, bill.total_tokens, None


def reprice(files: RunFiles) -> Repriced:
    table, source = price_table(files)
    out = Repriced(prices_from=source)
    if table is None:
        out.problems.append(source)
    records = files.spend
    reserves: dict[str, dict[str, Any]] = {}
    open_: dict[str, int] = {}
    # (position in the journal, nano-dollars, tokens) of everything counted
    counted: list[tuple[int, int, int]] = []
    for at, rec in enumerate(records):
        kind, rid = rec.get("kind"), str(rec.get("id"))
        if kind == "reserve":
            reserves[rid] = rec
            open_[rid] = at
        elif kind == "release":
            if open_.pop(rid, None) is not None:
                out.released += 1
                out.not_sent += bool(rec.get("not_sent"))
        elif kind == "spend":
            open_.pop(rid, None)
            try:
                nanos, tokens, why = _booked_cost(rec, reserves.get(rid), table)
                booked, booked_tokens = to_nanos(float(rec["usd"])), int(rec["tokens"])
            except (KeyError, TypeError, ValueError) as exc:
                out.problems.append(f"spend record {at + 1} cannot be read: {exc!r}")
                continue
            purpose = _purpose(rec, reserves)
            label = f"call {rid} ({purpose}, {rec.get('model')}, attempt {rec.get('attempt')})"
            if why is not None:
                out.problems.append(f"{label}: {why}")
            elif (booked, booked_tokens) != (nanos, tokens):
                out.problems.append(
                    f"{label}: booked {usd(booked)} and {booked_tokens:,} tokens, its recorded "
                    f"usage costs {usd(nanos)} and {tokens:,} tokens"
                )
            out.calls += 1
            out.by_purpose_nanos[purpose] = out.by_purpose_nanos.get(purpose, 0) + nanos
            counted.append((at, nanos, tokens))
    for rid, at in open_.items():
        rec = reserves[rid]
        try:
            counted.append((at, to_nanos(float(rec["usd"])), int(rec["tokens"])))
        except (KeyError, TypeError, ValueError) as exc:
            out.problems.append(f"reservation {rid} cannot be read: {exc!r}")
    tail = len(records)
    while tail > 0 and _purpose(records[tail - 1], reserves) == SUMMARY:
        tail -= 1
    for at, nanos, tokens in counted:
        out.total_nanos += nanos
        out.tokens += tokens
        if at < tail:
            out.at_stop_nanos += nanos
            out.at_stop_tokens += tokens
    return out


def released_text(money: Repriced) -> str:
    if not money.released:
        return ""
    sent = money.released - money.not_sent
    parts = [f"{money.not_sent} never reached the provider"] if money.not_sent else []
    if sent:
        parts.append(f"{sent} answered with an error status or raised before any output")
    return f"; {money.released} attempt(s) released at $0 ({', '.join(parts)})"


def money_checks(files: RunFiles, money: Repriced) -> list[AuditCheck]:
    """``spend.calls``, ``spend.total_usd`` and ``spend.by_purpose``."""
    spend = files.result.spend
    checks = [
        check(
            "spend.calls",
            "money",
            not money.problems,
            f"{money.calls} booked call(s) re-priced at the prices from {money.prices_from}"
            + ("; " + "; ".join(money.problems[:6]) if money.problems else ": each as booked")
            + released_text(money),
        )
    ]
    claimed = to_nanos(spend.total_usd)
    agrees = micro(claimed) == micro(money.total_nanos)
    detail = [f"re-priced total {usd(money.total_nanos)}; result.json says {usd(claimed)}"]
    verified = len(files.result.verified)
    per_task = money.total_nanos // verified if verified else None
    given = spend.cost_per_verified_task
    if (per_task is None) != (given is None) or (
        per_task is not None and given is not None and micro(to_nanos(given)) != micro(per_task)
    ):
        recomputed = usd(per_task) if per_task is not None else "none"
        detail.append(f"its cost_per_verified_task {given} is not {recomputed}")
    summary = money.total_nanos - money.at_stop_nanos
    if micro(to_nanos(files.result.wrapup.cost_usd)) != micro(summary):
        detail.append(
            f"its wrapup.cost_usd {files.result.wrapup.cost_usd} is not what the closing "
            f"summary's calls cost ({usd(summary)})"
        )
    checks.append(check("spend.total_usd", "money", agrees and len(detail) == 1, "; ".join(detail)))
    claimed_purposes = {k: micro(to_nanos(v)) for k, v in spend.by_purpose.items() if v}
    ours = {k: micro(v) for k, v in money.by_purpose_nanos.items() if v}
    differ = sorted(
        k for k in set(claimed_purposes) | set(ours) if claimed_purposes.get(k) != ours.get(k)
    )
    if spend.model_calls != money.calls:
        differ.append(f"model_calls {spend.model_calls} (journal: {money.calls})")
    split = ", ".join(f"{k} {usd(v)}" for k, v in sorted(money.by_purpose_nanos.items()))
    checks.append(
        check(
            "spend.by_purpose",
            "money",
            not differ,
            f"re-priced by purpose: {split or 'nothing'}"
            + (f"; result.json differs in {', '.join(differ)}" if differ else ""),
        )
    )
    return checks
