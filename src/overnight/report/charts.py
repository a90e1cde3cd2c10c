"""The page's plots as inline SVG: a gauge per budget, the spend over time, the drift history.

They draw facts of the view model (``overnight.report.view``): the geometry is computed here,
every label is the text the facts already hold (axis ticks aside). Text is escaped for HTML.
"""

from __future__ import annotations

import math
from html import escape

from overnight.core.text import printable
from overnight.report.facts import fmt_usd
from overnight.report.view import BudgetMark, BudgetRow, CurvePoint, DriftFacts, MoneyLineFacts

#: Above this many calls the spend curve is drawn without a dot per call.
MAX_DOTS = 400

# One style per meaning, shared by the gauges, the spend chart and their legends: a money
# line's chart band and its gauge mark are the same amount, so they are drawn the same way.
LINE_MEANING = {"notice": "notice", "finish": "stop", "limit": "limit"}

MARK_WORDS = {
    "notice": "notice from",
    "stop": "stop at",
    "enforced": "enforced at",
    "refused": "a refused call would have reached",
}


def esc(value: object) -> str:
    """Text for the page: HTML-escaped, without bidi controls or escape sequences."""
    return escape(printable(str(value)), quote=True)


def coord(value: float) -> str:
    return f"{value:.1f}"


def mark_text(m: BudgetMark) -> str:
    """A mark in words, as its tooltip and the gauge's legend give it."""
    return f"{MARK_WORDS[m.kind]} {m.amount} ({m.share})"


def gauge_bar(row: BudgetRow, label: str) -> str:
    """A budget with a limit above zero: how much is used and where its lines sit."""
    limit = row.limit_value or 1.0
    width = 600.0

    def x(value: float) -> float:
        return max(0.0, min(value / limit, 1.0)) * width

    marks = []
    for m in row.marks:
        xv = coord(min(max(x(m.value), 1.5), width - 1.5))
        marks.append(
            f'<line class="mark mark-{m.kind} line-{m.kind}" x1="{xv}" x2="{xv}" y1="1" y2="29" '
            f'vector-effect="non-scaling-stroke"><title>{esc(mark_text(m))}</title></line>'
        )
    return (
        f'<svg class="gauge-bar" viewBox="0 0 {width:.0f} 30" preserveAspectRatio="none" '
        f'role="img" aria-label="{esc(label)}: {esc(row.used)} of {esc(row.limit)}">'
        f'<rect class="track" x="0" y="7" width="{width:.0f}" height="16" rx="3" '
        f'vector-effect="non-scaling-stroke"/>'
        f'<rect class="fill-{row.state}" x="0" y="7" width="{coord(x(row.used_value))}" '
        f'height="16" rx="3"/>'
        f"{''.join(marks)}</svg>"
    )


def ticks(lo: float, hi: float, count: int) -> list[float]:
    return [lo + (hi - lo) * i / (count - 1) for i in range(count)]


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 or 10 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if step * power >= value * (1 - 1e-9):
            return step * power
    return 10.0 * power


def time_tick(seconds: float, span: float) -> str:
    """Axis labels in one format: seconds for a short run, h:mm:ss from a minute on."""
    if span < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def spend_chart(
    curve: list[CurvePoint],
    lines: list[MoneyLineFacts],
    limit: float | None,
    *,
    zoom: bool = False,
) -> str:
    """Cumulative spend against time, one point per model call. ``zoom``: the y axis ends at
    the highest spend (the money lines are then off the chart and not drawn)."""
    w, h = 760.0, 300.0
    left, right, top, bottom = 72.0, w - 130.0, 16.0, h - 44.0
    xmax = max((p.seconds for p in curve), default=0.0)
    xmax = xmax if xmax > 0 else 1.0
    top_cost = max((p.cost_usd for p in curve), default=0.0)
    ymax = max(top_cost, limit or 0.0) * 1.05 if limit else nice_ceiling(top_cost)

    def sx(t: float) -> float:
        return left + (t / xmax) * (right - left)

    def sy(c: float) -> float:
        return bottom - (c / ymax) * (bottom - top)

    suffix = "-zoom" if zoom else ""
    what = "zoomed to the highest spend" if zoom else "with the money lines"
    parts = [
        f'<svg class="chart spend-chart{suffix}" viewBox="0 0 {w:.0f} {h:.0f}" role="img" '
        f'aria-label="cumulative spend over time, {what}">'
        f"<title>Cumulative spend over time, {what}</title>"
    ]
    for v in ticks(0.0, limit if limit else ymax, 5):
        y = coord(sy(v))
        parts.append(
            f'<line class="grid" x1="{coord(left)}" x2="{coord(right)}" y1="{y}" y2="{y}"/>'
        )
        parts.append(
            f'<text class="tick" x="{coord(left - 6)}" y="{coord(sy(v) + 4)}" '
            f'text-anchor="end">{esc(fmt_usd(v))}</text>'
        )
    for v in ticks(0.0, xmax, 5):
        x = coord(sx(v))
        parts.append(
            f'<line class="axis" x1="{x}" x2="{x}" y1="{coord(bottom)}" y2="{coord(bottom + 4)}"/>'
        )
        parts.append(
            f'<text class="tick" x="{x}" y="{coord(bottom + 17)}" text-anchor="middle">'
            f"{esc(time_tick(v, xmax))}</text>"
        )
    parts.append(_axes(left, right, top, bottom, h, "time since the run started"))
    for line in lines:
        y = coord(sy(line.usd))
        parts.append(
            f'<line class="band band-{esc(line.name)} line-{LINE_MEANING[line.name]}" '
            f'data-fraction="{line.fraction:g}" '
            f'x1="{coord(left)}" x2="{coord(right)}" y1="{y}" y2="{y}"/>'
            f'<text class="band-label" x="{coord(right + 6)}" y="{coord(sy(line.usd) + 4)}">'
            f"{line.share} {esc(line.name)} {esc(line.amount)}</text>"
        )
    if curve:
        points = " ".join(f"{coord(sx(p.seconds))},{coord(sy(p.cost_usd))}" for p in curve)
        parts.append(
            f'<polyline class="spend-curve{suffix}" data-points="{len(curve)}" points="{points}"/>'
        )
        if len(curve) <= MAX_DOTS:
            parts.extend(
                f'<circle class="spend-dot" cx="{coord(sx(p.seconds))}" '
                f'cy="{coord(sy(p.cost_usd))}" r="2.6"><title>{esc(p.at)}: {esc(p.spent)}'
                "</title></circle>"
                for p in curve
            )
    else:
        parts.append(
            f'<text class="empty-note" x="{coord((left + right) / 2)}" '
            f'y="{coord((top + bottom) / 2)}" text-anchor="middle">no model call was made</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _axes(left: float, right: float, top: float, bottom: float, h: float, title: str) -> str:
    return (
        f'<line class="axis" x1="{coord(left)}" x2="{coord(right)}" y1="{coord(bottom)}" '
        f'y2="{coord(bottom)}"/>'
        f'<line class="axis" x1="{coord(left)}" x2="{coord(left)}" y1="{coord(top)}" '
        f'y2="{coord(bottom)}"/>'
        f'<text class="axis-title" x="{coord((left + right) / 2)}" y="{coord(h - 6)}" '
        f'text-anchor="middle">{title}</text>'
    )


def drift_chart(drift: DriftFacts) -> str:
    """The drift score after each check, with the prune and halt thresholds."""
    points = drift.checks
    w, h = 760.0, 230.0
    left, right, top, bottom = 72.0, w - 130.0, 14.0, h - 40.0
    xmax = float(max((d.after_tasks for d in points), default=0) + 1)

    def sx(n: float) -> float:
        return left + (n / xmax) * (right - left)

    def sy(score: float) -> float:
        return bottom - score * (bottom - top)

    parts = [
        f'<svg class="chart drift-chart" viewBox="0 0 {w:.0f} {h:.0f}" role="img" '
        'aria-label="drift score history"><title>Drift score after each check</title>'
    ]
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = coord(sy(v))
        parts.append(
            f'<line class="grid" x1="{coord(left)}" x2="{coord(right)}" y1="{y}" y2="{y}"/>'
            f'<text class="tick" x="{coord(left - 6)}" y="{coord(sy(v) + 4)}" '
            f'text-anchor="end">{v:.2f}</text>'
        )
    parts.append(_axes(left, right, top, bottom, h, "tasks finished when the judge looked"))
    for value, cls, what in (
        (drift.prune_above, "prune", "prune above"),
        (drift.halt_above, "halt", "halt above"),
    ):
        y = coord(sy(value))
        parts.append(
            f'<line class="threshold threshold-{cls}" data-threshold="{value:g}" '
            f'x1="{coord(left)}" x2="{coord(right)}" y1="{y}" y2="{y}"/>'
            f'<text class="band-label" x="{coord(right + 6)}" y="{coord(sy(value) + 4)}">'
            f"{what} {value:g}</text>"
        )
    seen: set[int] = set()
    for d in points:
        if d.after_tasks not in seen:
            seen.add(d.after_tasks)
            parts.append(
                f'<text class="tick" x="{coord(sx(d.after_tasks))}" y="{coord(bottom + 17)}" '
                f'text-anchor="middle">{d.after_tasks}</text>'
            )
    if points:
        coords = " ".join(f"{coord(sx(d.after_tasks))},{coord(sy(d.value))}" for d in points)
        parts.append(
            f'<polyline class="drift-curve" data-points="{len(points)}" points="{coords}"/>'
        )
        parts.extend(
            f'<circle class="dot-{esc(d.action)}" cx="{coord(sx(d.after_tasks))}" '
            f'cy="{coord(sy(d.value))}" r="4.5"><title>after {d.after_tasks} task(s): '
            f"{d.score} ({esc(d.action)})</title></circle>"
            for d in points
        )
    else:
        parts.append(
            f'<text class="empty-note" x="{coord((left + right) / 2)}" y="{coord(sy(0.8))}" '
            'text-anchor="middle">no drift check ran</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
