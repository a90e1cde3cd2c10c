"""The gates on the report's first screen: per gate, its count on the base commit, after the
night's commits and the new findings (none for anything landed), in the Markdown and in the
page's verdict; a gate that could not read the base commit says it judged nothing; a night
without gates shows none."""

from __future__ import annotations

from html import escape
from pathlib import Path

from overnight.report.facts import GATE_NEW_LISTED, GATES_SAID, report_facts
from overnight.report.html import render_html, render_html_facts
from overnight.report.markdown import render_markdown, render_markdown_facts
from overnight.store.result import GateBlock, TerminalResult
from tests.report.runs import RUFF_GATE, UNREADABLE_GATE, gates_night
from tests.report.test_facts import assert_both_show_every_fact, load

RUFF_LINE = (
    "`ruff`: 3 finding(s) on the base commit, 1 after the night's commits, 0 new, 2 removed."
)
FORMAT_LINE = (
    "`ruff-format`: 2 file(s) not formatted on the base commit, 1 after the night's commits, "
    "0 new, 1 removed."
)
JUDGED_NOTHING = "judged nothing: its output on the base commit could not be read"


def first_screen(md: str) -> str:
    """The Markdown before its first section."""
    return md.split("\n## ", 1)[0]


def verdict(page: str) -> str:
    """The page's verdict header."""
    return page.split("</header>", 1)[0]


def test_the_night_judged_by_two_gates_landed_its_fix(gates_run: Path) -> None:
    r = load(gates_run)
    assert r.stop_reason == "GOAL_MET" and [v.id for v in r.verified] == ["fix"]
    assert [(g.name, g.kind, g.base, g.landed, g.new, g.removed) for g in r.gates] == [
        ("ruff", "findings", 3, 1, [], 2),
        ("ruff-format", "format", 2, 1, [], 1),
    ]


def test_each_gate_is_on_the_first_screen_of_the_markdown(gates_run: Path) -> None:
    md = render_markdown(load(gates_run))
    top = first_screen(md)
    assert f"{GATES_SAID}\n\n- {RUFF_LINE}\n- {FORMAT_LINE}\n" in top
    assert md.count("`ruff`:") == 1  # said once, up there


def test_each_gate_is_in_the_verdict_of_the_page(gates_run: Path) -> None:
    page = render_html(load(gates_run))
    head = verdict(page)
    assert f'<p class="muted">{escape(GATES_SAID)}</p>' in head
    for name, kind, line in (
        ("ruff", "findings", RUFF_LINE),
        ("ruff-format", "format", FORMAT_LINE),
    ):
        said = escape(line.split(": ", 1)[1])
        assert f'<li data-gate="{name}" data-kind="{kind}"><code>{name}</code>: {said}</li>' in head
    assert page.count('id="gates"') == 1


def test_every_gate_fact_is_in_both_renderings(gates_run: Path) -> None:
    shared = assert_both_show_every_fact(report_facts(load(gates_run)))
    assert {"ruff", "ruff-format", GATES_SAID} <= set(shared)


def test_a_gate_that_could_not_read_the_base_commit_judged_nothing(tmp_path: Path) -> None:
    run = gates_night(tmp_path, [RUFF_GATE, UNREADABLE_GATE])
    r = load(run)
    assert [g.name for g in r.gates] == ["ruff", "lint-json"]
    why = r.gates[1].unreadable
    assert why.startswith("ruff-json: expected ") and "no JSON here" in why

    top = first_screen(render_markdown(r))
    assert f"- {RUFF_LINE}\n" in top
    assert f"- `lint-json`: {JUDGED_NOTHING}: `{why}`\n" in top
    lint_line = next(line for line in top.splitlines() if "`lint-json`" in line)
    assert "new" not in lint_line and "base commit," not in lint_line
    head = verdict(render_html(r))
    assert f"<code>lint-json</code>: {escape(JUDGED_NOTHING)}: <code>{escape(why)}</code>" in head
    assert_both_show_every_fact(report_facts(r))


def test_a_night_without_gates_shows_no_gates(full_run: Path) -> None:
    r = load(full_run)
    assert r.gates == []
    facts = report_facts(r)
    assert facts.headline.gates == [] and facts.headline.gates_said == ""
    md, page = render_markdown_facts(facts), render_html_facts(facts)
    assert "gates" not in md.lower() and "finding(s)" not in md
    assert 'id="gates"' not in page and "repository's own checks" not in page


def test_without_a_landed_commit_a_gate_says_only_the_base(tmp_path: Path) -> None:
    r = load(gates_night(tmp_path, [RUFF_GATE], lands=False))
    assert [p.id for p in r.plan.parked] == ["fix"] and r.verified == []
    md = render_markdown(r)
    assert "- `ruff`: 3 finding(s) on the base commit; no commit landed.\n" in first_screen(md)
    assert "after the night's commits" not in md


def test_new_findings_are_listed_one_line_each_as_text(gates_run: Path) -> None:
    """A result whose gate holds new findings (nothing the harness lands has any) lists them,
    each one line of code, never markup; beyond the first few it counts them."""
    forged = [f"src/a{n}.py:1: F401 `os` imported\n## but unused <b>x</b>" for n in range(12)]
    gate = GateBlock(name="ruff", kind="findings", base=0, landed=12, new=forged)
    r: TerminalResult = load(gates_run).model_copy(update={"gates": [gate]})
    top = first_screen(render_markdown(r))
    assert "- `ruff`: 0 finding(s) on the base commit, 12 after the night's commits, 12 new" in top
    assert "  - new: ``src/a0.py:1: F401 `os` imported ## but unused <b>x</b>``" in top
    assert top.count("  - new: ") == GATE_NEW_LISTED
    assert f"  - and {12 - GATE_NEW_LISTED} more new (result.json lists them all)" in top
    assert "\n## but unused" not in top
    head = verdict(render_html(r))
    assert "<code>src/a0.py:1: F401 `os` imported ## but unused &lt;b&gt;x&lt;/b&gt;</code>" in head
    assert "<b>" not in head
    assert_both_show_every_fact(report_facts(r))
