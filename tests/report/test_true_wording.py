"""What the morning's lines say is true: the spend line names a closing summary the model
wrote even when it cost nothing, the report counts commands run outside the sandbox as
such, the HTML header does not say "alert" twice, the panel's clock reads in hours and
minutes, and the demo does not claim no spend while it reports one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from overnight.cli.panel import render_panel
from overnight.cli.status import clock_text, read_status
from overnight.messages.types import ModelRequest, ModelResponse, coerce_response
from overnight.testing import text_answer, usage_dict
from tests.helpers.nights import cli_env, command_task, spec_data, write_spec

ROOT = Path(__file__).resolve().parents[2]


def free_model(request: ModelRequest) -> ModelResponse:
    """A model whose every answer costs nothing (a local model, a $0 price)."""
    return coerce_response(text_answer("All done; nothing is left.", usage_dict()))


def cli(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "overnight", *(str(a) for a in args)]
    return subprocess.run(
        argv, env=cli_env(ROOT), cwd=tmp_path, capture_output=True, text=True, timeout=180
    )


def night(repo: Path, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    tasks = [command_task("t_1", "echo x > done.txt", "test -f done.txt")]
    data = spec_data(repo, tasks=tasks, predicate="test -f done.txt", hours=8.0)
    data["model"]["target"] = "tests.report.test_true_wording:free_model"
    run = tmp_path / "run"
    done = cli(tmp_path, "run", write_spec(tmp_path / "night.toml", data), "--run-dir", run)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads((run / "result.json").read_text())
    return run, {"stdout": done.stdout, **result}


def test_a_summary_the_model_wrote_for_nothing_is_still_named(repo: Path, tmp_path: Path) -> None:
    _run, r = night(repo, tmp_path)
    assert r["wrapup"]["source"] == "model" and r["wrapup"]["cost_usd"] == 0
    [spent] = [ln for ln in r["stdout"].splitlines() if ln.startswith("spent:")]
    assert "no closing summary call" not in spent
    assert "the closing summary's $0" in spent


def test_the_report_says_outside_the_sandbox_and_alert_once(repo: Path, tmp_path: Path) -> None:
    run, _ = night(repo, tmp_path)
    md = cli(tmp_path, "report", run).stdout
    [line] = [ln for ln in md.splitlines() if "Sandbox:" in ln]
    assert "outside it" in line and "as written" not in line
    assert cli(tmp_path, "report", run, "--html").returncode == 0
    html = (run / "report.html").read_text()
    assert "<dt>alert</dt><dd>Alert" not in html  # the label is not said twice
    assert "<dt>alert</dt><dd>none (this ending calls for no alert).</dd>" in html


def test_the_panel_clock_reads_in_hours_and_minutes(repo: Path, tmp_path: Path) -> None:
    run, _ = night(repo, tmp_path)
    console = Console(record=True, width=120, color_system=None)
    console.print(render_panel(read_status(run)))
    [elapsed] = [ln for ln in console.export_text().splitlines() if "elapsed" in ln]
    assert "of 8 h 00 min" in elapsed and "28800s" not in elapsed
    assert "7 h 21 min" in elapsed  # the 92% line of 8 hours: 7 h 21 min 36 s
    assert [clock_text(s) for s in (12, 59.6, 60, 2700, 26496)] == [
        "12 s",
        "1 min",
        "1 min",
        "45 min",
        "7 h 21 min",
    ]


def test_the_demo_says_what_its_spend_is(tmp_path: Path) -> None:
    done = cli(tmp_path, "demo", "--dir", tmp_path / "demo")
    assert done.returncode == 0, done.stderr
    assert "no money is spent" not in done.stderr
    assert "would have cost" in done.stderr
