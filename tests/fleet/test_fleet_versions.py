"""Workflow versions: a night begun by an earlier worker goes on under a newer one. The
history here was recorded from a night in flight on the first version of the workflow (one
activity retried by Temporal without end, the submission carrying only the spec's path); the
current workflow must replay it command for command, as a worker deployed mid-night does."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from overnight.fleet.workflow import NightWorkflow
from tests.fleet.kit import command_night, fleet
from tests.helpers.kills import wait_for

HISTORIES = Path(__file__).parent / "histories"


def replay(name: str) -> None:
    history = WorkflowHistory.from_json(
        "night-recorded-v1", (HISTORIES / name).read_text(encoding="utf-8")
    )
    replayer = Replayer(workflows=[NightWorkflow], data_converter=pydantic_data_converter)
    asyncio.run(replayer.replay_workflow(history))


def test_a_night_in_flight_on_the_first_workflow_version_replays_on_this_one() -> None:
    replay("night-in-flight-unbounded.json")


#: The commit whose workflow is the first version: one activity, retried without end, and a
#: submission carrying only the spec's path.
FIRST_VERSION = "6e4fb54e481bf60682d808b28151bda545940695"


def first_version_src(dest: Path) -> Path | None:
    """The first version's ``src`` from this repository's history; None when the clone does
    not have it (a shallow one)."""
    root = Path(__file__).resolve().parents[2]
    found = subprocess.run(
        ["git", "-C", str(root), "cat-file", "-e", f"{FIRST_VERSION}^{{commit}}"],
        capture_output=True,
    )
    if found.returncode != 0:
        return None
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", FIRST_VERSION, "src"], capture_output=True, check=True
    ).stdout
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "src"


def test_a_night_begun_on_a_first_version_worker_finishes_on_this_one(tmp_path: Path) -> None:
    old = first_version_src(tmp_path / "v1")
    if old is None:
        pytest.skip(f"this clone does not have {FIRST_VERSION}, the first version")
    with fleet(tmp_path) as f:
        f.env_extra["PYTHONPATH"] = str(old)  # the worker and the client of before
        first = f.worker()
        spec = command_night(tmp_path / "specs", "upgrade", 4, seconds=1.0)
        night = f.id("upgrade")
        f.submit(spec, "--id", night, "--heartbeat-s", "2")
        run = f.runs / night
        wait_for(lambda: (run / "trace.jsonl").exists(), 60, "the night on the first version")
        time.sleep(1.5)
        assert first.stop() == 0  # the deploy drains it
        del f.env_extra["PYTHONPATH"]
        f.worker()  # this version
        done = f.submit(spec, "--id", night, wait=True)
        assert done["stop_reason"] == "GOAL_MET" and done["deliveries"] == 2, done
        result = json.loads((run / "result.json").read_text())
        assert result["plan"]["done"] == [f"f{i}" for i in range(4)]
        trace = [json.loads(x) for x in (run / "trace.jsonl").read_text().splitlines()]
        assert [e["decision"] for e in trace if e.get("decision") == "resumed"] == ["resumed"]
        history = [json.loads(h.read_text()) for h in sorted((run / "history").glob("*.json"))]
        assert [h["stop_reason"] for h in history] == ["TIME_LIMIT:sigterm"]
