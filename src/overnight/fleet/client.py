"""Submitting nights and asking how they stand: the client side of the fleet.

The workflow id is the night's idempotency key: a submission of a night already running
joins it (``USE_EXISTING``) and one of a night that already ended is refused by Temporal
(``REJECT_DUPLICATE``); either way the answer is that first night's status.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from overnight.config.spec import load_spec
from overnight.core.errors import ConfigError
from overnight.fleet.submission import (
    DEFAULT_TASK_QUEUE,
    REFUSED,
    NightOutcome,
    Submission,
    check_night_id,
    night_id_for,
    refusal_of,
    spec_hash,
)
from overnight.fleet.workflow import NightWorkflow, execution_timeout_of

#: The memo key holding the hash of the spec a night was submitted with.
SPEC_MEMO = "spec_sha256"


def submission_of(
    spec_path: Path, night_id: str | None = None, *, heartbeat_s: float = 10.0
) -> Submission:
    """The submission of ``spec_path``, carrying the spec's content; a bad spec is a
    ``ConfigError`` before anything is sent."""
    spec = load_spec(spec_path)
    today = datetime.now(UTC).date()
    nid = (
        check_night_id(night_id)
        if night_id
        else night_id_for(spec.goal, spec.workspace_path(), today)
    )
    content = spec.model_dump(mode="json")
    return Submission(
        night_id=nid,
        spec_path=str(spec_path.resolve()),
        spec=content,
        spec_sha256=spec_hash(content),
        hours=spec.budget.hours,
        heartbeat_s=heartbeat_s,
        max_deliveries=spec.fleet.max_deliveries,
        stall_s=spec.fleet.stall_s,
        retry_for_s=spec.fleet.retry_for_s,
        retry_first_s=spec.fleet.retry_first_s,
        retry_max_s=spec.fleet.retry_max_s,
        record_for_h=spec.fleet.record_for_h,
    )


async def _existing(
    client: Client, night_id: str
) -> tuple[WorkflowExecutionStatus | None, str | None]:
    """The status of the night already under ``night_id`` (None: there is none), and the hash
    of the spec it was submitted with."""
    try:
        desc = await client.get_workflow_handle(night_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None, None
        raise
    memo = await desc.memo()
    sha = memo.get(SPEC_MEMO)
    return desc.status, None if sha is None else str(sha)


def _same_spec(submission: Submission, sha: str | None) -> None:
    """An id names one night: another spec under it is refused, never run as that night."""
    if sha is not None and sha != submission.spec_sha256:
        raise ConfigError(
            "--id",
            f"night {submission.night_id} was submitted with another spec "
            f"(sha256 {sha[:12]}, this one {(submission.spec_sha256 or '')[:12]})",
            "give this spec an id of its own, or submit the night's own spec to join it",
        )


async def _ended_badly(client: Client, night_id: str) -> bool | None:
    """Whether the night under ``night_id`` ended without succeeding (refused, failed, given
    up, any ending but GOAL_MET); None when there is no such night. A ``ConfigError`` while it
    is still running."""
    status, _ = await _existing(client, night_id)
    if status is None:
        return None
    if status == WorkflowExecutionStatus.RUNNING:
        raise ConfigError(
            "--retry",
            f"night {night_id} is still running",
            "wait for it to end, or join it without --retry",
        )
    answer = await night_status(client, night_id)
    return answer.get("status") != "SUCCESS"


async def retrying(client: Client, submission: Submission) -> Submission:
    """``fleet submit --retry``: a new night, ``<id>.retry-<n>``, linked to the failed night
    ``submission.night_id``. Asked again, it joins the retry already made rather than making
    another, unless that one failed too."""
    first = submission.night_id
    if not await _ended_badly(client, first):
        if await _existing(client, first) == (None, None):
            return submission  # nothing to retry: the night itself
        raise ConfigError(
            "--retry",
            f"night {first} succeeded: there is nothing to retry",
            "give it a new --id to run it again",
        )
    for n in range(1, 100):
        night_id = check_night_id(f"{first}.retry-{n}")
        if not await _ended_badly(client, night_id):  # free, or a retry to join
            return submission.model_copy(update={"night_id": night_id, "retry_of": first})
    raise ConfigError("--retry", f"night {first} was retried 99 times", "give it a new --id")


async def submit(
    client: Client, submission: Submission, *, task_queue: str = DEFAULT_TASK_QUEUE
) -> dict[str, Any]:
    """Start the night, or find the one already started under its id (with the same spec:
    another spec under that id is a ``ConfigError``)."""
    before, sha = await _existing(client, submission.night_id)
    _same_spec(submission, sha)
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
            execution_timeout=execution_timeout_of(submission),
            memo={SPEC_MEMO: submission.spec_sha256},
        )
    except WorkflowAlreadyStartedError:
        before = before or WorkflowExecutionStatus.COMPLETED
    if before is None:  # raced with another submitter: the night that won must be this one
        _same_spec(submission, (await _existing(client, submission.night_id))[1])
    answer = await night_status(client, submission.night_id)
    answer["submitted"] = "existing" if before is not None else "started"
    if submission.retry_of is not None:
        answer["retry_of"] = submission.retry_of
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
    elif desc.status == WorkflowExecutionStatus.FAILED:
        try:
            await wait_for(client, night_id)
        except ConfigError as exc:
            answer.update(state="refused", refusal=str(exc), exit_code=64)
        except WorkflowFailureError as exc:
            answer.update(failure=str(exc.cause or exc))
    return answer


async def wait_for(client: Client, night_id: str) -> NightOutcome:
    """How the night ended; a refused night is the ``ConfigError`` it was refused with."""
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(
        night_id, result_type=NightOutcome
    )
    try:
        outcome: NightOutcome = await handle.result()
    except WorkflowFailureError as exc:
        cause = exc.cause
        if isinstance(cause, ApplicationError) and cause.type == REFUSED:
            raise refusal_of(cause.details) from None
        raise
    return outcome
