"""``overnight report --html``: one self-contained page carrying the facts of a finished night,
every untrusted string escaped; and the Markdown carrying the same facts in text."""

from __future__ import annotations

import json
import re
import shutil
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from overnight.cli.handlers import EXIT_NO_RESULT
from overnight.cli.main import main
from overnight.cli.parser import EXIT_USAGE
from overnight.report.facts import fmt_usd, read_extras, read_lessons
from overnight.report.html import render_html
from overnight.report.markdown import render_markdown
from overnight.store.journal import read_journal
from overnight.store.result import TerminalResult
from tests.helpers.nights import make_spec, run_night
from tests.report.runs import (
    EVIL_LESSON,
    EVIL_SUMMARY,
    EVIL_TITLE,
    EVIL_VERIFY_OUTPUT,
    PARKED,
    PARKED_REASON,
    PRUNED,
    VERIFIED,
)

Element = tuple[str, dict[str, str]]


class Elements(HTMLParser):
    """Every start tag of a document with its attributes, in order."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[Element] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def with_class(self, tag: str, cls: str) -> list[dict[str, str]]:
        return [a for t, a in self.found if t == tag and cls in a.get("class", "").split()]


def load(run_dir: Path) -> TerminalResult:
    return TerminalResult.model_validate_json((run_dir / "result.json").read_text("utf-8"))


def page(run_dir: Path) -> str:
    return render_html(load(run_dir), read_extras(run_dir))


def markdown(run_dir: Path) -> str:
    return render_markdown(load(run_dir), read_extras(run_dir))


def key_facts(r: TerminalResult, lessons: list[str]) -> list[str]:
    """What both renderings must say, as plain text."""
    facts = [r.ending, r.stop_reason, r.status, r.message, r.branch.name]
    facts.append(str(r.exit_code))
    facts += [v.id for v in r.verified] + [(v.commit or "")[:12] for v in r.verified]
    facts += [p.id for p in r.plan.parked] + [p.reason for p in r.plan.parked]
    facts += [p.id for p in r.plan.pruned] + list(r.plan.remaining)
    facts += [r.plan.in_progress] if r.plan.in_progress else []
    facts += [str(e.get("state")) for e in r.effects] + [str(e.get("tool")) for e in r.effects]
    facts += lessons
    facts += [f"{d.score:.2f}" for d in r.drift]
    if r.spend.cost_per_verified_task is not None:
        facts.append(fmt_usd(r.spend.cost_per_verified_task))
    facts += [line.strip() for line in r.branch.diff_stat.splitlines() if line.strip()]
    return facts


# -- the facts of a night with everything in it -------------------------------------------------


def test_verdict_comes_first_with_ending_class_exit_code_and_why(full_run: Path) -> None:
    r = load(full_run)
    assert (r.ending, r.status, r.exit_code, r.resumable) == (
        "QUEUE_EMPTY_GOAL_UNMET",
        "FAILURE",
        3,
        False,
    )
    text = page(full_run)
    verdict = text.index('id="verdict"')
    assert verdict < text.index('id="budgets"') < text.index('id="summary"')
    head = text[verdict : text.index("</header>")]
    assert "QUEUE_EMPTY_GOAL_UNMET" in head and "FAILURE" in head
    assert "<dt>exit code</dt><dd>3</dd>" in head
    assert "<dt>resumable</dt><dd>no</dd>" in head
    assert '<p class="why">the queue drained, goal unmet.</p>' in head


def test_every_task_commit_reason_effect_and_lesson_is_on_the_page(full_run: Path) -> None:
    r = load(full_run)
    assert [v.id for v in r.verified] == VERIFIED
    assert [p.id for p in r.plan.parked] == PARKED
    assert [p.id for p in r.plan.pruned] == PRUNED
    assert {e["state"] for e in r.effects} == {"confirmed", "failed"}
    lessons = read_lessons(full_run)
    assert EVIL_LESSON in lessons and len(lessons) >= len(VERIFIED)
    text = page(full_run)
    for fact in key_facts(r, lessons):
        assert escape(fact) in text, fact
    rows = Elements(text).found
    tasks = [a["data-task"] for t, a in rows if t == "tr" and "data-task" in a]
    assert tasks == VERIFIED + PARKED + PRUNED
    commits = [a["title"] for t, a in rows if t == "code" and a.get("title")]
    assert commits == [v.commit for v in r.verified]
    assert PARKED_REASON in text
    assert "None: no task was left in flight." in text
    assert "written by the model" in text


def test_drift_history_is_plotted_with_the_prune_and_halt_lines(full_run: Path) -> None:
    r = load(full_run)
    assert [(d.score, d.action) for d in r.drift] == [(0.4, "prune"), (0.1, "none")]
    doc = Elements(page(full_run))
    thresholds = {a["data-threshold"] for a in doc.with_class("line", "threshold")}
    assert thresholds == {"0.3", "0.5"}
    [curve] = doc.with_class("polyline", "drift-curve")
    assert len(curve["points"].split()) == len(r.drift) == 2
    ys = [float(p.split(",")[1]) for p in curve["points"].split()]
    assert ys[0] < ys[1]  # 0.4 is drawn above 0.1 (SVG y grows downwards)


def test_the_spend_curve_has_one_point_per_model_call(full_run: Path) -> None:
    r = load(full_run)
    spends = [rec for rec in read_journal(full_run / "spend.jsonl") if rec["kind"] == "spend"]
    doc = Elements(page(full_run))
    [curve] = doc.with_class("polyline", "spend-curve")
    points = [tuple(map(float, p.split(","))) for p in curve["points"].split()]
    assert len(points) == r.spend.model_calls == len(spends) == 14
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    assert xs == sorted(xs) and ys == sorted(ys, reverse=True)  # time and money only grow
    bands = {a["data-fraction"] for a in doc.with_class("line", "band")}
    assert bands == {"0.7", "0.9", "1"}
    # The spend stayed far below the limit: a second chart zooms in on the same points.
    [zoomed] = doc.with_class("polyline", "spend-curve-zoom")
    assert len(zoomed["points"].split()) == len(points)
    assert len(doc.with_class("circle", "spend-dot")) == 2 * len(points)  # a dot per call, twice


def test_budgets_are_gauges_with_their_lines_marked(full_run: Path) -> None:
    doc = Elements(page(full_run))
    budgets = [a["data-budget"] for t, a in doc.found if t == "div" and "data-budget" in a]
    assert budgets == ["cost_usd", "tokens", "steps", "seconds"]
    # money and seconds have limits in this night: notice (money only), stop, enforced
    assert len(doc.with_class("svg", "gauge-bar")) == 2
    assert len(doc.with_class("line", "mark-notice")) == 1
    assert len(doc.with_class("line", "mark-stop")) == 2
    assert len(doc.with_class("line", "mark-enforced")) == 2
    assert doc.with_class("line", "mark-refused") == []


def _styles(css: str) -> dict[str, str]:
    return {
        m.group(1): m.group(2).strip() for m in re.finditer(r"(\.[\w. -]+?)\s*\{([^}]*)\}", css)
    }


def test_a_money_line_is_drawn_the_same_way_in_the_gauge_the_chart_and_the_legend(
    full_run: Path,
) -> None:
    text = page(full_run)
    doc = Elements(text)
    styles = _styles(text[text.index("<style>") : text.index("</style>")])

    def meaning(attrs: dict[str, str]) -> str:
        [cls] = [c for c in attrs["class"].split() if c.startswith("line-")]
        return cls

    # The gauge's stop mark and the chart's finish band are the same amount of money.
    stop_mark = meaning(doc.with_class("line", "mark-stop")[0])
    [finish_band] = [a for a in doc.with_class("line", "band") if a["data-fraction"] == "0.9"]
    assert meaning(finish_band) == stop_mark
    notice_band = next(a for a in doc.with_class("line", "band") if a["data-fraction"] == "0.7")
    assert meaning(notice_band) == meaning(doc.with_class("line", "mark-notice")[0])
    # Only the meaning classes carry a stroke, one distinct style per meaning, and each
    # meaning drawn anywhere has its swatch in a legend.
    stroked = {sel: rule for sel, rule in styles.items() if "stroke:" in rule}
    for sel in stroked:
        assert not sel.startswith((".mark-", ".band-")), sel
    lines = {sel: rule for sel, rule in stroked.items() if sel.startswith(".line-")}
    assert len(set(lines.values())) == len(lines) >= 4
    drawn = {meaning(a) for a in doc.with_class("line", "mark") + doc.with_class("line", "band")}
    swatches = {meaning(a) for a in doc.with_class("span", "swatch")}
    assert drawn <= swatches


# -- a night that ran out of money ---------------------------------------------------------------


def test_budget_exhausted_night(budget_run: Path) -> None:
    r = load(budget_run)
    assert (r.stop_reason, r.status, r.exit_code, r.resumable) == (
        "BUDGET_EXHAUSTED:money",
        "PARTIAL",
        2,
        True,
    )
    assert r.plan.in_progress is not None and r.budgets.cost_usd.refused_at is not None
    text = page(budget_run)
    for fact in key_facts(r, read_lessons(budget_run)):
        assert escape(fact) in text, fact
    assert f"<code>{r.plan.in_progress}</code> was in flight when the run stopped" in text
    assert "<dt>exit code</dt><dd>2</dd>" in text and "<dt>resumable</dt><dd>yes</dd>" in text
    doc = Elements(text)
    assert len(doc.with_class("line", "mark-refused")) == 1
    [curve] = doc.with_class("polyline", "spend-curve")
    assert len(curve["points"].split()) == r.spend.model_calls
    assert doc.with_class("polyline", "spend-curve-zoom") == []  # the spend reached the lines
    assert "90% (finish, $0.90): reached at" in text
    assert "100% (limit, $1.00): not reached" in text


# -- untrusted text and self-containment ---------------------------------------------------------


@pytest.mark.parametrize("evil", [EVIL_TITLE, EVIL_VERIFY_OUTPUT, EVIL_LESSON, EVIL_SUMMARY])
def test_untrusted_text_is_escaped_never_markup(full_run: Path, evil: str) -> None:
    text = page(full_run)
    assert evil not in text
    assert escape(evil) in text


def test_the_page_has_no_script_and_references_nothing_outside_itself(
    full_run: Path, budget_run: Path
) -> None:
    for run_dir in (full_run, budget_run):
        text = page(run_dir)
        lowered = text.lower()
        for needle in (
            "http://",
            "https://",
            "<link",
            "<script",
            "<img",
            "<iframe",
            "url(",
            "@import",
        ):
            assert needle not in lowered, needle
        tags = Elements(text).found
        assert {t for t, _ in tags} <= {
            "html", "head", "meta", "title", "style", "body", "header", "section", "footer",
            "h1", "h2", "h3", "p", "span", "strong", "code", "pre", "br", "div", "dl", "dt",
            "dd", "ul", "ol", "li", "table", "tr", "th", "td", "details", "summary",
            "svg", "rect", "line", "polyline", "circle", "text",
        }  # fmt: skip
        assert not [a for _, a in tags if "src" in a or "href" in a]
        assert not [a for _, a in tags if any(k.startswith("on") for k in a)]
        csp = [a for t, a in tags if t == "meta" and a.get("http-equiv")]
        assert csp and "default-src 'none'" in csp[0]["content"]


# -- the Markdown says the same things -----------------------------------------------------------


@pytest.mark.parametrize("night", ["full_run", "budget_run"])
def test_markdown_carries_the_same_key_facts(night: str, request: pytest.FixtureRequest) -> None:
    run_dir: Path = request.getfixturevalue(night)
    r = load(run_dir)
    md = markdown(run_dir)
    for fact in key_facts(r, read_lessons(run_dir)):
        assert fact in md, fact
    assert f"exit {r.exit_code}" in md
    assert "Above 0.3 the off-goal tasks are pruned; above 0.5 the run halts" in md
    assert "Money lines: notice" in md and "(70%," in md and "(90%," in md and "(100%," in md
    assert "Spend curve (time, cumulative), one point per model call:" in md
    curve = md.split("one point per model call: ", 1)[1].split("\n", 1)[0]
    assert curve.count("$") == r.spend.model_calls
    if r.plan.in_progress:
        assert f"In flight when the run stopped (resume verifies it): `{r.plan.in_progress}`" in md
    else:
        assert "In flight when the run stopped: none." in md


def test_markdown_keeps_its_existing_sections(full_run: Path) -> None:
    md = markdown(full_run)
    for heading in (
        "## Summary",
        "## Budgets (at the stop decision)",
        "## Verified tasks (5)",
        "## Parked tasks (1)",
        "## Pruned for drift",
        "## External effects (2)",
        "## Drift history",
        "## Lessons (",
        "## Work",
    ):
        assert heading in md
    assert "| money |" in md and "| stop at | enforced at |" in md


# -- the command --------------------------------------------------------------------------------


def copy_run(run_dir: Path, to: Path) -> Path:
    to.mkdir()
    for name in ("run.json", "spec.json", "result.json", "checkpoint.json", "spend.jsonl"):
        shutil.copy2(run_dir / name, to / name)
    return to


def test_cli_html_writes_report_html_in_the_run_dir_or_out(
    full_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(full_run, tmp_path / "run")
    assert main(["report", str(run), "--html"]) == 0
    assert capsys.readouterr().out.strip() == str(run / "report.html")
    assert (run / "report.html").read_text("utf-8") == page(run)
    out = tmp_path / "elsewhere.html"
    assert main(["report", str(run), "--html", "--out", str(out)]) == 0
    assert out.read_text("utf-8") == page(run)


def test_cli_markdown_stays_the_default(
    full_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(full_run, tmp_path / "run")
    assert main(["report", str(run)]) == 0
    default = capsys.readouterr().out
    assert main(["report", str(run), "--md"]) == 0
    assert capsys.readouterr().out == default == markdown(run)
    assert not (run / "report.html").exists()


def test_cli_refuses_both_formats_and_reports_no_result(
    full_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(full_run, tmp_path / "run")
    with pytest.raises(SystemExit) as refused:
        main(["report", str(run), "--md", "--html"])
    assert refused.value.code == EXIT_USAGE
    (run / "result.json").unlink()
    assert main(["report", str(run), "--html"]) == EXIT_NO_RESULT
    assert not (run / "report.html").exists()
    capsys.readouterr()


def test_an_unreadable_checkpoint_only_loses_the_lessons(
    full_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_run(full_run, tmp_path / "run")
    (run / "checkpoint.json").write_text('{"kind": "overnight-checkpoint", "body": "', "utf-8")
    (run / "spec.json").write_text("not json", "utf-8")
    assert read_lessons(run) == []
    assert main(["report", str(run), "--html"]) == 0
    text = (run / "report.html").read_text("utf-8")
    assert "Lessons (0)" in text and "No lessons were recorded." in text
    assert "QUEUE_EMPTY_GOAL_UNMET" in text
    capsys.readouterr()


def test_the_notice_line_follows_the_spec(full_run: Path, tmp_path: Path) -> None:
    run = copy_run(full_run, tmp_path / "run")
    spec = json.loads((run / "spec.json").read_text("utf-8"))
    spec["budget"]["notice_at"] = 0.5
    (run / "spec.json").write_text(json.dumps(spec), "utf-8")
    doc = Elements(page(run))
    assert {a["data-fraction"] for a in doc.with_class("line", "band")} == {"0.5", "0.9", "1"}
    assert "notice $5.00 (50%, not reached)" in markdown(run)


def test_a_night_without_model_calls(repo: Path, tmp_path: Path) -> None:
    tasks = [{"id": "c1", "title": "touch", "command": "touch c1", "verify": "test -f c1"}]
    spec = make_spec(repo, tasks=tasks, predicate="test -f c1", model=False)
    rd, r = run_night(spec, tmp_path / "run")
    assert r.ending == "GOAL_MET" and r.spend.model_calls == 0
    text = page(rd.path)
    assert "no model call was made" in text and "no drift check ran" in text
    assert Elements(text).with_class("polyline", "spend-curve") == []
    assert "rendered from state" in text
    assert "Spend curve: no model call was made." in markdown(rd.path)


def test_a_night_without_model_calls_draws_no_empty_chart(repo: Path, tmp_path: Path) -> None:
    from tests.helpers.nights import command_task

    spec = make_spec(
        repo, tasks=[command_task("c1", "true", "true")], predicate="false", model=False
    )
    _rd, r = run_night(spec, tmp_path / "run")
    page = render_html(r)
    spend = page.split('id="spend"', 1)[1].split("</section>", 1)[0]
    assert "no model call was made" in spend and "<svg" not in spend


def test_lessons_show_code_spans_and_via_is_explained(full_run: Path) -> None:
    from overnight.report.facts import ReportExtras

    result = load(full_run)
    extras = ReportExtras(lessons=["tests run with `python3 -m unittest` here", "a ` lone mark"])
    page = render_html(result, extras)
    assert "<code>python3 -m unittest</code>" in page and "`python3" not in page
    assert "a ` lone mark" in page
    assert "verified right after it ran" in page
