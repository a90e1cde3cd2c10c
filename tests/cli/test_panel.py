"""The live panel: drawn from a run's files, shown on a terminal, plain lines elsewhere."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

from overnight.cli.panel import last_event, render_panel
from overnight.cli.status import read_status
from overnight.testing import ScriptedModel
from tests.helpers.nights import cli_env, command_task, make_spec, run_night, spec_data, write_spec


def text_of(renderable: object) -> str:
    console = Console(record=True, width=110, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_panel_shows_spend_bands_tasks_drift_and_ending(repo: Path, tmp_path: Path) -> None:
    tasks = [command_task("t_1", "true", "true"), command_task("t_2", "true", "false", retries=0)]
    spec = make_spec(repo, tasks=tasks, predicate="false", run={"drift_every": 1})
    rd, _ = run_night(spec, tmp_path / "run", model=ScriptedModel())
    event = last_event(rd.trace)
    assert event is not None and event["kind"] == "decision"
    text = text_of(render_panel(read_status(rd.path), "the last thing"))
    assert "QUEUE_EMPTY_GOAL_UNMET" in text and "exit 3" in text
    assert f"of ${spec.budget.usd:.2f}" in text and "70% notice" in text
    assert "1 done, 1 parked, 0 remaining" in text
    assert "drift" in text and "elapsed" in text and "the last thing" in text


def test_spend_bar_marks_the_bands() -> None:
    from overnight.cli.panel import spend_bar

    low, high = str(spend_bar(1.0, 10.0)), str(spend_bar(9.5, 10.0))
    assert low.count("|") == 3  # 70 / 90 / 92 % marks on the empty part
    assert "95%" in high and "$9.5000 of $10.00" in high


def test_a_terminal_gets_the_panel_a_pipe_gets_lines(repo: Path, tmp_path: Path) -> None:
    data = spec_data(
        repo,
        tasks=[command_task("t_1", "touch ok", "test -f ok")],
        predicate="test -f ok",
        model=False,
    )
    spec_path = write_spec(tmp_path / "night.toml", data)
    argv = [sys.executable, "-m", "overnight", "run", str(spec_path)]

    piped = subprocess.run(
        [*argv, "--run-dir", str(tmp_path / "piped")],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0
    assert "task t_1 started" in piped.stderr and "╭" not in piped.stderr

    main_fd, child_fd = pty.openpty()
    proc = subprocess.Popen(
        [*argv, "--run-dir", str(tmp_path / "tty")],
        env=cli_env(),
        stdin=child_fd,
        stdout=child_fd,
        stderr=child_fd,
    )
    os.close(child_fd)
    out = b""
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main_fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(main_fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        os.close(main_fd)
    text = out.decode("utf-8", "replace")
    assert proc.returncode == 0
    assert "overnight" in text and "spend" in text and "tasks" in text  # the panel
    assert "GOAL_MET" in text


def test_no_drift_score_is_shown_before_a_drift_check_ran(repo: Path, tmp_path: Path) -> None:
    spec = make_spec(repo, tasks=[command_task("t_1", "true", "true")], predicate="false")
    rd, _ = run_night(spec, tmp_path / "run", model=ScriptedModel())
    status = read_status(rd.path)
    assert status["drift_checks"] == 0
    text = text_of(render_panel(status))
    assert "no check yet" in text and "0.00" not in text.split("drift", 1)[1].splitlines()[0]
    checked = make_spec(
        repo,
        tasks=[command_task(f"t_{i}", "true", "true") for i in range(2)],
        predicate="false",
        run={"drift_every": 1},
    )
    rd2, _ = run_night(checked, tmp_path / "run2", model=ScriptedModel())
    assert "0.00" in text_of(render_panel(read_status(rd2.path)))


def test_the_panel_shows_this_runs_bands_and_where_the_clock_cuts_commands(
    repo: Path, tmp_path: Path
) -> None:
    bands = {"notice_at": 0.5, "finish_at": 0.8, "enforce_at": 0.9}
    spec = make_spec(
        repo, tasks=[command_task("t_1", "true", "true")], predicate="false", budget=bands
    )
    rd, _ = run_night(spec, tmp_path / "run", model=ScriptedModel())
    text = text_of(render_panel(read_status(rd.path)))
    assert "50% notice | 80% no new task | 90% enforced" in text
    assert "of 1 h 00 min (commands are cut at 54 min, the 90% line)" in text
