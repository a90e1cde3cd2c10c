"""Submitting nights and asking how they stand: the client side of the fleet.

The workflow id is the night's idempotency key: a submission of a night already running
joins it (``USE_EXISTING``) and one of a night that already ended is refused by Temporal
(``REJECT_DUPLICATE``); either way the answer is that first night's status.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from overnight.config.spec import load_spec
from overnight.fleet.submission import (
    DEFAULT_TASK_QUEUE,
    NightOutcome,
    Submission,
    check_night_id,
    night_id_for,
)
from overnight.fleet.workflow import NightWorkflow


def submission_of(
    spec_path: Path, night_id: str | None = None, *, heartbeat_s: float = 10.0
) -> Submission:
    """The submission of ``spec_path``; a bad spec is a ``ConfigError`` before anything is
    sent."""
    spec = load_spec(spec_path)
    nid = check_night_id(night_id) if night_id else night_id_for(spec.goal, spec.workspace_path())
    return Submission(
        night_id=nid,
        spec_path=str(spec_path.resolve()),
        hours=spec.budget.hours,
        heartbeat_s=heartbeat_s,
    )


async def _existing(client: Client, night_id: str) -> WorkflowExecutionStatus | None:
    try:
        return (await client.get_workflow_handle(night_id).describe()).status
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def submit(
    client: Client, submission: Submission, *, task_queue: str = DEFAULT_TASK_QUEUE
) -> dict[str, Any]:
    """Start the night, or find the one already started under its id."""
    before = await _existing(client, submission.night_id)
    try:
        await client.start_workflow(
            NightWorkflow.run,
            submission,
            id=submission.night_id,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            # A worker busy with many nights may take a while to answer a workflow task.
            task_timeout=timedelta(seconds=60),
        )
    except WorkflowAlreadyStartedError:
        before = before or WorkflowExecutionStatus.COMPLETED
    answer = await night_status(client, submission.night_id)
    answer["submitted"] = "existing" if before is not None else "started"
    return answer


async def night_status(client: Client, night_id: str) -> dict[str, Any]:
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(
        night_id, result_type=NightOutcome
    )
    desc = await handle.describe()
    status = desc.status.name if desc.status is not None else "UNKNOWN"
    answer: dict[str, Any] = {
        "night_id": night_id,
        "workflow_status": status,
        "workflow_run_id": desc.run_id,
    }
    if desc.status == WorkflowExecutionStatus.COMPLETED:
        outcome: NightOutcome = await handle.result()
        answer.update(
            stop_reason=outcome.stop_reason,
            status=outcome.status,
            exit_code=outcome.exit_code,
            run_dir=outcome.run_dir,
            deliveries=outcome.deliveries,
        )
    return answer


async def wait_for(client: Client, night_id: str) -> NightOutcome:
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(
        night_id, result_type=NightOutcome
    )
    outcome: NightOutcome = await handle.result()
    return outcome
