"""A parked task is one line wherever a person reads it, however many lines its verify printed:
the summary's parked line, `overnight review`'s entry; and the whole output is named by the
real path of its log, not by a pattern."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.nights import cli_env, command_task, spec_data, write_spec

LOUD = "printf 'first line of the check\\nsecond line\\nthird line\\n'; seq 1 900; exit 1"


def cli(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "overnight", *(str(a) for a in args)]
    return subprocess.run(
        argv, env=cli_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def test_a_parked_task_is_one_line_and_its_log_is_named_by_its_path(
    repo: Path, tmp_path: Path
) -> None:
    tasks = [command_task("fix_clip", "true", LOUD)]
    spec = write_spec(tmp_path / "night.toml", spec_data(repo, model=False, tasks=tasks))
    run = tmp_path / "run"

    done = cli(tmp_path, "run", spec, "--run-dir", run)

    lines = done.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("parked:"))
    assert "fix_clip" in lines[at]
    assert "first line of the check" in lines[at + 1]
    assert not lines[at + 2].startswith(" ")  # nothing of it spills onto a further line
    [parked] = json.loads((run / "result.json").read_text())["plan"]["parked"]
    pointer = parked["detail"].rsplit("(the whole output: ", 1)[1].rstrip(")")
    log = Path(pointer)
    assert log.parent == run / "artifacts" and log.name == "fix_clip.3.verify.log"  # the last try
    assert "third line" in log.read_text() and "900" in log.read_text()
    assert "*" not in parked["detail"]

    review = cli(tmp_path, "review", "--runs", run)

    said = review.stdout.splitlines()
    [at] = [i for i, ln in enumerate(said) if "fix_clip:" in ln]
    assert "first line of the check" in said[at]
    assert said[at + 1].startswith("    run: "), said[at + 1]  # the entry's next line, no spill
