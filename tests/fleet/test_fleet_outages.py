"""The fleet database lost for longer than the fleet waits for it: nothing retries for ever.

The fleet database here is a PostgreSQL server of the test's own, stopped while a night runs
and while another is submitted, for longer than ``[fleet] retry_for_s``. Both nights end
``UNRECOVERABLE_ERROR:fleet_database_unreachable``, their workflows closed; once the server
is back, each ending is written to the night's row (and to its ``result.json`` when it had a
run directory), and a night submitted then runs as any other."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.kit import Fleet, command_night, fleet, private_postgres, query, workflow_of
from tests.helpers.kills import wait_for

pytest.importorskip("temporalio")

#: Small bounds: the database is given up after 3 s unreachable, tried at most 1 s apart.
BOUNDS = "retry_for_s = 3\nretry_first_s = 0.2\nretry_max_s = 1\nrecord_for_h = 1\n"

UNREACHABLE = "UNRECOVERABLE_ERROR:fleet_database_unreachable"


def test_the_fleet_retries_its_database_with_a_backoff_for_a_bounded_time() -> None:
    from pydantic import ValidationError

    from overnight.config.fleet import FleetSpec
    from overnight.fleet.submission import Submission, spec_hash
    from overnight.fleet.workflow import attempts_within, backoff, execution_timeout_of

    # Waits of 1, 2, 4, ... 32 s, then 60 s: 15 waits, 16 tries, for the default 600 s.
    assert attempts_within(600, 1, 60) == 16
    assert attempts_within(3, 0.2, 1) == 6  # 0.2 + 0.4 + 0.8 + 1 + 1 >= 3
    spec = {"goal": "x"}
    given = {"spec_path": "/srv/night.toml", "spec": spec, "spec_sha256": spec_hash(spec)}
    night = Submission(night_id="n", hours=1.0, retry_for_s=3, retry_first_s=0.2, **given)
    policy = backoff(night, night.retry_for_s)
    assert policy.maximum_attempts == attempts_within(3, 0.2, 60)
    assert policy.backoff_coefficient == 2.0 and policy.initial_interval is not None
    assert policy.initial_interval.total_seconds() == 0.2
    assert policy.non_retryable_error_types == ["ConfigError"]  # a refusal is never retried
    # The workflow's own backstop: beyond the queue, the deadline and the two bounded waits.
    assert execution_timeout_of(night).total_seconds() == 2 * 2.5 * 3600 + 2 * 3 + 600
    with pytest.raises(ValidationError, match="retry_max_s"):
        FleetSpec(retry_first_s=5, retry_max_s=1)
    with pytest.raises(ValidationError, match="retry_max_s"):
        Submission(night_id="n", hours=1.0, retry_first_s=5, retry_max_s=1, **given)


def night_with(spec: Path, command: str, fleet_toml: str) -> Path:
    """``spec`` (a one-task command night) with its task's command and a ``[fleet]`` table."""
    text = spec.read_text()
    old = "sleep 0.1; echo 0 > f0.txt"
    assert old in text
    spec.write_text(text.replace(old, command) + f"\n[fleet]\n{fleet_toml}")
    return spec


def recorded(f: Fleet, night_id: str) -> bool:
    """Whether the workflow writing the ending of ``night_id`` is done."""
    return bool(workflow_of(f, f"{night_id}.record")["status"] == "COMPLETED")


def row_of(database: str, night_id: str) -> dict[str, Any] | None:
    rows = query(database, "SELECT * FROM nights WHERE night_id = %s", (night_id,))
    return rows[0] if rows else None


def test_a_night_whose_database_stays_down_past_the_bound_ends_named_and_the_next_runs(
    tmp_path: Path,
) -> None:
    started = tmp_path / "started.log"
    with private_postgres() as pg, fleet(tmp_path, database=pg.url) as f:
        f.worker()
        specs = tmp_path / "specs"
        running = night_with(
            command_night(specs, "running", 1, seconds=0.1),
            f"echo started >> {started}; sleep 60; echo 0 > f0.txt",
            BOUNDS,
        )
        a = f.id("running")
        f.submit(running, "--id", a, "--heartbeat-s", "2")
        wait_for(lambda: started.exists(), 60, "the night's command to start")

        pg.stop()  # while night a runs its command
        unregistered = night_with(command_night(specs, "later", 1, seconds=0.1), "true", BOUNDS)
        c = f.id("later")
        f.submit(unregistered, "--id", c, "--heartbeat-s", "2")  # while the database is down

        for night, spec in ((a, running), (c, unregistered)):
            done = f.submit(spec, "--id", night, wait=True)
            assert done["stop_reason"] == UNREACHABLE and done["_exit"] == 4, done
            described = workflow_of(f, night)
            assert described["status"] == "COMPLETED", described
            # Every night's workflow carries an execution timeout, longer than its deadline
            # (twice its hours and half an hour: here one hour).
            assert described["execution_timeout_s"] >= 2.5 * 3600, described
            result = described["result"]["result"]
            assert result["stop_reason"] == UNREACHABLE and result["resumable"] is True
            assert "the fleet database" in result["message"], result["message"]
            # Its ending is written by a workflow of its own once the database is back.
            assert result["recorded_by"] == f"{night}.record"
            assert workflow_of(f, f"{night}.record")["status"] == "RUNNING"

        # Night a: lost its lease with the database (a lost delivery), then delivered again
        # and again, uncounted, until the database had been unreachable for 3 s.
        deliveries = workflow_of(f, a)["result"]["result"]["deliveries"]
        waited = [d for d in deliveries if d["failure"] == "DatabaseUnreachable"]
        assert waited and not any(d["counted"] for d in waited), deliveries
        assert "unreachable for" in workflow_of(f, a)["result"]["result"]["message"]
        # Night c: never registered, its registration retried with the backoff, then given up.
        assert "could not be registered" in workflow_of(f, c)["result"]["result"]["message"]

        pg.start()
        for night in (a, c):
            wait_for(partial(recorded, f, night), 120, f"the ending of {night} to be written")
            row = row_of(f.database, night)
            assert row is not None and row["state"] == "finished", row
            assert row["result"]["stop_reason"] == UNREACHABLE, row["result"]
        on_disk = json.loads((f.runs / a / "result.json").read_text())
        assert on_disk["stop_reason"] == UNREACHABLE and "the fleet database" in on_disk["message"]
        assert not (f.runs / c).exists()  # night c never began: nothing of it to write

        # The same worker, the database back: a night runs as any other.
        after = command_night(specs, "after", 2, seconds=0.1)
        done = f.submit(after, "--id", f.id("after"), "--heartbeat-s", "2", wait=True)
        assert done["stop_reason"] == "GOAL_MET" and done["deliveries"] == 1, done
        row = row_of(f.database, f.id("after"))
        assert row is not None and row["result"]["stop_reason"] == "GOAL_MET", row
