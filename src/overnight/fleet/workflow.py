"""The night as a Temporal workflow. Deterministic and free of I/O: it registers the night and
has it carried out by activities (``overnight.fleet.activities``), which do all the work.

Each delivery of the night is one activity attempt, heartbeating while the night runs. When
its worker dies, hangs or stalls, the workflow delivers the night again (to whichever worker
polls first), which resumes the same run directory: the task left in flight is verified,
never executed again. The workflow, not Temporal's retry policy, decides on another delivery:
a delivery lost to a dead, hung or stalled night counts against ``max_deliveries``; one handed
back by a worker's shutdown or refused because another delivery still holds the night does
not. Past ``max_deliveries`` or the night's deadline the night ends
``UNRECOVERABLE_ERROR:fleet_retries`` with every delivery listed.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    TimeoutError,
    TimeoutType,
)

with workflow.unsafe.imports_passed_through():
    from overnight.fleet.submission import (
        REFUSED,
        Delivery,
        GiveUp,
        NightOutcome,
        Submission,
        scheduled_night_id,
    )

WORKFLOW_NAME = "overnight-night"
REGISTER = "register_night"
CARRY_OUT = "carry_out_night"
GIVE_UP = "give_up_night"

#: Errors a retry cannot fix: the activity fails for good and so does the workflow.
FINAL_ERRORS = ["ConfigError"]

#: Deliveries that end this way were not the night's fault: they are not counted.
NOT_COUNTED = frozenset({"NightDrained", "RunBusy"})

#: Workflow versions, as Temporal patches: a change to what the workflow does is made under
#: a new patch id (``workflow.patched``), the earlier path kept until no night in flight can
#: have begun on it. Nights started before the patch replay, and go on, as they began.
BOUNDED_DELIVERIES = "bounded-deliveries"

#: The margin a delivery is given beyond the night's own hours.
MARGIN = timedelta(minutes=10)


def deadline_of(submission: Submission) -> timedelta:
    """How long the fleet keeps delivering a night: twice its hours and half an hour more. A
    night's own clock runs only while it is carried out (at most its hours); the rest is for
    deliveries lost to dead or stalled workers and for the queue."""
    return timedelta(hours=submission.hours) * 2 + timedelta(minutes=30)


def _failure(exc: ActivityError) -> tuple[str, str]:
    """(kind, words) of a failed delivery."""
    cause = exc.cause
    if isinstance(cause, TimeoutError):
        if cause.type == TimeoutType.HEARTBEAT:
            return "HeartbeatTimeout", "its worker stopped heartbeating (lost, frozen or hung)"
        return "Timeout", f"it timed out ({cause.type.name if cause.type else 'timeout'})"
    if isinstance(cause, ApplicationError):
        return cause.type or "ApplicationError", cause.message
    return type(cause).__name__ if cause else "ActivityError", str(cause or exc)


@workflow.defn(name=WORKFLOW_NAME)
class NightWorkflow:
    def __init__(self) -> None:
        self._state = "queued"
        self._deliveries: list[Delivery] = []

    @workflow.run
    async def run(self, submission: Submission) -> NightOutcome:
        if submission.schedule is not None:
            night_id = scheduled_night_id(workflow.info().workflow_id)
            submission = submission.model_copy(update={"night_id": night_id})
        try:
            return await self._run(submission)
        except ActivityError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type in FINAL_ERRORS:
                self._state = "refused"
                # A refusal is the night's answer, typed: the submitter exits 64 with it.
                raise ApplicationError(
                    cause.message, *cause.details, type=REFUSED, non_retryable=True
                ) from None
            raise

    async def _run(self, submission: Submission) -> NightOutcome:
        await workflow.execute_activity(
            REGISTER,
            submission,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(
                maximum_interval=timedelta(seconds=10), non_retryable_error_types=FINAL_ERRORS
            ),
        )
        self._state = "running"
        if not workflow.patched(BOUNDED_DELIVERIES):
            # A night started by a worker of before: it is carried on as it was begun.
            return await self._unbounded(submission)
        end = workflow.now() + deadline_of(submission)
        counted = waits = 0
        while True:
            left = end - workflow.now()
            if left <= timedelta(0):
                return await self._give_up(submission, "its deadline passed")
            try:
                outcome: NightOutcome = await workflow.execute_activity(
                    CARRY_OUT,
                    submission,
                    result_type=NightOutcome,
                    start_to_close_timeout=min(
                        timedelta(hours=submission.hours) * 1.25 + MARGIN, left
                    ),
                    heartbeat_timeout=timedelta(seconds=submission.heartbeat_s),
                    retry_policy=RetryPolicy(
                        maximum_attempts=1, non_retryable_error_types=FINAL_ERRORS
                    ),
                )
            except ActivityError as exc:
                kind, words = _failure(exc)
                if kind in FINAL_ERRORS:
                    raise
                self._deliveries.append(
                    Delivery(
                        n=len(self._deliveries) + 1,
                        worker=exc.identity or "",
                        failure=kind,
                        detail=words,
                        counted=kind not in NOT_COUNTED,
                    )
                )
                if kind in NOT_COUNTED:
                    waits += 1
                else:
                    counted += 1
                    if counted >= submission.max_deliveries:
                        return await self._give_up(
                            submission, f"max_deliveries ({submission.max_deliveries}) reached"
                        )
                await workflow.sleep(min(15.0, 0.5 * 1.5 ** min(counted + waits, 8)))
                continue
            self._state = "finished"
            return outcome

    async def _unbounded(self, submission: Submission) -> NightOutcome:
        """The night as the first version of this workflow delivered it: Temporal retries the
        one activity for as long as it takes."""
        outcome: NightOutcome = await workflow.execute_activity(
            CARRY_OUT,
            submission,
            result_type=NightOutcome,
            start_to_close_timeout=timedelta(hours=submission.hours) * 1.25 + MARGIN,
            heartbeat_timeout=timedelta(seconds=submission.heartbeat_s),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=500),
                backoff_coefficient=1.5,
                maximum_interval=timedelta(seconds=15),
                non_retryable_error_types=FINAL_ERRORS,
            ),
        )
        self._state = "finished"
        return outcome

    async def _give_up(self, submission: Submission, why: str) -> NightOutcome:
        self._state = "giving up"
        outcome: NightOutcome = await workflow.execute_activity(
            GIVE_UP,
            GiveUp(submission=submission, why=why, deliveries=self._deliveries),
            result_type=NightOutcome,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=15)),
        )
        self._state = "finished"
        return outcome

    @workflow.query
    def state(self) -> str:
        return self._state

    @workflow.query
    def deliveries(self) -> list[Delivery]:
        return self._deliveries
