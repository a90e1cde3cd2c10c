"""What `overnight run` prints at the end for a person at a terminal: why the run ended, what
the goal check said, and a resume line that would not end the same way at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.nights import cli_env, command_task, make_repo, spec_data, write_spec


def run(tmp_path: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    repo = tmp_path / "repo"
    if not repo.exists():
        make_repo(repo)
    spec = write_spec(tmp_path / "night.toml", spec_data(repo, model=False, **kwargs))  # type: ignore[arg-type]
    env = cli_env()
    env["OVERNIGHT_HOME"] = str(tmp_path / "home")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "overnight",
            "run",
            str(spec),
            "--run-dir",
            str(tmp_path / "run"),
            "--quiet",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_an_unmet_goal_says_why_and_what_the_goal_check_said(tmp_path: Path) -> None:
    done = run(
        tmp_path,
        predicate="echo 'FAILED tests/test_calc.py::test_add - assert 0 == 4'; exit 1",
        tasks=[command_task("c1", "true", "true")],
    )
    assert done.returncode == 3, done.stderr
    assert "why:     the queue drained, goal unmet" in done.stdout
    assert "said:" in done.stdout and "FAILED tests/test_calc.py::test_add" in done.stdout
    assert "resume:" not in done.stdout  # not resumable: no hint


def test_a_budget_stop_suggests_raising_that_budget(tmp_path: Path) -> None:
    tasks = [command_task(f"c{i}", "true", "true") for i in range(3)]
    done = run(tmp_path, tasks=tasks, budget={"steps": 2})
    assert done.returncode == 2, done.stderr
    assert "BUDGET_EXHAUSTED:steps" in done.stdout
    assert (
        f"resume:  overnight resume {tmp_path / 'run'} --steps 4   (the limit was 2)" in done.stdout
    )


def test_a_wall_clock_stop_suggests_more_hours(tmp_path: Path) -> None:
    tasks = [command_task("slow", "sleep 30", "true")]
    done = run(tmp_path, tasks=tasks, hours=0.0005)
    assert "TIME_LIMIT:wall_clock" in done.stdout, done.stdout + done.stderr
    assert "--hours 0.001   (the limit was 0.0005 h)" in done.stdout


def test_uncommitted_work_in_the_workspace_is_pointed_out(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "README.md").write_text("edited, not committed\n")
    (repo / "notes.txt").write_text("new\n")
    done = run(tmp_path, tasks=[command_task("c1", "true", "true")], predicate="true")
    assert done.returncode == 0, done.stderr
    assert "has uncommitted changes (README.md, notes.txt)" in done.stderr
    assert "starts from the committed HEAD" in done.stderr
    clean = tmp_path / "clean"
    clean.mkdir()
    again = run(clean, tasks=[command_task("c1", "true", "true")], predicate="true")
    assert "uncommitted" not in again.stderr


def test_a_progress_line_names_a_parked_tasks_reason_not_its_outcome_code() -> None:
    from overnight.cli.output import progress_line
    from overnight.night.events import event_of

    reason = "`toolz/__pycache__/x.pyc` is bytecode: Python may run it instead of the source."
    finished = event_of(
        {
            "kind": "decision",
            "decision": "task_finished",
            "t": 61.0,
            "task": "t_1",
            "outcome": "not_done",
            "parked": reason,
            "detail": "toolz/__pycache__/x.pyc (created)",
        }
    )
    line = progress_line(finished)
    assert line == f"[00:01:01] task t_1 parked: {reason} (toolz/__pycache__/x.pyc (created))"
    resumed = event_of(
        {
            "kind": "decision",
            "decision": "resume_verified",
            "t": 1.0,
            "task": "t_2",
            "outcome": "partial",
            "parked": "verify reports a partially applied state",
        }
    )
    assert progress_line(resumed) == (
        "[00:00:01] resumed: in-flight task t_2 parked: verify reports a partially applied state"
    )


def test_the_note_says_what_the_harness_reads_and_what_the_night_will_not_see(
    tmp_path: Path,
) -> None:
    from overnight.cli.uncommitted import uncommitted_note
    from overnight.config.spec import load_spec

    repo = make_repo(tmp_path / "repo")
    (repo / "fake_model.py").write_text("def model(request):\n    return None\n")
    (repo / "notes.txt").write_text("new\n")
    spec_path = repo / "night.toml"
    spec_path.write_text(
        'goal = "g"\nworkspace = "."\n[budget]\nusd = 1.0\nhours = 1.0\n'
        '[predicate]\ncommand = "true"\n'
        '[model]\nprovider = "python"\ntarget = "fake_model:model"\nname = "m"\n'
    )
    note = uncommitted_note(load_spec(spec_path), spec_path)
    assert note is not None
    assert "has uncommitted changes (fake_model.py, night.toml, notes.txt)" in note
    reads = note.split("reads these from your checkout now, as they are: ")[1]
    reads = reads.split(". The night")[0]
    assert "fake_model.py (the model)" in reads and "night.toml (the spec)" in reads
    assert "will not see notes.txt" in note
    (repo / "notes.txt").unlink()
    only_read = uncommitted_note(load_spec(spec_path), spec_path)
    assert only_read is not None and "will not see" not in only_read


def test_a_cli_agents_events_are_progress_lines_and_its_own_cost_is_its_word() -> None:
    from overnight.cli.output import progress_line
    from overnight.night.events import event_of

    def line(**fields: object) -> str | None:
        base = {"kind": "cli_event", "t": 75.0, "task": "fix", "cli": "claude-code"}
        return progress_line(event_of({**base, **fields}))

    assert line(event="start", version="2.1.332", model="m") == (
        "[00:01:15]   fix: claude-code 2.1.332 started (model m)"
    )
    assert line(event="tool_call", tool="Edit") == "[00:01:15]   fix: claude-code Edit"
    assert line(event="turn", turn=3) == "[00:01:15]   fix: claude-code turn 3"
    end = line(event="end", status="finished", calls=4, harness_usd=0.25, cli_reported_cost_usd=0.5)
    assert end == (
        "[00:01:15]   fix: claude-code ended finished after 4 metered call(s), $0.2500 "
        "(it says $0.5000)"
    )
    assert line(event="tool_result", error=False) is None
