"""The terminal result as one self-contained HTML page, verdict first.

Everything is inline: the CSS, the plots (SVG), nothing fetched and no script at all; a
Content-Security-Policy says so to the browser too. Every string from the run goes through
``html.escape``: task titles, model text, effect arguments and verifier output are untrusted.
The page lays out the report's facts (``overnight.report.view``); it derives none of its own.
"""

from __future__ import annotations

from collections.abc import Iterable

from overnight.report.charts import drift_chart, gauge_bar, mark_text, spend_chart
from overnight.report.charts import esc as e
from overnight.report.facts import ReportExtras, fmt_share, report_facts
from overnight.report.view import (
    BudgetRow,
    DriftFacts,
    EffectRow,
    GateRow,
    GoalFacts,
    Headline,
    Pair,
    ReportFacts,
    RunRecord,
    SpendFacts,
    SummaryFacts,
    TaskFacts,
    WorkFacts,
)
from overnight.store.result import TerminalResult

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
.automation { margin: 0 0 10px; padding: 8px 12px; border-radius: 6px;
  border: 2px solid var(--warn); }
.automation p, .automation ul { margin: 0; }
.gates { margin: 10px 0 0; }
.gates h3 { margin: 0 0 4px; }
.gates p, .gates ul { margin: 0; }
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


# -- the parts of the page -----------------------------------------------------------------


def _verdict(f: ReportFacts) -> str:
    h, tasks = f.headline, f.tasks
    facts = [
        ("stop reason", f"<code>{e(h.stop_reason)}</code>"),
        ("class", e(h.status)),
        ("exit code", e(h.exit_code)),
        ("resumable", "yes" if h.resumable else "no"),
        ("alert", e(h.alert_said)),
    ]
    dl = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in facts)
    flight = tasks.in_flight
    in_flight = f"<code>{e(flight)}</code> in flight" if flight else "none in flight"
    glance = (
        f"{len(tasks.verified)} verified · {len(tasks.parked)} parked · "
        f"{len(tasks.pruned)} pruned · {len(tasks.not_started)} not started · {in_flight} · "
        + (
            "no model, no money"
            if f.spend.no_model
            else f"{e(f.spend.total)} spent in {f.spend.model_calls} model call(s), "
            "the closing summary included"
        )
    )
    gates = (
        f'<div class="gates" id="gates"><h3>Gates</h3><p class="muted">{e(h.gates_said)}</p>'
        f"<ul>{''.join(_gate(g) for g in h.gates)}</ul></div>"
        if h.gates
        else ""
    )
    sent = ""
    if h.alerts_sent:
        items = "".join(f"<li>{_pairs(a)}</li>" for a in h.alerts_sent)
        sent = f"<h3>Alerts</h3><ul>{items}</ul>"
    warning = (
        f'<p class="unsandboxed" role="alert"><strong>{e(h.banner)}</strong></p>'
        if h.banner
        else ""
    )
    if h.automation:
        items = "".join(
            f"<li><code>{e(a.task)}</code>: "
            + ", ".join(f"<code>{e(path)}</code>" for path in a.paths)
            + "</li>"
            for a in h.automation
        )
        warning += (
            f'<div class="automation" role="alert" id="automation"><p><strong>'
            f"{e(h.automation_said)}</strong></p><ul>{items}</ul></div>"
        )
    return (
        f'<header class="verdict outcome-{e(h.status)}" id="verdict">{warning}'
        f'<p class="kicker">overnight run <code>{e(h.run_id)}</code> · '
        f"started {e(f.record.started_at)} · ended {e(f.record.ended_at)}</p>"
        f'<h1><span class="ending">{e(h.ending)}</span> <span class="badge">{e(h.status)}'
        f"</span></h1>"
        f'<p class="why">{e(h.why)}</p>'
        f'<dl class="facts">{dl}</dl>'
        f'<p class="glance">{glance}</p>{gates}{sent}</header>'
    )


def _gate(g: GateRow) -> str:
    """A gate's counts, with why it judged nothing or the new findings it found, if any."""
    if g.unreadable:
        said = f"{e(g.said)}: <code>{e(g.unreadable)}</code>"
    else:
        new = "".join(f"<li>new: <code>{e(found)}</code></li>" for found in g.new)
        if g.new_unlisted:
            new += f"<li>and {g.new_unlisted} more new (result.json lists them all)</li>"
        said = f"{e(g.said)}." + (f"<ul>{new}</ul>" if new else "")
    return (
        f'<li data-gate="{e(g.name)}" data-kind="{e(g.kind)}"><code>{e(g.name)}</code>: {said}</li>'
    )


def _pairs(pairs: list[Pair]) -> str:
    return " · ".join(f"{e(p.name)}: <code>{e(p.value)}</code>" for p in pairs)


def _goal(g: GoalFacts) -> str:
    out = [
        '<section id="goal"><h2>Goal</h2>',
        f"<p>{e(g.text)}</p>",
        f'<p class="muted">sha256 <code>{e(g.sha256)}</code></p>',
    ]
    p = g.predicate
    if p is not None:
        out.append(
            f"<p>Goal predicate <code>{e(p.command)}</code>: <strong>{e(p.state)}</strong>.</p>"
        )
        if p.output:
            out.append(
                f"<details><summary>predicate output</summary><pre>{e(p.output)}</pre></details>"
            )
    out.append("</section>")
    return "".join(out)


#: How the page names each budget.
BUDGET_LABELS = {
    "cost_usd": "money",
    "tokens": "tokens",
    "steps": "steps",
    "seconds": "seconds (wall clock)",
    "fleet_money": "fleet money (daily cap)",
}


def _budgets(f: ReportFacts) -> str:
    gauges = "".join(
        _gauge(row) for row in f.budgets if not (f.spend.no_model and row.key == "cost_usd")
    )
    legend = _legend(
        "Marks:",
        ("notice", "notice (money: the agent is told to hurry)"),
        ("stop", "stop (the run ends; for money: the task in flight finishes, no new one starts)"),
        ("enforced", "enforced (no ordinary call may cross it; above lies the wrap-up reserve)"),
        ("refused", "a refused call would have reached"),
    )
    wrap = (
        f'<p class="muted">Used at the stop decision; the closing summary cost '
        f"{e(f.spend.wrapup)} from the reserve on top.</p>"
        if not f.spend.no_model
        else '<p class="muted">No money gauge: a night without a model spends no money.</p>'
    )
    return f'<section id="budgets"><h2>Budgets</h2>{gauges}{legend}{wrap}</section>'


def _legend(title: str, *entries: tuple[str, str]) -> str:
    swatches = " ".join(
        f'<span class="swatch line-{meaning}"></span>{e(text)}' for meaning, text in entries
    )
    return f'<p class="legend">{e(title)} {swatches}</p>'


def _gauge(row: BudgetRow) -> str:
    label = BUDGET_LABELS[row.key]
    head = f'<div class="gauge-head"><span class="gname">{e(label)}</span>'
    if row.share is None:
        if row.limit is None:
            unset = "no limit set"
        elif row.no_model:
            unset = "no money limit (no model in this night)"
        else:
            unset = f"limit {row.limit}"
        return (
            f'<div class="gauge" data-budget="{e(row.key)}">{head}'
            f"<span>{e(row.used)} used; {e(unset)}</span></div></div>"
        )
    marks = " · ".join(mark_text(m) for m in row.marks)
    return (
        f'<div class="gauge" data-budget="{e(row.key)}">{head}'
        f"<span>{e(row.used)} of {e(row.limit)} ({row.share})</span></div>"
        f'{gauge_bar(row, label)}<div class="legend">{e(marks)}</div></div>'
    )


def _spend(s: SpendFacts) -> str:
    if s.no_model:
        return f'<section id="spend"><h2>Spend</h2><p>Spent {e(s.said)}.</p></section>'
    purposes = "".join(
        f'<tr><td>{e(p.name)}</td><td class="num">{e(p.value)}</td></tr>' for p in s.by_purpose
    )
    reached = "".join(
        f"<li>{line.share} ({e(line.name)}, {e(line.amount)}): {e(line.reached)}</li>"
        for line in s.lines
    )
    facts = (
        f'<p class="spent">Spent {e(s.said)}.</p><div class="two"><div>'
        f'<dl class="facts"><div><dt>spent in all</dt><dd>{e(s.total)}</dd>'
        f"</div><div><dt>model calls</dt><dd>{s.model_calls}</dd></div>"
        f"<div><dt>cost per verified task</dt><dd>{e(s.per_verified_task)}</dd></div>"
        f"<div><dt>closing summary (included)</dt><dd>{e(s.wrapup)}</dd></div></dl>"
        + (f"<h3>Money lines</h3><ul>{reached}</ul>" if reached else "")
        + "</div><div><h3>By purpose</h3>"
        + (f"<table>{purposes}</table>" if purposes else '<p class="muted">no spend</p>')
        + "</div></div>"
    )
    if s.warnings:
        items = "".join(
            f"<li><code>{e(w.kind)}</code> {e(w.call)}: {e(w.message)}</li>" for w in s.warnings
        )
        facts += f"<h3>Billing warnings ({len(s.warnings)})</h3><ul>{items}</ul>"
    if s.model_calls == 0 and not s.curve:
        note = '<p class="muted">Nothing to plot: no model call was made in this night.</p>'
        return f'<section id="spend"><h2>Spend over time</h2>{note}{facts}</section>'
    charts = spend_chart(s.curve, s.lines, s.limit)
    if s.lines:
        charts += _legend(
            "Lines:",
            ("notice", "notice (the agent is told to hurry)"),
            ("stop", "stop (no new task starts)"),
            ("limit", "the money limit"),
        )
    peak = max((p.cost_usd for p in s.curve), default=0.0)
    if s.limit and 0 < peak < ZOOM_BELOW * s.limit:
        charts += (
            f'<h3>Zoomed in</h3><p class="legend">The spend stayed under {fmt_share(ZOOM_BELOW)} '
            "of the limit; this chart ends at the highest spend, below every money line.</p>"
            + spend_chart(s.curve, [], None, zoom=True)
        )
    return f'<section id="spend"><h2>Spend over time</h2>{charts}{facts}</section>'


def _drift(d: DriftFacts) -> str:
    rows = "".join(
        f'<tr><td class="num">{c.after_tasks}</td><td class="num">{e(c.at)}'
        f'</td><td class="num">{c.score}</td><td>{e(c.action)}</td>'
        f"<td>{e(c.off_goal) or '-'}"
        + (
            f"<br><span class='muted'>shown the automation paths tasks changed: "
            f"{e(c.automation_shown)}</span>"
            if c.automation_shown
            else ""
        )
        + "</td></tr>"
        for c in d.checks
    )
    table = (
        "<table><tr><th class='num'>after task</th><th class='num'>at</th>"
        f"<th class='num'>score</th><th>action</th><th>off-goal tasks</th></tr>{rows}</table>"
        if rows
        else '<p class="muted">No drift check ran.</p>'
    )
    return (
        '<section id="drift"><h2>Drift</h2>'
        f'<p class="legend">{e(d.rule)}</p>'
        f"{drift_chart(d)}{table}</section>"
    )


def _table(head: Iterable[str], rows: list[str], empty: str) -> str:
    if not rows:
        return f'<p class="muted">{e(empty)}</p>'
    cells = "".join(f"<th>{e(h)}</th>" for h in head)
    return f"<table><tr>{cells}</tr>{''.join(rows)}</table>"


def _tasks(t: TaskFacts) -> str:
    verified = [
        f'<tr data-task="{e(v.id)}" data-via="{e(v.via)}"><td><code>{e(v.id)}</code></td>'
        f"<td>{e(v.title)}</td>"
        + (
            f'<td><code title="{e(v.commit)}">{e(v.short_commit)}</code></td>'
            if v.commit
            else "<td>verified, nothing to commit</td>"
        )
        + f'<td class="num">{v.attempts}</td><td>{e(v.via_said)}'
        + (f"<br><span class='muted'>{e(v.note)}</span>" if v.note else "")
        + (f"<br><span class='muted'>left out: {e(v.left_out)}</span>" if v.left_out else "")
        + "</td></tr>"
        for v in t.verified
    ]
    parked = []
    for p in t.parked:
        detail = (
            f"<br><span class='muted'>verifier said: {e(p.verifier_said)}</span>"
            f"<details><summary>verifier output</summary><pre>{e(p.verifier_output)}</pre>"
            "</details>"
            if p.verifier_said
            else ""
        )
        if p.protected_changes:
            changed = ", ".join(f"<code>{e(path)}</code>" for path in p.protected_changes)
            detail += f"<br>protected paths it changed (not committed): {changed}"
        if p.automation_changes:
            changed = ", ".join(f"<code>{e(path)}</code>" for path in p.automation_changes)
            detail += f"<br>automation paths it changed (not committed): {changed}"
        if p.left_out:
            detail += f"<br><span class='muted'>left out: {e(p.left_out)}</span>"
        patch = f"<code>{e(p.patch)}</code>" if p.patch else "-"
        parked.append(
            f'<tr data-task="{e(p.id)}"><td><code>{e(p.id)}</code></td><td>{e(p.title)}</td>'
            f"<td>{e(p.reason)}{detail}</td><td>{patch}</td></tr>"
        )
    pruned = [
        f'<tr data-task="{e(p.id)}"><td><code>{e(p.id)}</code></td><td>{e(p.title)}</td>'
        f'<td class="num">{p.score}</td><td class="num">{p.after_tasks}</td></tr>'
        for p in t.pruned
    ]
    in_flight = (
        f"<p><code>{e(t.in_flight)}</code> was in flight when the run stopped; a resume "
        "verifies it first.</p>"
        if t.in_flight
        else '<p class="muted">None: no task was left in flight.</p>'
    )
    remaining = (
        '<ul class="ids">'
        + "".join(f"<li><code>{e(task)}</code></li>" for task in t.not_started)
        + "</ul>"
        if t.not_started
        else '<p class="muted">None.</p>'
    )
    return (
        '<section id="tasks"><h2>Tasks</h2>'
        f"<h3>Verified ({len(t.verified)})</h3>"
        + _table(("id", "title", "commit", "attempts", "how"), verified, "No task was verified.")
        + f"<h3>Parked ({len(t.parked)})</h3>"
        + _table(("id", "title", "reason", "patch"), parked, "None.")
        + f"<h3>Pruned for drift ({len(t.pruned)})</h3>"
        + _table(("id", "title", "drift score", "after task"), pruned, "None.")
        + f"<h3>In flight</h3>{in_flight}"
        + f"<h3>Not started ({len(t.not_started)})</h3>{remaining}"
        + "</section>"
    )


def _effects(effects: list[EffectRow]) -> str:
    rows = [
        f'<tr><td class="nowrap state state-{e(fx.state)}">{e(fx.state)}</td>'
        f"<td class='nowrap'><code>{e(fx.tool)}</code></td>"
        f"<td class='nowrap'><code>{e(fx.task)}</code></td>"
        f"<td><code>{e(fx.key)}</code></td><td><code>{e(fx.args)}</code>"
        f"</td><td>{e(fx.answer) if fx.answer is not None else '-'}"
        + (f"<br><span class='state-failed'>{e(fx.error)}</span>" if fx.error else "")
        + "</td></tr>"
        for fx in effects
    ]
    return (
        f'<section id="effects"><h2>External effects ({len(effects)})</h2>'
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


def _work(w: WorkFacts) -> str:
    stat = (
        f"<pre class='diffstat'>{e(w.diff_stat)}</pre>"
        if w.diff_stat
        else '<p class="muted">No changes on the branch.</p>'
    )
    head = f"<code>{e(w.head)}</code>" if w.head else "unknown"
    return (
        '<section id="work"><h2>Work</h2>'
        f"<p>Branch <code>{e(w.branch)}</code> from <code>{e(w.base_commit)}</code>, "
        f"head {head}, worktree <code>{e(w.worktree)}</code> ({e(w.worktree_kept)}).</p>"
        f'<p class="sandbox">{e(w.sandbox)}</p>'
        + "".join(f'<p class="executor">{e(line)}</p>' for line in w.executor)
        + f"<h3>Diff stat</h3>{stat}</section>"
    )


def _summary(s: SummaryFacts) -> str:
    error = (
        f'<p class="muted">The summary call failed: <code>{e(s.error)}</code></p>'
        if s.error
        else ""
    )
    return (
        f'<section id="summary"><h2>Summary <span class="badge" data-source="'
        f'{e(s.source)}">{s.written_by}</span></h2>{error}'
        f'<pre class="summary">{e(s.text)}</pre></section>'
    )


def _footer(r: RunRecord) -> str:
    gap = f" <strong>{e(r.trace_gap)}</strong>" if r.trace_gap else ""
    return (
        f"<footer>Trace: <code>{e(r.trace_ref)}</code>. Started {e(r.started_at)}, ended "
        f"{e(r.ended_at)}, resumes: {r.resumes}.{gap} Result schema {e(r.schema)}.</footer>"
    )


def render_html_facts(f: ReportFacts) -> str:
    """The whole page of the report's facts."""
    body = "".join(
        (
            _verdict(f),
            _goal(f.goal),
            _budgets(f),
            _spend(f.spend),
            _drift(f.drift),
            _tasks(f.tasks),
            _effects(f.effects),
            _lessons(f.lessons),
            _work(f.work),
            _summary(f.summary),
            _footer(f.record),
        )
    )
    h: Headline = f.headline
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>overnight {e(h.run_id)}: {e(h.stop_reason)}</title>"
        f"<style>{_CSS}</style></head>\n<body>{body}</body></html>\n"
    )


def render_html(r: TerminalResult, extras: ReportExtras | None = None) -> str:
    """The whole page. ``extras`` adds the lessons and places the notice band."""
    return render_html_facts(report_facts(r, extras))
