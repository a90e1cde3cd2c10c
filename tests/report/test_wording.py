"""The report's short lines say what they mean: the alert, how a task was verified, a verified
task that changed nothing, and which total holds the closing summary."""

from __future__ import annotations

from html import escape
from pathlib import Path

import pytest
from rich.console import Console

from overnight.cli.output import finish_output
from overnight.cli.panel import render_panel
from overnight.cli.status import read_status, render_status
from overnight.config.spec import parse_spec
from overnight.report.html import render_html
from overnight.report.markdown import render_markdown
from overnight.store.result import TerminalResult, VerifiedTask
from tests.helpers.nights import command_task, make_repo, run_night, spec_data
from tests.report.test_facts import load


def with_verified(r: TerminalResult, *tasks: VerifiedTask) -> TerminalResult:
    return r.model_copy(update={"verified": list(tasks)})


def test_a_verified_task_without_a_change_is_worded_as_such(full_run: Path) -> None:
    r = with_verified(
        load(full_run),
        VerifiedTask(id="t_noop", title="already fine", commit=None, attempts=1, via="lap"),
        VerifiedTask(id="t_fix", title="fix it", commit="ab" * 20, attempts=2, via="resume"),
    )
    md, page = render_markdown(r), render_html(r)
    noop = next(line for line in md.splitlines() if "t_noop" in line)
    assert "verified, nothing to commit" in noop and "commit `-`" not in noop
    assert "via lap" not in md and "verified right after it ran" in noop
    fix = next(line for line in md.splitlines() if "t_fix" in line)
    assert f"commit `{'ab' * 6}`" in fix and "verified there, without running it again" in fix
    assert "verified, nothing to commit" in page


def test_the_alert_line_says_which_route_ran_and_how(full_run: Path) -> None:
    sent = {"action": "alert", "via": "command", "ok": True, "detail": "sent"}
    r = load(full_run).model_copy(update={"alert": "alert", "alerts": [sent]})
    md = render_markdown(r)
    assert "Alert: alert." not in md
    assert 'Alerted: the "alert" route (command) was sent.' in md
    failed = {"action": "page", "via": "webhook hooks.example", "ok": False, "detail": "HTTP 500"}
    md = render_markdown(load(full_run).model_copy(update={"alert": "page", "alerts": [failed]}))
    assert 'Alerted: the "page" route (webhook hooks.example) failed: HTTP 500.' in md
    quiet = render_markdown(load(full_run).model_copy(update={"alert": "none", "alerts": []}))
    assert "Alert: none (this ending calls for no alert)." in quiet


def test_one_total_everywhere_with_the_closing_summary_named(
    full_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = load(full_run)
    assert r.wrapup.cost_usd > 0
    total, wrapup = f"${r.spend.total_usd:.4f}", f"${r.wrapup.cost_usd:.4f}"
    before = f"${r.spend.total_usd - r.wrapup.cost_usd:.4f}"
    named = f"{total} in total in {r.spend.model_calls} model call(s), the closing summary's "
    md, page = render_markdown(r), render_html(r)
    assert f"Spent {named}{wrapup} included (before it: {before})" in md
    assert escape(f"Spent {named}{wrapup} included (before it: {before})") in page
    finish_output(r, as_json=False)
    out = capsys.readouterr().out
    assert f"spent:   {named}{wrapup} included (before it: {before})" in out
    status = render_status(read_status(full_run))
    assert (
        f"${r.spend.total_usd:.4f}" in status
        and f"closing summary's ${r.wrapup.cost_usd:.4f} included" in status
    )


def test_a_night_without_a_model_shows_no_money_gauge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path / "repo")
    data = spec_data(
        repo, model=False, predicate="true", tasks=[command_task("c1", "true", "true")]
    )
    del data["budget"]["usd"]
    _, r = run_night(parse_spec(data, repo), tmp_path / "run")
    finish_output(r, as_json=False)
    status = read_status(tmp_path / "run")
    panel = Console(width=120, record=True)
    panel.print(render_panel(status))
    md, page = render_markdown(r), render_html(r)
    for where, text in (
        ("stdout", capsys.readouterr().out),
        ("status", render_status(status)),
        ("panel", panel.export_text()),
        ("markdown", md),
    ):
        assert "$0.00" not in text, where
        assert "a night without a model spends no money" in text, where
    assert "| money |" not in md and "Money lines" not in md
    assert 'data-budget="cost_usd"' not in page and "$0.00" not in page


def test_the_report_says_whether_the_worktree_is_still_there(full_run: Path) -> None:
    ended = load(full_run).model_copy(update={"resumable": False})
    md = render_markdown(ended)
    assert "removed when the night ended, as it cannot be resumed; the branch stays" in md
    resumable = render_html(ended.model_copy(update={"resumable": True}))
    assert "kept for a resume" in resumable
