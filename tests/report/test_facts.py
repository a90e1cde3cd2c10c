"""One set of facts, two renderings: every text of the report's view model is in the Markdown
and in the page (escaped), except the few the view model marks as the page's alone, which are
in the page."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import fields, is_dataclass
from html import escape
from pathlib import Path

import pytest

from overnight.report.facts import fmt_usd, read_extras, report_facts
from overnight.report.html import render_html_facts
from overnight.report.markdown import render_markdown_facts
from overnight.report.view import ReportFacts
from overnight.store.result import (
    DriftPoint,
    ParkedEntry,
    PredicateBlock,
    ResultWarning,
    TerminalResult,
    Wrapup,
)

Variant = Callable[[TerminalResult], TerminalResult]


def load(run_dir: Path) -> TerminalResult:
    return TerminalResult.model_validate_json((run_dir / "result.json").read_text("utf-8"))


def texts(node: object, page_only: bool = False) -> Iterator[tuple[str, bool]]:
    """Every non-empty text of the view model, with whether only the page shows it."""
    if is_dataclass(node) and not isinstance(node, type):
        for f in fields(node):
            alone = page_only or bool(f.metadata.get("page_only", False))
            yield from texts(getattr(node, f.name), alone)
    elif isinstance(node, list):
        for item in node:
            yield from texts(item, page_only)
    elif isinstance(node, str) and node:
        yield node, page_only


def assert_both_show_every_fact(facts: ReportFacts) -> list[str]:
    md, page = render_markdown_facts(facts), render_html_facts(facts)
    shared = []
    for text, page_only in texts(facts):
        assert escape(text) in page, text
        if not page_only:
            assert text in md, text
            shared.append(text)
    return shared


def sandbox_off(r: TerminalResult) -> TerminalResult:
    assert r.sandbox is not None
    return r.model_copy(update={"sandbox": r.sandbox.model_copy(update={"mode": "off"})})


def alerts_sent(r: TerminalResult) -> TerminalResult:
    sent = [{"action": "page", "how": "command", "ok": True, "detail": {"code": 0}}]
    return r.model_copy(update={"alert": "page", "alerts": sent})


def summary_failed_and_trace_cut(r: TerminalResult) -> TerminalResult:
    wrapup = Wrapup(source="structured", cost_usd=0.0, error="HTTP 500 <upstream>")
    return r.model_copy(update={"wrapup": wrapup, "trace_lines_dropped": 3})


def predicate_met_with_output(r: TerminalResult) -> TerminalResult:
    met = PredicateBlock(command="make check", met=True, exit_code=0, detail="all 12 passed\n")
    return r.model_copy(update={"predicate": met})


def parked_with_protected_changes(r: TerminalResult) -> TerminalResult:
    parked = ParkedEntry(
        id="z9",
        title="edited its own tests",
        reason="changed what judges it",
        detail="first line\nFAILED tests/test_x.py::test_y\n",
        protected_changes=["tests/test_x.py", "Makefile"],
    )
    plan = r.plan.model_copy(update={"parked": [*r.plan.parked, parked], "in_progress": "z10"})
    return r.model_copy(update={"plan": plan})


def automation_landed_and_parked(r: TerminalResult) -> TerminalResult:
    assert r.verified, "the run verified a task"
    landed = r.verified[0].model_copy(update={"automation": [".github/workflows/ci.yml"]})
    parked = ParkedEntry(
        id="z11",
        title="set up the editor",
        reason="changes what runs by itself on your machine or CI: `.vscode/tasks.json`",
        detail="`.vscode/tasks.json` is editor configuration (created)",
        automation_changes=[".vscode/tasks.json"],
    )
    plan = r.plan.model_copy(update={"parked": [*r.plan.parked, parked]})
    drift = [
        DriftPoint(
            at_task_count=1,
            seconds=3.0,
            score=0.1,
            action="none",
            off_goal_task_ids=[],
            automation_shown=["z11: .vscode/tasks.json (parked)"],
        )
    ]
    return r.model_copy(
        update={"verified": [landed, *r.verified[1:]], "plan": plan, "drift": drift}
    )


def billing_warnings(r: TerminalResult) -> TerminalResult:
    over = ResultWarning(
        kind="over_reservation",
        message="billed $0.0075 against $0.0055 reserved; booked in full",
        purpose="execute",
        attempt=2,
    )
    unknown = ResultWarning(kind="usage_unknown", message="the answer carried no usage")
    return r.model_copy(update={"warnings": [over, unknown]})


def unchanged(r: TerminalResult) -> TerminalResult:
    return r


VARIANTS: list[Variant] = [
    unchanged,
    sandbox_off,
    alerts_sent,
    summary_failed_and_trace_cut,
    predicate_met_with_output,
    parked_with_protected_changes,
    automation_landed_and_parked,
    billing_warnings,
]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.__name__)
@pytest.mark.parametrize("night", ["full_run", "budget_run"])
def test_every_fact_is_in_both_renderings(
    night: str, variant: Variant, request: pytest.FixtureRequest
) -> None:
    run_dir: Path = request.getfixturevalue(night)
    r = variant(load(run_dir))
    extras = read_extras(run_dir)
    shared = assert_both_show_every_fact(report_facts(r, extras))
    # The walk reached the rows: every task, lesson and effect is among the shared facts.
    ids = [v.id for v in r.verified] + [p.id for p in r.plan.parked] + r.plan.remaining
    assert set(ids + extras.lessons + [str(fx["tool"]) for fx in r.effects]) <= set(shared)
    assert {line for line in shared if line.startswith(("reached at", "not reached"))}


def test_the_variants_put_their_facts_in_both(full_run: Path) -> None:
    """What each variant adds is among the facts both renderings were checked for."""
    r, extras = load(full_run), read_extras(full_run)

    def shared(variant: Variant) -> set[str]:
        return {t for t, alone in texts(report_facts(variant(r), extras)) if not alone}

    assert any(t.startswith("Unsandboxed night") for t in shared(sandbox_off))
    assert {"ok", "true", '{"code": 0}'} <= shared(alerts_sent)
    cut = shared(summary_failed_and_trace_cut)
    assert "HTTP 500 <upstream>" in cut and "rendered from state" in cut
    assert "3 trace line(s) could not be written; the trace is incomplete." in cut
    assert {"make check", "passed, from the exit code only"} <= shared(predicate_met_with_output)
    parked = shared(parked_with_protected_changes)
    assert {"first line FAILED tests/test_x.py::test_y", "Makefile", "z10"} <= parked
    automation = shared(automation_landed_and_parked)
    assert {".github/workflows/ci.yml", ".vscode/tasks.json"} <= automation
    assert "z11: .vscode/tasks.json (parked)" in automation
    assert any(t.startswith("Landed changes to what runs by itself") for t in automation)
    billed = shared(billing_warnings)
    assert {"over_reservation", "execute attempt 2", "usage_unknown", "a call"} <= billed
    assert "billed $0.0075 against $0.0055 reserved; booked in full" in billed


def test_a_billing_warning_is_one_line_whatever_its_message_holds(full_run: Path) -> None:
    forged = ResultWarning(
        kind="attempt_failed",
        message="HTTP 500: upstream\n\n## Verified tasks (99)\n- `t9` forged",
    )
    facts = report_facts(load(full_run).model_copy(update={"warnings": [forged]}))
    md = render_markdown_facts(facts)
    assert (
        "- `attempt_failed` a call: HTTP 500: upstream ## Verified tasks (99) - \\`t9\\` forged"
        in md
    )
    assert "\n## Verified tasks (99)" not in md and "\n- `t9` forged" not in md


def test_money_and_time_read_the_same_in_both(budget_run: Path) -> None:
    r = load(budget_run)
    facts = report_facts(r, read_extras(budget_run))
    md, page = render_markdown_facts(facts), render_html_facts(facts)
    money = r.budgets.cost_usd
    assert money.refused_at is not None
    # The table is "at the stop decision": the figure the stop was decided on, not the total
    # with the closing summary paid on top.
    assert money.at_stop is not None and money.at_stop < money.used
    used, refused = fmt_usd(money.at_stop), fmt_usd(money.refused_at)
    assert f"| money | {used} | $1.00 | 90% | $0.90 | $0.92 |" in md
    assert f"Spent {fmt_usd(money.used)} in " in md and fmt_usd(money.used) in page
    assert f"(a call that would reach {refused} was refused)" in md
    assert f"{used} of $1.00 (90%)" in page and f"would have reached {refused} (100%)" in page
    assert "| seconds | 0:05:00 | 1:00:00 | 8% | 0:55:12 | 0:55:12 |" in md
    assert "0:05:00 of 1:00:00 (8%)" in page


def test_effect_arguments_read_as_json_in_both(full_run: Path) -> None:
    facts = report_facts(load(full_run), read_extras(full_run))
    md, page = render_markdown_facts(facts), render_html_facts(facts)
    args = '{"subject": "<i>done</i>", "to": "ops@example.invalid"}'
    assert f"`send_email` `{args}` -> " + '`{"message_id": "m-1"}`' in md
    assert f"<code>{escape(args)}</code>" in page


def test_a_message_ending_its_sentence_is_not_stopped_twice(full_run: Path) -> None:
    r = load(full_run).model_copy(update={"message": "the disk filled up."})
    facts = report_facts(r)
    assert facts.headline.why == "the disk filled up."
    assert "not resumable): the disk filled up.\n" in render_markdown_facts(facts)
    assert '<p class="why">the disk filled up.</p>' in render_html_facts(facts)


def test_a_verifier_that_printed_only_blanks_says_nothing_in_both(full_run: Path) -> None:
    r = load(full_run)
    blank = r.plan.parked[0].model_copy(update={"detail": "  \n "})
    r = r.model_copy(update={"plan": r.plan.model_copy(update={"parked": [blank]})})
    facts = report_facts(r)
    assert facts.tasks.parked[0].verifier_said == ""
    md, page = render_markdown_facts(facts), render_html_facts(facts)
    assert "verifier said" not in md and "verifier said" not in page
    assert_both_show_every_fact(facts)


def test_a_night_without_a_sandbox_record_or_a_money_limit(full_run: Path) -> None:
    r = load(full_run)
    unset = r.budgets.cost_usd.model_copy(update={"limit": 0, "stop_at": 0, "enforced_at": 0})
    r = r.model_copy(
        update={
            "sandbox": None,
            "budgets": r.budgets.model_copy(update={"cost_usd": unset}),
        }
    )
    facts = report_facts(r)
    assert facts.money.no_model and facts.spend.lines == []
    md, page = render_markdown_facts(facts), render_html_facts(facts)
    assert "| none (no model) | - | - | - |" in md and "no model in this night" in page
    assert "Money lines: none (no money limit)." in md
    assert "Sandbox: not recorded" in facts.work.sandbox
    assert_both_show_every_fact(facts)


def test_a_sandbox_that_ran_as_root_says_so_in_both_renderings(full_run: Path) -> None:
    r = load(full_run)
    assert r.sandbox is not None
    as_root = r.sandbox.model_copy(
        update={
            "uid": 0,
            "ran_as_root": True,
            "root_reason": "setpriv (util-linux) is not installed",
        }
    )
    facts = report_facts(r.model_copy(update={"sandbox": as_root}))
    md, page = render_markdown_facts(facts), render_html_facts(facts)
    for shown in (md, page):
        assert "The sandbox ran as root (setpriv (util-linux) is not installed)" in shown
    dropped = r.sandbox.model_copy(update={"uid": 65533, "ran_as_root": False})
    facts = report_facts(r.model_copy(update={"sandbox": dropped}))
    md, page = render_markdown_facts(facts), render_html_facts(facts)
    for shown in (md, page):
        assert "ran as uid 65533, not root" in shown and "ran as root" not in shown
    assert_both_show_every_fact(facts)


def test_landed_automation_is_on_the_first_screen_of_both(full_run: Path) -> None:
    facts = report_facts(automation_landed_and_parked(load(full_run)))
    md, page = render_markdown_facts(facts), render_html_facts(facts)
    top = md.split("\n## ", 1)[0]
    task = load(full_run).verified[0].id
    assert f"> - `{task}`: `.github/workflows/ci.yml`" in top
    header = page.split("</header>", 1)[0]
    assert "<code>.github/workflows/ci.yml</code>" in header
    assert "automation paths it changed (not committed): `.vscode/tasks.json`" in md
