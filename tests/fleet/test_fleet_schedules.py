"""Nights that recur: a schedule submits the night on its cron (a fast one here), each run a
night of its own, never two at once; a failed night is submitted again with --retry, as a new
night linked to it; the default id carries the day."""

from __future__ import annotations

import itertools
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.kit import Fleet, command_night, fleet
from tests.helpers.kills import wait_for
from tests.helpers.nights import git

pytest.importorskip("temporalio")


def schedule(f: Fleet, *args: str | Path) -> Any:
    done = f.cli(
        "fleet", "schedule", *args, "--temporal", f.services.temporal,
        "--task-queue", f.task_queue,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_schedule_submits_its_night_on_its_cron_and_skips_an_overlap(tmp_path: Path) -> None:
    with fleet(tmp_path) as f:
        f.worker()
        spec = command_night(tmp_path / "specs", "nightly", 1, seconds=5)
        name = f.id("nightly")
        made = schedule(f, spec, "--cron", "@every 2s", "--id", name)
        assert made["schedule"] == name and made["overlap"] == "SKIP" and not made["paused"]
        try:

            def finished() -> list[dict[str, Any]]:
                return [n for n in f.nights() if n["state"] == "finished"]

            wait_for(lambda: len(finished()) >= 2, 120, "two scheduled nights")
            assert schedule(f, "pause", name)["paused"] is True
        finally:
            schedule(f, "delete", name)
        assert name not in {s["schedule"] for s in schedule(f, "list")}
        rows = f.nights()
        assert {r["schedule"] for r in rows} == {name}
        assert all(r["night_id"].startswith(f"{name}-20") for r in rows), rows
        done = [r for r in rows if r["state"] == "finished"]
        assert {r["result"]["stop_reason"] for r in done} == {"GOAL_MET"}
        # Every 2 s, nights of 5 s: the runs due meanwhile were skipped, never run beside.
        spans = sorted(
            (r["started_at"], r["finished_at"] or datetime.now(UTC))
            for r in rows
            if r["started_at"]
        )
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end, spans
        report = {n["night_id"]: n for n in f.report("--since", "all")["lines"]}
        assert {report[r["night_id"]]["schedule"] for r in done} == {name}
        text = f.cli("fleet", "report", "--database", f.database, "--since", "all").stdout
        assert f"schedule {name}" in text
        status = f.cli("fleet", "status", "--database", f.database).stdout
        for r in done:  # the nights of the last day, each with its ending and its schedule
            assert f"{r['night_id']}  GOAL_MET" in status and f"schedule {name}" in status


def test_a_failed_night_is_retried_as_a_new_night_linked_to_it(tmp_path: Path) -> None:
    with fleet(tmp_path) as f:
        f.worker()
        spec = command_night(tmp_path / "specs", "again", 1, seconds=0.1)
        ws = tmp_path / "specs" / "again"
        shutil.rmtree(ws / ".git")
        first = f.submit(spec, wait=True)
        today = datetime.now(UTC).strftime("%Y%m%d")
        assert first["_exit"] == 64 and first["night_id"].endswith(f"-{today}"), first
        git(ws, "init", "-q", "-b", "main")
        git(ws, "commit", "-q", "--allow-empty", "-m", "initial")
        again = f.submit(spec, wait=True)  # the same id: its refusal, not a new night
        assert again["_exit"] == 64 and again["night_id"] == first["night_id"]
        retried = f.submit(spec, "--retry", wait=True)
        assert retried["night_id"] == f"{first['night_id']}.retry-1", retried
        assert retried["retry_of"] == first["night_id"] and retried["stop_reason"] == "GOAL_MET"
        joined = f.submit(spec, "--retry")  # asked again: the retry made, not another
        assert joined["night_id"] == retried["night_id"] and joined["submitted"] == "existing"
        rows = {r["night_id"]: r for r in f.nights()}
        assert rows[retried["night_id"]]["retry_of"] == first["night_id"]
        assert rows[first["night_id"]]["state"] == "refused"
        text = f.cli("fleet", "report", "--database", f.database, "--since", "all").stdout
        assert f"retry of {first['night_id']}" in text
