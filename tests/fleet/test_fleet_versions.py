"""Workflow versions: a night begun by an earlier worker goes on under a newer one. The
history here was recorded from a night in flight on the first version of the workflow (one
activity retried by Temporal without end, the submission carrying only the spec's path); the
current workflow must replay it command for command, as a worker deployed mid-night does."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from overnight.fleet.workflow import NightWorkflow

HISTORIES = Path(__file__).parent / "histories"


def replay(name: str) -> None:
    history = WorkflowHistory.from_json(
        "night-recorded-v1", (HISTORIES / name).read_text(encoding="utf-8")
    )
    replayer = Replayer(workflows=[NightWorkflow], data_converter=pydantic_data_converter)
    asyncio.run(replayer.replay_workflow(history))


def test_a_night_in_flight_on_the_first_workflow_version_replays_on_this_one() -> None:
    replay("night-in-flight-unbounded.json")
