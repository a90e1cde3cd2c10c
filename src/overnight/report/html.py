"""The terminal result as one self-contained HTML page, verdict first.

Everything is inline: the CSS, the plots (SVG), nothing fetched and no script at all; a
Content-Security-Policy says so to the browser too. Every string from the run goes through
``html.escape``: task titles, model text, effect arguments and verifier output are untrusted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from html import escape
from typing import Any

from overnight.core.budget import BudgetFractions
from overnight.core.drift import DRIFT_PRUNE_ABOVE
from overnight.core.endings import DRIFT_HALT_ABOVE
from overnight.report.facts import (
    MoneyLine,
    ReportExtras,
    command_note,
    fmt_amount,
    fmt_seconds,
    fmt_usd,
    money_lines,
    sandbox_banner,
    sandbox_line,
    sentence,
)
from overnight.report.result import BudgetBlock, DriftPoint, SpendPoint, TerminalResult

#: Above this many calls the spend curve is drawn without a dot per call.
MAX_DOTS = 400
#: A second, zoomed spend chart is drawn when the spend stayed under this share of the limit.
ZOOM_BELOW = 0.25

_CSS = """
:root { --fg:#1d2330; --muted:#5b6475; --bg:#fff; --panel:#f4f6f9; --line:#d5dae3;
  --ok:#1a7f37; --warn:#a86400; --bad:#c62828; --accent:#2b6cb0; --soft:#e8edf4; }
@media (prefers-color-scheme: dark) {
  :root { --fg:#e6e9ef; --muted:#9aa3b2; --bg:#14171c; --panel:#1c2027; --line:#3a414d;
    --ok:#4cc26b; --warn:#e0a33a; --bad:#ef5350; --accent:#6aa7e8; --soft:#262b34; }
}
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1120px; padding: 24px; color: var(--fg); background: var(--bg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", sans-serif; }
h1 { font-size: 28px; margin: 4px 0 8px; overflow-wrap: anywhere; }
h2 { font-size: 19px; margin: 0 0 12px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
section, header.verdict { background: var(--panel); border: 1px solid var(--line);
  border-radius: 10px; padding: 18px 20px; margin: 0 0 18px; }
header.verdict { border-left: 8px solid var(--muted); }
header.outcome-SUCCESS { border-left-color: var(--ok); }
header.outcome-PARTIAL { border-left-color: var(--warn); }
header.outcome-FAILURE { border-left-color: var(--bad); }
.unsandboxed { margin: 0 0 10px; padding: 8px 12px; border-radius: 6px; color: #fff;
  background: var(--bad); }
.kicker, .muted, .legend { color: var(--muted); }
.kicker { margin: 0; font-size: 13px; }
.badge { display: inline-block; font-size: 14px; font-weight: 600; padding: 2px 10px;
  border-radius: 999px; vertical-align: middle; color: #fff; background: var(--muted); }
.outcome-SUCCESS .badge { background: var(--ok); }
.outcome-PARTIAL .badge { background: var(--warn); }
.outcome-FAILURE .badge { background: var(--bad); }
.why { font-size: 18px; margin: 4px 0 12px; }
.why::first-letter { text-transform: uppercase; }
dl.facts { display: flex; flex-wrap: wrap; gap: 8px 28px; margin: 0 0 10px; }
dl.facts div { min-width: 90px; }
dl.facts dt { color: var(--muted); font-size: 12px; text-transform: uppercase;
  letter-spacing: .04em; }
dl.facts dd { margin: 0; font-weight: 600; overflow-wrap: anywhere; }
code, pre { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: var(--soft); padding: 10px 12px; border-radius: 6px; overflow-x: auto;
  white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0; }
table { border-collapse: collapse; width: 100%; margin: 4px 0 8px; }
th, td { text-align: left; vertical-align: top; padding: 5px 8px;
  border-bottom: 1px solid var(--line); overflow-wrap: anywhere; }
th { font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
td.num, th.num { text-align: right; white-space: nowrap; }
td.nowrap { white-space: nowrap; }
.state { font-weight: 600; }
.state-confirmed { color: var(--ok); }
.state-failed, .state-unknown, .state-intended { color: var(--bad); }
.gauge { margin: 0 0 14px; }
.gauge-head { display: flex; justify-content: space-between; gap: 12px; }
.gauge-head .gname { font-weight: 600; }
.gauge svg { display: block; width: 100%; height: 30px; margin: 3px 0; }
.track { fill: var(--soft); stroke: var(--line); }
.fill-ok { fill: var(--accent); }
.fill-near { fill: var(--warn); }
.fill-over { fill: var(--bad); }
.mark { stroke-width: 2.5; }
.band { stroke-width: 1.5; }
.line-notice { stroke: var(--warn); stroke-dasharray: 2 2; }
.line-stop { stroke: var(--bad); stroke-dasharray: 6 4; }
.line-enforced { stroke: var(--fg); stroke-dasharray: 5 3; }
.line-limit { stroke: var(--fg); }
.line-refused { stroke: var(--bad); stroke-width: 4; }
.legend { font-size: 13px; }
.swatch { display: inline-block; width: 18px; height: 0; vertical-align: middle;
  margin: 0 4px 0 10px; }
.swatch.line-notice { border-top: 3px dotted var(--warn); }
.swatch.line-stop { border-top: 3px dashed var(--bad); }
.swatch.line-enforced { border-top: 3px dashed var(--fg); }
.swatch.line-limit { border-top: 3px solid var(--fg); }
.swatch.line-refused { border-top: 4px solid var(--bad); }
svg.chart { display: block; width: 100%; height: auto; }
.axis { stroke: var(--muted); stroke-width: 1; }
.grid { stroke: var(--line); stroke-width: 1; }
.tick { fill: var(--muted); font-size: 11px; }
.axis-title { fill: var(--muted); font-size: 12px; }
.band-label { font-size: 11px; fill: var(--fg); }
.threshold { stroke-width: 1.5; stroke-dasharray: 6 4; }
.threshold-prune { stroke: var(--warn); }
.threshold-halt { stroke: var(--bad); }
.spend-curve, .spend-curve-zoom, .drift-curve { fill: none; stroke: var(--accent); stroke-width: 2;
  stroke-linejoin: round; }
.spend-dot { fill: var(--accent); }
.dot-none { fill: var(--ok); }
.dot-prune { fill: var(--warn); }
.dot-halt { fill: var(--bad); }
.empty-note { fill: var(--muted); font-size: 14px; }
.two { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 8px 28px; }
ul.ids { margin: 4px 0; padding-left: 20px; }
footer { color: var(--muted); font-size: 13px; padding: 0 4px 24px; }
details summary { cursor: pointer; color: var(--muted); }
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'"


def e(value: object) -> str:
    """Escape anything for HTML text and attribute values."""
    return escape(str(value), quote=True)


def _n(value: float) -> str:
    """An SVG coordinate."""
    return f"{value:.1f}"


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.0f}%"


# -- the parts of the page -----------------------------------------------------------------


def _verdict(r: TerminalResult) -> str:
    resumable = "yes" if r.resumable else "no"
    facts = [
        ("stop reason", f"<code>{e(r.stop_reason)}</code>"),
        ("class", e(r.status)),
        ("exit code", e(r.exit_code)),
        ("resumable", resumable),
        ("alert", e(r.alert)),
    ]
    dl = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in facts)
    plan = r.plan
    flight = plan.in_progress
    in_flight = f"<code>{e(flight)}</code> in flight" if flight else "none in flight"
    glance = (
        f"{len(r.verified)} verified · {len(plan.parked)} parked · {len(plan.pruned)} pruned · "
        f"{len(plan.remaining)} not started · {in_flight} · {e(fmt_usd(r.spend.total_usd))} "
        f"spent in {r.spend.model_calls} model call(s)"
    )
    sent = ""
    if r.alerts:
        items = "".join(f"<li>{_pairs(a)}</li>" for a in r.alerts)
        sent = f"<h3>Alerts</h3><ul>{items}</ul>"
    banner = sandbox_banner(r)
    warning = (
        f'<p class="unsandboxed" role="alert"><strong>{e(banner)}</strong></p>' if banner else ""
    )
    return (
        f'<header class="verdict outcome-{e(r.status)}" id="verdict">{warning}'
        f'<p class="kicker">overnight run <code>{e(r.run_id)}</code> · '
        f"started {e(r.started_at)} · ended {e(r.ended_at)}</p>"
        f'<h1><span class="ending">{e(r.ending)}</span> <span class="badge">{e(r.status)}'
        f"</span></h1>"
        f'<p class="why">{e(sentence(r.message))}</p>'
        f'<dl class="facts">{dl}</dl>'
        f'<p class="glance">{glance}</p>{sent}</header>'
    )


def _pairs(mapping: dict[str, Any]) -> str:
    return " · ".join(f"{e(k)}: <code>{e(_text(v))}</code>" for k, v in mapping.items())


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _goal(r: TerminalResult) -> str:
    out = [
        '<section id="goal"><h2>Goal</h2>',
        f"<p>{e(r.goal.text)}</p>",
        f'<p class="muted">sha256 <code>{e(r.goal.sha256[:16])}</code></p>',
    ]
    if r.predicate is not None:
        p = r.predicate
        state = "passed" if p.met else f"not passed (exit {e(p.exit_code)})"
        out.append(f"<p>Goal predicate <code>{e(p.command)}</code>: <strong>{state}</strong>.</p>")
        if p.detail.strip():
            out.append(
                f"<details><summary>predicate output</summary><pre>{e(p.detail)}</pre></details>"
            )
    out.append("</section>")
    return "".join(out)


_BUDGET_NAMES = (
    ("cost_usd", "money"),
    ("tokens", "tokens"),
    ("steps", "steps"),
    ("seconds", "seconds (wall clock)"),
)


def _budgets(r: TerminalResult, fractions: BudgetFractions) -> str:
    view = {
        "cost_usd": r.budgets.cost_usd,
        "tokens": r.budgets.tokens,
        "steps": r.budgets.steps,
        "seconds": r.budgets.seconds,
    }
    gauges = "".join(_gauge(key, label, view[key], fractions) for key, label in _BUDGET_NAMES)
    legend = _legend(
        "Marks:",
        ("notice", "notice (money: the agent is told to hurry)"),
        ("stop", "stop (the run ends; for money: the task in flight finishes, no new one starts)"),
        ("enforced", "enforced (no ordinary call may cross it; above lies the wrap-up reserve)"),
        ("refused", "a refused call would have reached"),
    )
    wrap = (
        f'<p class="muted">Used at the stop decision; the closing summary cost '
        f"{e(fmt_usd(r.wrapup.cost_usd))} from the reserve on top.</p>"
    )
    return f'<section id="budgets"><h2>Budgets</h2>{gauges}{legend}{wrap}</section>'


# One style per meaning, shared by the gauges, the spend chart and their legends: a money
# line's chart band and its gauge mark are the same amount, so they are drawn the same way.
LINE_MEANING = {"notice": "notice", "finish": "stop", "limit": "limit"}


def _legend(title: str, *entries: tuple[str, str]) -> str:
    swatches = " ".join(
        f'<span class="swatch line-{meaning}"></span>{e(text)}' for meaning, text in entries
    )
    return f'<p class="legend">{e(title)} {swatches}</p>'


def _gauge(name: str, label: str, b: BudgetBlock, fractions: BudgetFractions) -> str:
    used = fmt_amount(name, b.used)
    head = f'<div class="gauge-head"><span class="gname">{e(label)}</span>'
    if b.limit is None or b.limit <= 0:
        if b.limit is None:
            unset = "no limit set"
        elif name == "cost_usd":
            unset = "no money limit (no model in this night)"
        else:
            unset = f"limit {fmt_amount(name, b.limit)}"
        return (
            f'<div class="gauge" data-budget="{e(name)}">{head}'
            f"<span>{e(used)} used; {e(unset)}</span></div></div>"
        )
    limit = b.limit
    share = b.used / limit
    notice = limit * fractions.notice_at if name == "cost_usd" else None
    if (b.stop_at is not None and b.used >= b.stop_at) or b.refused_at is not None:
        state = "over"
    elif notice is not None and b.used >= notice:
        state = "near"
    else:
        state = "ok"
    width = 600.0

    def x(value: float) -> float:
        return max(0.0, min(value / limit, 1.0)) * width

    marks: list[str] = []
    lines: list[str] = []

    def mark(value: float | None, cls: str, what: str) -> None:
        if value is None:
            return
        text = f"{what} {fmt_amount(name, value)} ({_pct(value / limit)})"
        lines.append(text)
        xv = _n(min(max(x(value), 1.5), width - 1.5))
        marks.append(
            f'<line class="mark mark-{cls} line-{cls}" x1="{xv}" x2="{xv}" y1="1" y2="29" '
            f'vector-effect="non-scaling-stroke"><title>{e(text)}</title></line>'
        )

    mark(notice, "notice", "notice from")
    mark(b.stop_at, "stop", "stop at")
    mark(b.enforced_at, "enforced", "enforced at")
    mark(b.refused_at, "refused", "a refused call would have reached")
    svg = (
        f'<svg class="gauge-bar" viewBox="0 0 {width:.0f} 30" preserveAspectRatio="none" '
        f'role="img" aria-label="{e(label)}: {e(used)} of {e(fmt_amount(name, limit))}">'
        f'<rect class="track" x="0" y="7" width="{width:.0f}" height="16" rx="3" '
        f'vector-effect="non-scaling-stroke"/>'
        f'<rect class="fill-{state}" x="0" y="7" width="{_n(x(b.used))}" height="16" rx="3"/>'
        f"{''.join(marks)}</svg>"
    )
    return (
        f'<div class="gauge" data-budget="{e(name)}">{head}'
        f"<span>{e(used)} of {e(fmt_amount(name, limit))} ({_pct(share)})</span></div>"
        f'{svg}<div class="legend">{e(" · ".join(lines))}</div></div>'
    )


def _spend(r: TerminalResult, fractions: BudgetFractions) -> str:
    lines = money_lines(r, fractions)
    cpv = r.spend.cost_per_verified_task
    per_task = "n/a (nothing verified)" if cpv is None else fmt_usd(cpv)
    purposes = "".join(
        f'<tr><td>{e(k)}</td><td class="num">{e(fmt_usd(v))}</td></tr>'
        for k, v in sorted(r.spend.by_purpose.items(), key=lambda kv: -kv[1])
    )
    reached = "".join(
        f"<li>{_pct(line.fraction)} ({e(line.name)}, {e(fmt_usd(line.usd))}): "
        + (
            "not reached"
            if line.reached_at is None
            else f"reached at {e(fmt_seconds(line.reached_at))}"
        )
        + "</li>"
        for line in lines
    )
    facts = (
        '<div class="two"><div>'
        f'<dl class="facts"><div><dt>spent in all</dt><dd>{e(fmt_usd(r.spend.total_usd))}</dd>'
        f"</div><div><dt>model calls</dt><dd>{r.spend.model_calls}</dd></div>"
        f"<div><dt>cost per verified task</dt><dd>{e(per_task)}</dd></div>"
        f"<div><dt>wrap-up</dt><dd>{e(fmt_usd(r.wrapup.cost_usd))}</dd></div></dl>"
        + (f"<h3>Money lines</h3><ul>{reached}</ul>" if reached else "")
        + "</div><div><h3>By purpose</h3>"
        + (f"<table>{purposes}</table>" if purposes else '<p class="muted">no spend</p>')
        + "</div></div>"
    )
    curve, limit = r.spend.curve, r.budgets.cost_usd.limit
    if r.spend.model_calls == 0 and not curve:
        note = '<p class="muted">Nothing to plot: no model call was made in this night.</p>'
        return f'<section id="spend"><h2>Spend over time</h2>{note}{facts}</section>'
    charts = _spend_chart(curve, lines, limit)
    if lines:
        charts += _legend(
            "Lines:",
            ("notice", "notice (the agent is told to hurry)"),
            ("stop", "stop (no new task starts)"),
            ("limit", "the money limit"),
        )
    peak = max((p.cost_usd for p in curve), default=0.0)
    if limit and 0 < peak < ZOOM_BELOW * limit:
        charts += (
            f'<h3>Zoomed in</h3><p class="legend">The spend stayed under {_pct(ZOOM_BELOW)} of '
            "the limit; this chart ends at the highest spend, below every money line.</p>"
            + _spend_chart(curve, [], None, zoom=True)
        )
    return f'<section id="spend"><h2>Spend over time</h2>{charts}{facts}</section>'


def _ticks(lo: float, hi: float, count: int) -> list[float]:
    return [lo + (hi - lo) * i / (count - 1) for i in range(count)]


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 or 10 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if step * power >= value * (1 - 1e-9):
            return step * power
    return 10.0 * power


def _time_tick(seconds: float, span: float) -> str:
    """Axis labels in one format: seconds for a short run, h:mm:ss from a minute on."""
    if span < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def _spend_chart(
    curve: list[SpendPoint], lines: list[MoneyLine], limit: float | None, *, zoom: bool = False
) -> str:
    """Cumulative spend against time, one point per model call. ``zoom``: the y axis ends at
    the highest spend (the money lines are then off the chart and not drawn)."""
    w, h = 760.0, 300.0
    left, right, top, bottom = 72.0, w - 130.0, 16.0, h - 44.0
    xmax = max((p.seconds for p in curve), default=0.0)
    xmax = xmax if xmax > 0 else 1.0
    top_cost = max((p.cost_usd for p in curve), default=0.0)
    ymax = max(top_cost, limit or 0.0) * 1.05 if limit else _nice_ceiling(top_cost)

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
    yticks = _ticks(0.0, limit if limit else ymax, 5)
    for v in yticks:
        y = _n(sy(v))
        parts.append(f'<line class="grid" x1="{_n(left)}" x2="{_n(right)}" y1="{y}" y2="{y}"/>')
        parts.append(
            f'<text class="tick" x="{_n(left - 6)}" y="{_n(sy(v) + 4)}" '
            f'text-anchor="end">{e(fmt_usd(v))}</text>'
        )
    for v in _ticks(0.0, xmax, 5):
        x = _n(sx(v))
        parts.append(
            f'<line class="axis" x1="{x}" x2="{x}" y1="{_n(bottom)}" y2="{_n(bottom + 4)}"/>'
        )
        parts.append(
            f'<text class="tick" x="{x}" y="{_n(bottom + 17)}" text-anchor="middle">'
            f"{e(_time_tick(v, xmax))}</text>"
        )
    parts.append(
        f'<line class="axis" x1="{_n(left)}" x2="{_n(right)}" y1="{_n(bottom)}" y2="{_n(bottom)}"/>'
        f'<line class="axis" x1="{_n(left)}" x2="{_n(left)}" y1="{_n(top)}" y2="{_n(bottom)}"/>'
        f'<text class="axis-title" x="{_n((left + right) / 2)}" y="{_n(h - 6)}" '
        f'text-anchor="middle">time since the run started</text>'
    )
    for line in lines:
        y = _n(sy(line.usd))
        parts.append(
            f'<line class="band band-{e(line.name)} line-{LINE_MEANING[line.name]}" '
            f'data-fraction="{line.fraction:g}" '
            f'x1="{_n(left)}" x2="{_n(right)}" y1="{y}" y2="{y}"/>'
            f'<text class="band-label" x="{_n(right + 6)}" y="{_n(sy(line.usd) + 4)}">'
            f"{_pct(line.fraction)} {e(line.name)} {e(fmt_usd(line.usd))}</text>"
        )
    if curve:
        points = " ".join(f"{_n(sx(p.seconds))},{_n(sy(p.cost_usd))}" for p in curve)
        parts.append(
            f'<polyline class="spend-curve{suffix}" data-points="{len(curve)}" points="{points}"/>'
        )
        if len(curve) <= MAX_DOTS:
            parts.extend(
                f'<circle class="spend-dot" cx="{_n(sx(p.seconds))}" cy="{_n(sy(p.cost_usd))}" '
                f'r="2.6"><title>{e(fmt_seconds(p.seconds))}: {e(fmt_usd(p.cost_usd))}'
                "</title></circle>"
                for p in curve
            )
    else:
        parts.append(
            f'<text class="empty-note" x="{_n((left + right) / 2)}" y="{_n((top + bottom) / 2)}" '
            'text-anchor="middle">no model call was made</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _drift(r: TerminalResult) -> str:
    rows = "".join(
        f'<tr><td class="num">{d.at_task_count}</td><td class="num">{e(fmt_seconds(d.seconds))}'
        f'</td><td class="num">{d.score:.2f}</td><td>{e(d.action)}</td>'
        f"<td>{e(', '.join(d.off_goal_task_ids)) or '-'}</td></tr>"
        for d in r.drift
    )
    table = (
        "<table><tr><th class='num'>after task</th><th class='num'>at</th>"
        f"<th class='num'>score</th><th>action</th><th>off-goal tasks</th></tr>{rows}</table>"
        if rows
        else '<p class="muted">No drift check ran.</p>'
    )
    return (
        '<section id="drift"><h2>Drift</h2>'
        f'<p class="legend">Above {DRIFT_PRUNE_ABOVE:g} the off-goal tasks are pruned; above '
        f"{DRIFT_HALT_ABOVE:g} the run halts (DRIFT_DETECTED).</p>"
        f"{_drift_chart(r.drift)}{table}</section>"
    )


def _drift_chart(points: list[DriftPoint]) -> str:
    w, h = 760.0, 230.0
    left, right, top, bottom = 72.0, w - 130.0, 14.0, h - 40.0
    xmax = float(max((d.at_task_count for d in points), default=0) + 1)

    def sx(n: float) -> float:
        return left + (n / xmax) * (right - left)

    def sy(score: float) -> float:
        return bottom - score * (bottom - top)

    parts = [
        f'<svg class="chart drift-chart" viewBox="0 0 {w:.0f} {h:.0f}" role="img" '
        'aria-label="drift score history"><title>Drift score after each check</title>'
    ]
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = _n(sy(v))
        parts.append(
            f'<line class="grid" x1="{_n(left)}" x2="{_n(right)}" y1="{y}" y2="{y}"/>'
            f'<text class="tick" x="{_n(left - 6)}" y="{_n(sy(v) + 4)}" text-anchor="end">'
            f"{v:.2f}</text>"
        )
    parts.append(
        f'<line class="axis" x1="{_n(left)}" x2="{_n(right)}" y1="{_n(bottom)}" y2="{_n(bottom)}"/>'
        f'<line class="axis" x1="{_n(left)}" x2="{_n(left)}" y1="{_n(top)}" y2="{_n(bottom)}"/>'
        f'<text class="axis-title" x="{_n((left + right) / 2)}" y="{_n(h - 6)}" '
        'text-anchor="middle">tasks finished when the judge looked</text>'
    )
    for value, cls, what in (
        (DRIFT_PRUNE_ABOVE, "prune", "prune above"),
        (DRIFT_HALT_ABOVE, "halt", "halt above"),
    ):
        y = _n(sy(value))
        parts.append(
            f'<line class="threshold threshold-{cls}" data-threshold="{value:g}" '
            f'x1="{_n(left)}" x2="{_n(right)}" y1="{y}" y2="{y}"/>'
            f'<text class="band-label" x="{_n(right + 6)}" y="{_n(sy(value) + 4)}">'
            f"{what} {value:g}</text>"
        )
    seen: set[int] = set()
    for d in points:
        if d.at_task_count not in seen:
            seen.add(d.at_task_count)
            x = _n(sx(d.at_task_count))
            parts.append(
                f'<text class="tick" x="{x}" y="{_n(bottom + 17)}" text-anchor="middle">'
                f"{d.at_task_count}</text>"
            )
    if points:
        coords = " ".join(f"{_n(sx(d.at_task_count))},{_n(sy(d.score))}" for d in points)
        parts.append(
            f'<polyline class="drift-curve" data-points="{len(points)}" points="{coords}"/>'
        )
        parts.extend(
            f'<circle class="dot-{e(d.action)}" cx="{_n(sx(d.at_task_count))}" '
            f'cy="{_n(sy(d.score))}" r="4.5"><title>after {d.at_task_count} task(s): '
            f"{d.score:.2f} ({e(d.action)})</title></circle>"
            for d in points
        )
    else:
        parts.append(
            f'<text class="empty-note" x="{_n((left + right) / 2)}" y="{_n(sy(0.8))}" '
            'text-anchor="middle">no drift check ran</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _table(head: Iterable[str], rows: list[str], empty: str) -> str:
    if not rows:
        return f'<p class="muted">{e(empty)}</p>'
    cells = "".join(f"<th>{e(h)}</th>" for h in head)
    return f"<table><tr>{cells}</tr>{''.join(rows)}</table>"


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1][:200] if lines else ""


def _tasks(r: TerminalResult) -> str:
    plan = r.plan
    verified = [
        f'<tr data-task="{e(v.id)}"><td><code>{e(v.id)}</code></td><td>{e(v.title)}</td>'
        f'<td><code title="{e(v.commit or "")}">{e((v.commit or "-")[:12])}</code></td>'
        f'<td class="num">{v.attempts}</td><td>{e(v.via)}'
        + (f"<br><span class='muted'>{e(command_note(v))}</span>" if command_note(v) else "")
        + "</td></tr>"
        for v in r.verified
    ]
    parked = []
    for p in plan.parked:
        said = _last_line(p.detail)
        detail = (
            f"<br><span class='muted'>verifier said: {e(said)}</span>"
            f"<details><summary>verifier output</summary><pre>{e(p.detail)}</pre></details>"
            if said
            else ""
        )
        if p.protected_changes:
            changed = ", ".join(f"<code>{e(path)}</code>" for path in p.protected_changes)
            detail += f"<br>protected paths it changed (not committed): {changed}"
        patch = f"<code>{e(p.patch)}</code>" if p.patch else "-"
        parked.append(
            f'<tr data-task="{e(p.id)}"><td><code>{e(p.id)}</code></td><td>{e(p.title)}</td>'
            f"<td>{e(p.reason)}{detail}</td><td>{patch}</td></tr>"
        )
    pruned = [
        f'<tr data-task="{e(p.id)}"><td><code>{e(p.id)}</code></td><td>{e(p.title)}</td>'
        f'<td class="num">{p.drift_score:.2f}</td><td class="num">{p.at_task_count}</td></tr>'
        for p in plan.pruned
    ]
    in_flight = (
        f"<p><code>{e(plan.in_progress)}</code> was in flight when the run stopped; a resume "
        "verifies it first.</p>"
        if plan.in_progress
        else '<p class="muted">None: no task was left in flight.</p>'
    )
    remaining = (
        '<ul class="ids">'
        + "".join(f"<li><code>{e(t)}</code></li>" for t in plan.remaining)
        + "</ul>"
        if plan.remaining
        else '<p class="muted">None.</p>'
    )
    return (
        '<section id="tasks"><h2>Tasks</h2>'
        f"<h3>Verified ({len(r.verified)})</h3>"
        + _table(("id", "title", "commit", "attempts", "via"), verified, "No task was verified.")
        + (
            '<p class="legend">via <code>lap</code>: verified right after it ran; via '
            "<code>resume</code>: found in flight by a resumed run and verified there, without "
            "running it again.</p>"
            if r.verified
            else ""
        )
        + f"<h3>Parked ({len(plan.parked)})</h3>"
        + _table(("id", "title", "reason", "patch"), parked, "None.")
        + f"<h3>Pruned for drift ({len(plan.pruned)})</h3>"
        + _table(("id", "title", "drift score", "after task"), pruned, "None.")
        + f"<h3>In flight</h3>{in_flight}"
        + f"<h3>Not started ({len(plan.remaining)})</h3>{remaining}"
        + "</section>"
    )


def _effects(r: TerminalResult) -> str:
    rows = []
    for fx in r.effects:
        state = str(fx.get("state"))
        answer = fx.get("detail")
        error = fx.get("error")
        rows.append(
            f'<tr><td class="nowrap state state-{e(state)}">{e(state)}</td>'
            f"<td class='nowrap'><code>{e(fx.get('tool'))}</code></td>"
            f"<td class='nowrap'><code>{e(fx.get('task'))}</code></td>"
            f"<td><code>{e(fx.get('key'))}</code></td><td><code>{e(_text(fx.get('args')))}</code>"
            f"</td><td>{e(_text(answer)) if answer is not None else '-'}"
            + (f"<br><span class='state-failed'>{e(error)}</span>" if error else "")
            + "</td></tr>"
        )
    return (
        f'<section id="effects"><h2>External effects ({len(r.effects)})</h2>'
        + _table(
            ("state", "tool", "task", "key", "arguments", "answer"),
            rows,
            "This run wrote down no external effect.",
        )
        + "</section>"
    )


def _inline_code(text: str) -> str:
    """``text`` escaped, with its `backquoted` spans set as code (lessons are written that
    way)."""
    parts = e(text).split("`")
    if len(parts) % 2 == 0:  # an unpaired backquote: leave the text as it is
        return e(text)
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _lessons(lessons: list[str]) -> str:
    body = (
        "<ol>" + "".join(f"<li>{_inline_code(item)}</li>" for item in lessons) + "</ol>"
        if lessons
        else '<p class="muted">No lessons were recorded.</p>'
    )
    return f'<section id="lessons"><h2>Lessons ({len(lessons)})</h2>{body}</section>'


def _work(r: TerminalResult) -> str:
    b = r.branch
    stat = (
        f"<pre class='diffstat'>{e(b.diff_stat.rstrip())}</pre>"
        if b.diff_stat.strip()
        else '<p class="muted">No changes on the branch.</p>'
    )
    head = f"<code>{e(b.head[:12])}</code>" if b.head else "unknown"
    return (
        '<section id="work"><h2>Work</h2>'
        f"<p>Branch <code>{e(b.name)}</code> from <code>{e(b.base_commit[:12])}</code>, "
        f"head {head}, worktree <code>{e(b.worktree)}</code>.</p>"
        f'<p class="sandbox">{e(sandbox_line(r))}</p>'
        f"<h3>Diff stat</h3>{stat}</section>"
    )


def _summary(r: TerminalResult) -> str:
    source = "written by the model" if r.wrapup.source == "model" else "rendered from state"
    error = (
        f'<p class="muted">The summary call failed: <code>{e(r.wrapup.error)}</code></p>'
        if r.wrapup.error
        else ""
    )
    return (
        f'<section id="summary"><h2>Summary <span class="badge" data-source="'
        f'{e(r.wrapup.source)}">{source}</span></h2>{error}'
        f'<pre class="summary">{e(r.partial_output)}</pre></section>'
    )


def _footer(r: TerminalResult) -> str:
    dropped = (
        f" <strong>{r.trace_lines_dropped} trace line(s) could not be written; the trace is "
        "incomplete.</strong>"
        if r.trace_lines_dropped
        else ""
    )
    return (
        f"<footer>Trace: <code>{e(r.trace_ref)}</code>. Started {e(r.started_at)}, ended "
        f"{e(r.ended_at)}, resumes: {r.resumes}.{dropped} Result schema "
        f"{e(r.kind)} v{r.schema_version}.</footer>"
    )


def render_html(r: TerminalResult, extras: ReportExtras | None = None) -> str:
    """The whole page. ``extras`` adds the lessons and places the notice band."""
    extras = extras or ReportExtras()
    body = "".join(
        (
            _verdict(r),
            _goal(r),
            _budgets(r, extras.fractions),
            _spend(r, extras.fractions),
            _drift(r),
            _tasks(r),
            _effects(r),
            _lessons(extras.lessons),
            _work(r),
            _summary(r),
            _footer(r),
        )
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>overnight {e(r.run_id)}: {e(r.stop_reason)}</title>"
        f"<style>{_CSS}</style></head>\n<body>{body}</body></html>\n"
    )
