"""Model-written text with control characters: refused where it enters (a plan asked for
again, then parked), and stripped from what reaches a terminal or a Markdown report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from overnight.core.text import printable
from overnight.report.markdown import render_markdown
from overnight.testing import ScriptedModel
from tests.helpers.nights import make_spec, run_night


def plan_with(title: str, brief: str = "Fix it.", task_id: str = "t1") -> dict[str, Any]:
    return {
        "reasoning": "one task",
        "tasks": [{"id": task_id, "title": title, "brief": brief, "verify": "true"}],
    }


@pytest.mark.parametrize(
    ("title", "brief", "task_id"),
    [
        ("fix\x00it", "Fix it.", "t1"),
        ("\rGOAL_MET                ", "Fix it.", "t1"),
        ("fix it", "Fix \x1b[2Kit.", "t1"),
        ("two\nlines", "Fix it.", "t1"),
        ("fix it", "Fix it.", "t\x001"),
    ],
)
def test_a_plan_with_control_characters_is_asked_again_then_parked(
    repo: Path, tmp_path: Path, title: str, brief: str, task_id: str
) -> None:
    model = ScriptedModel(plan=plan_with(title, brief, task_id))
    spec = make_spec(repo, tasks=[], predicate="false")
    _rd, r = run_night(spec, tmp_path / "run", model=model)
    assert r.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"  # a named ending, never internal_error
    [parked] = r.plan.parked
    assert parked.reason == "the plan answer was invalid twice"
    plans = [q for q in model.calls if q.purpose == "plan"]
    assert len(plans) == 2 and "rejected" in str(plans[1].messages[-1]["content"])


def test_printable_keeps_text_and_newlines_and_drops_what_redraws_the_screen() -> None:
    assert printable("task done\n\tnext") == "task done\n\tnext"
    assert printable("a\rGOAL_MET") == "a\N{REPLACEMENT CHARACTER}GOAL_MET"
    assert printable("x\x1b[2K\x1b[1Ay") == "xy"
    assert printable("bell\x07 nul\x00 csi\x9b") == "bell\ufffd nul\ufffd csi\ufffd"
    assert printable("\x1b]0;title\x07ok") == "ok"


def test_the_markdown_report_holds_no_control_character(repo: Path, tmp_path: Path) -> None:
    # A verifier's output is the one place raw bytes of a command reach the report.
    tasks = [
        {
            "id": "c1",
            "title": "noisy",
            "command": "true",
            "verify": "printf 'fail\\r\\033[2KGOAL_MET\\n'; exit 1",
            "retries": 0,
        }
    ]
    spec = make_spec(repo, tasks=tasks, predicate="false", model=False)
    _rd, r = run_night(spec, tmp_path / "run")
    assert "\x1b" in r.plan.parked[0].detail  # the raw output is kept in the result
    md = render_markdown(r)
    assert "\x1b" not in md and "\r" not in md
