"""``overnight fleet status`` and ``overnight fleet report``: the fleet's nights read from the
database, every one counted exactly once.

A night is counted by its class (SUCCESS, PARTIAL, FAILURE) and its ending from the
``result.json`` its row holds, never from a worker's opinion; a night without a result is
running or queued (shown as such), and one a worker could not start is refused. Nothing is
folded into success: a PARTIAL night is PARTIAL here too.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from overnight.core.budget import to_usd
from overnight.core.errors import ConfigError
from overnight.core.text import printable
from overnight.fleet.database import Pool, reached
from overnight.fleet.money import fleet_day_totals
from overnight.fleet.nights import NightRow, Nights

CLASSES = ("SUCCESS", "PARTIAL", "FAILURE")


class DaySpend(BaseModel):
    model_config = ConfigDict(extra="forbid")

    day: str
    spent_usd: float
    held_usd: float
    """Held by calls in flight, or by calls of a worker that died: counted as spent."""
    cap_usd: float | None
    refusals: int


class NightLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    night_id: str
    state: str
    status: str | None
    stop_reason: str | None
    spent_usd: float | None
    verified: int | None
    parked: int | None
    deliveries: int
    run_dir: str
    worker: str | None
    refusal: str | None = None
    retry_of: str | None = None
    """The failed night this one retries."""
    schedule: str | None = None
    """The schedule that submitted it."""


class FleetReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["fleet_report"] = "fleet_report"
    since: str | None
    generated_at: str
    nights: int
    by_state: dict[str, int]
    """queued, running, finished, refused."""
    by_class: dict[str, int]
    """Finished nights by the class of their ending; every class present, zeros included."""
    by_ending: dict[str, int]
    """Finished nights by stop reason (``BUDGET_EXHAUSTED:fleet_money`` apart from money)."""
    spent_usd: float
    """What the finished nights spent, from their results."""
    verified_tasks: int
    cost_per_verified_task: float | None
    parked_nights: int
    """Finished nights with tasks parked for a person's review."""
    parked_tasks: int
    unknown_effects: int
    """Effects whose outcome nobody knows: ``unknown`` rows, and ``intended`` rows of nights
    no longer running."""
    days: list[DaySpend] = Field(default_factory=list)
    lines: list[NightLine] = Field(default_factory=list)


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """``30d``, ``12h``, ``90m`` or an ISO date/time; None or ``all``: everything."""
    if text is None or text == "all":
        return None
    now = now or datetime.now(UTC)
    m = re.fullmatch(r"(\d+)([dhm])", text.strip())
    if m:
        n, unit = int(m.group(1)), m.group(2)
        delta = {"d": timedelta(days=n), "h": timedelta(hours=n), "m": timedelta(minutes=n)}
        return now - delta[unit]
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            "--since", f"{text!r} is not a duration or a date", "e.g. 30d, 12h or 2026-11-01"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _line(row: NightRow) -> NightLine:
    r = row.result or {}
    plan = r.get("plan") or {}
    return NightLine(
        night_id=row.night_id,
        state=row.state,
        status=r.get("status"),
        stop_reason=r.get("stop_reason"),
        spent_usd=(r.get("spend") or {}).get("total_usd"),
        verified=len(r.get("verified") or []) if row.result is not None else None,
        parked=len(plan.get("parked") or []) if row.result is not None else None,
        deliveries=row.attempts,
        run_dir=row.run_dir,
        worker=row.worker,
        refusal=row.refusal,
        retry_of=row.retry_of,
        schedule=row.schedule,
    )


def build_report(pool: Pool, since: datetime | None) -> FleetReport:
    rows = Nights(pool).since(since)
    lines = [_line(row) for row in rows]
    finished = [line for line in lines if line.state == "finished"]
    by_class = {c: 0 for c in CLASSES}
    by_class.update(Counter(line.status for line in finished if line.status))
    by_ending = dict(sorted(Counter(line.stop_reason or "?" for line in finished).items()))
    spent = sum(to_nanos_exact(line.spent_usd) for line in finished)
    verified = sum(line.verified or 0 for line in finished)
    days = max(1, (datetime.now(UTC) - since).days + 1) if since is not None else 3650
    return FleetReport(
        since=since.isoformat(timespec="seconds") if since else None,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        nights=len(lines),
        by_state={
            s: sum(1 for line in lines if line.state == s)
            for s in ("queued", "running", "finished", "refused")
        },
        by_class=by_class,
        by_ending=by_ending,
        spent_usd=to_usd(spent),
        verified_tasks=verified,
        cost_per_verified_task=round(to_usd(spent) / verified, 6) if verified else None,
        parked_nights=sum(1 for line in finished if line.parked),
        parked_tasks=sum(line.parked or 0 for line in finished),
        unknown_effects=_unknown_effects(pool, rows),
        days=[
            DaySpend(
                day=str(d["day"]),
                spent_usd=to_usd(int(d["spent_nanos"])),
                held_usd=to_usd(int(d["held_nanos"])),
                cap_usd=None if d["cap_nanos"] is None else to_usd(int(d["cap_nanos"])),
                refusals=int(d["refusals"]),
            )
            for d in fleet_day_totals(pool, days)
        ],
        lines=lines,
    )


def to_nanos_exact(usd: float | None) -> int:
    return 0 if usd is None else round(usd * 1_000_000_000)


def _unknown_effects(pool: Pool, rows: list[NightRow]) -> int:
    run_ids = {str((row.result or {}).get("run_id")): row for row in rows if row.result}
    if not run_ids:
        return 0
    with reached("effects ledger"), pool.connection() as conn:
        found: list[dict[str, Any]] = conn.execute(
            "SELECT run_id, state FROM effects WHERE run_id = ANY(%s)"
            " AND state IN ('unknown', 'intended')",
            (list(run_ids),),
        ).fetchall()
    return sum(
        1 for f in found if f["state"] == "unknown" or run_ids[str(f["run_id"])].state != "running"
    )


# -- rendering -------------------------------------------------------------------------------


def render_text(report: FleetReport, *, lines: bool = True) -> str:
    out = [
        f"fleet: {report.nights} nights"
        + (f" since {report.since}" if report.since else "")
        + " — "
        + ", ".join(f"{n} {s}" for s, n in report.by_state.items()),
        "finished by class: " + ", ".join(f"{c} {n}" for c, n in report.by_class.items()),
    ]
    if report.by_ending:
        out.append(
            "finished by ending: " + ", ".join(f"{e} {n}" for e, n in report.by_ending.items())
        )
    cpv = (
        f"${report.cost_per_verified_task:.4f}"
        if report.cost_per_verified_task is not None
        else "n/a (no verified task)"
    )
    out.append(
        f"spent ${report.spent_usd:.4f} for {report.verified_tasks} verified tasks "
        f"({cpv} per verified task)"
    )
    out.append(
        f"parked for review: {report.parked_tasks} tasks in {report.parked_nights} nights; "
        f"effects of unknown outcome: {report.unknown_effects}"
    )
    for d in report.days:
        cap = f" of ${d.cap_usd:.4f}" if d.cap_usd is not None else " (no fleet cap)"
        out.append(
            f"  {d.day}: spent ${d.spent_usd:.4f}{cap}, held ${d.held_usd:.4f}, "
            f"{d.refusals} calls refused by the fleet cap"
        )
    if lines:
        for n in report.lines:
            what = n.stop_reason or n.state
            if n.state == "refused":
                what = f"refused: {n.refusal}"
            money = f"${n.spent_usd:.4f}" if n.spent_usd is not None else "-"
            out.append(
                f"  {printable(n.night_id)}  {n.state:<8} {printable(what)}  {money}  "
                f"deliveries {n.deliveries}  {printable(n.run_dir)}{links(n)}"
            )
    return "\n".join(out)


def links(n: NightLine) -> str:
    """What a night is linked to: the night it retries, the schedule that submitted it."""
    out = f"  retry of {printable(n.retry_of)}" if n.retry_of else ""
    return out + (f"  schedule {printable(n.schedule)}" if n.schedule else "")


def render_html(report: FleetReport) -> str:
    e = html.escape

    def table(head: list[str], rows: list[list[str]]) -> str:
        h = "".join(f"<th>{e(c)}</th>" for c in head)
        body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>"

    cpv = report.cost_per_verified_task
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>overnight fleet report</title>",
        "<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;"
        "margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
        ".SUCCESS{color:#1a7f37}.PARTIAL{color:#9a6700}.FAILURE{color:#cf222e}</style>",
        "</head><body><h1>overnight fleet report</h1>",
        f"<p>{report.nights} nights" + (f" since {e(report.since)}" if report.since else ""),
        f", generated {e(report.generated_at)}.</p>",
        "<h2>Nights</h2>",
        table(["state", "nights"], [[s, str(n)] for s, n in report.by_state.items()]),
        table(["class", "finished nights"], [[c, str(n)] for c, n in report.by_class.items()]),
        table(["ending", "nights"], [[k, str(n)] for k, n in report.by_ending.items()]),
        "<h2>Money</h2>",
        f"<p>Spent ${report.spent_usd:.4f} for {report.verified_tasks} verified tasks"
        + (f" (${cpv:.4f} per verified task)" if cpv is not None else "")
        + ".</p>",
        table(
            ["day", "spent", "held", "fleet cap", "refused calls"],
            [
                [
                    d.day,
                    f"${d.spent_usd:.4f}",
                    f"${d.held_usd:.4f}",
                    f"${d.cap_usd:.4f}" if d.cap_usd is not None else "none",
                    str(d.refusals),
                ]
                for d in report.days
            ],
        ),
        "<h2>For a person</h2>",
        f"<p>{report.parked_tasks} tasks parked in {report.parked_nights} nights; "
        f"{report.unknown_effects} effects of unknown outcome.</p>",
        "<h2>Every night</h2>",
        table(
            ["night", "state", "class", "stop reason", "spent", "verified", "deliveries"],
            [
                [
                    n.night_id,
                    n.state,
                    n.status or "",
                    n.stop_reason or (n.refusal or ""),
                    f"${n.spent_usd:.4f}" if n.spent_usd is not None else "",
                    "" if n.verified is None else str(n.verified),
                    str(n.deliveries),
                ]
                for n in report.lines
            ],
        ),
        "</body></html>",
    ]
    return "\n".join(parts)
