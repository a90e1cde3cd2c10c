"""A fleet night owns its inputs: it runs from the spec it was submitted with, an id names one
spec, and a night a worker refuses is answered as a refusal (exit 64), not an internal error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.fleet.kit import command_night, fleet
from tests.helpers.kills import wait_for

pytest.importorskip("temporalio")


def test_a_night_runs_from_its_submitted_spec_and_an_id_names_one_spec(tmp_path: Path) -> None:
    with fleet(tmp_path) as f:
        spec = command_night(tmp_path / "specs", "moved", 2, seconds=0.1)
        night = f.id("moved")
        queued = f.submit(spec, "--id", night)  # no worker yet: it waits in the queue
        assert queued["submitted"] == "started"
        # The submitter's file is changed and then moved away before any worker reads it.
        other = spec.read_text().replace("sleep 0.1", "sleep 0.2")
        spec.write_text(other)
        changed = f.cli(
            "fleet", "submit", spec, "--id", night, "--temporal", f.services.temporal,
            "--task-queue", f.task_queue,
        )  # fmt: skip
        assert changed.returncode == 64, changed.stderr
        assert "--id" in changed.stderr and "another spec" in changed.stderr
        shutil.move(spec, tmp_path / "elsewhere.toml")
        f.worker()
        wait_for(lambda: f.nights() and f.nights()[0]["state"] == "finished", 120, "the night")
        [row] = f.nights()
        assert row["result"]["stop_reason"] == "GOAL_MET", row
        ran = json.loads((Path(row["run_dir"]) / "spec.json").read_text())
        assert "sleep 0.1" in ran["tasks"][0]["command"]  # the spec as submitted
        [row] = f.nights()
        assert row["state"] == "finished" and row["spec_sha256"]


def test_a_night_refused_by_its_worker_exits_64_and_is_listed_as_refused(tmp_path: Path) -> None:
    with fleet(tmp_path) as f:
        f.worker()
        spec = command_night(tmp_path / "specs", "norepo", 1, seconds=0.1)
        shutil.rmtree(tmp_path / "specs" / "norepo" / ".git")  # no longer a git repository
        done = f.cli(
            "fleet", "submit", spec, "--id", f.id("norepo"), "--temporal", f.services.temporal,
            "--task-queue", f.task_queue, "--wait",
        )  # fmt: skip
        assert done.returncode == 64, (done.returncode, done.stderr)
        assert "internal error" not in done.stderr
        assert "workspace" in done.stderr and "(fix: " in done.stderr, done.stderr
        answer = json.loads(done.stdout)
        assert answer["state"] == "refused" and answer["exit_code"] == 64
        [row] = f.nights()
        assert row["state"] == "refused" and "workspace" in row["refusal"]
        status = f.cli("fleet", "status", "--database", f.database)
        assert f"{f.id('norepo')}  refused: workspace" in status.stdout, status.stdout
