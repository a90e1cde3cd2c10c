"""`overnight run --events jsonl`: a script reads the night as it goes, one JSON object per
line on stdout (the trace's own records, each with the format's version `v`), the terminal
result last; the summary a person reads goes to stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers.nights import cli_env, command_task, spec_data, write_spec


def test_the_events_are_the_trace_s_records_one_per_line_and_the_result_last(
    repo: Path, tmp_path: Path
) -> None:
    tasks = [
        command_task("t_1", "echo x > a.txt", "test -f a.txt"),
        command_task("t_2", "echo y > b.txt", "test -f b.txt"),
    ]
    spec = spec_data(repo, model=False, tasks=tasks, predicate="test -f a.txt && test -f b.txt")
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "overnight", "run", str(write_spec(tmp_path / "n.toml", spec))]
    done = subprocess.run(
        [*argv, "--run-dir", str(run), "--events", "jsonl"],
        env=cli_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    events: list[dict[str, Any]] = [json.loads(line) for line in done.stdout.splitlines()]
    assert all(e["v"] == 1 and isinstance(e["kind"], str) for e in events)
    *night, result = events
    assert result["kind"] == "result" and result["stop_reason"] == "GOAL_MET"
    assert result["run_id"] == json.loads((run / "run.json").read_text())["run_id"]
    started = [e["task"] for e in night if e["kind"] == "task" and e.get("event") == "started"]
    assert started == ["t_1", "t_2"]
    assert night[0]["kind"] == "run_created"
    assert next(e for e in night if e.get("decision") == "stop")["reason"] == "GOAL_MET"
    # The same records as the trace file holds, in its order.
    trace = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    said = [(e["kind"], e.get("t")) for e in night if e["kind"] != "run_created"]
    assert said == [(r["kind"], r.get("t")) for r in trace][: len(said)]
    assert len(said) >= len(trace) - 2  # the closing lines may follow the result
    # The summary went to stderr, none of it to stdout.
    assert "ending:  GOAL_MET" in done.stderr
    assert "ending:" not in done.stdout
