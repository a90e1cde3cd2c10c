"""The report's short lines say what they mean: the alert, how a task was verified, a verified
task that changed nothing, and which total holds the closing summary."""

from __future__ import annotations

from pathlib import Path

from overnight.report.html import render_html
from overnight.report.markdown import render_markdown
from overnight.report.result import TerminalResult, VerifiedTask
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
