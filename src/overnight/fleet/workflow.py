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

Nothing is retried without end. Registering the night and giving it up are retried with a
backoff for as long as ``retry_for_s`` allows; a delivery that cannot reach the fleet database
is delivered again with the same backoff, uncounted, until the database has been unreachable
for ``retry_for_s`` in a row: the night then ends ``UNRECOVERABLE_ERROR:
fleet_database_unreachable``. A night whose ending cannot be written (the give-up itself
could not reach the database) ends all the same, in its workflow's result, and a workflow of
its own (``RecordWorkflow``) writes that ending to ``result.json`` and the night's row once the
database is back. Every workflow carries an execution timeout (``execution_timeout_of``): a
backstop no night should reach.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    TimeoutError,
    TimeoutType,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from overnight.core.endings import Ending, Stop, describe
    from overnight.fleet.submission import (
        DATABASE_UNREACHABLE,
        FLEET_DATABASE_UNREACHABLE,
        FLEET_RETRIES,
        REFUSED,
        Delivery,
        GiveUp,
        NightOutcome,
        Submission,
        scheduled_night_id,
    )

WORKFLOW_NAME = "overnight-night"
RECORD_WORKFLOW_NAME = "overnight-night-record"
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
#: A delivery that cannot reach the fleet database waits for it (uncounted, for
#: ``retry_for_s`` at most) rather than counting as a lost delivery.
BOUNDED_ACTIVITIES = "bounded-activities"

#: The margin a delivery is given beyond the night's own hours.
MARGIN = timedelta(minutes=10)


def deadline_of(submission: Submission) -> timedelta:
    """How long the fleet keeps delivering a night: twice its hours and half an hour more. A
    night's own clock runs only while it is carried out (at most its hours); the rest is for
    deliveries lost to dead or stalled workers and for the queue."""
    return timedelta(hours=submission.hours) * 2 + timedelta(minutes=30)


def execution_timeout_of(submission: Submission) -> timedelta:
    """The night's workflow's execution timeout: room for the queue before a worker takes it
    (as long as its deadline), its deadline, registering it and giving it up (``retry_for_s``
    each) and a margin. The workflow ends on its own well before: this is a backstop."""
    return deadline_of(submission) * 2 + timedelta(seconds=submission.retry_for_s) * 2 + MARGIN


def attempts_within(seconds: float, first_s: float, most_s: float) -> int:
    """How many tries fit in ``seconds`` of waits between them, the waits doubling from
    ``first_s`` up to ``most_s``: the bound on an activity's retries."""
    waited, wait, tries = 0.0, first_s, 1
    while waited < seconds:
        waited += wait
        tries += 1
        wait = min(wait * 2, most_s)
    return tries


def backoff(submission: Submission, seconds: float) -> RetryPolicy:
    """Retry with the night's backoff (``retry_first_s`` doubling to ``retry_max_s``) for as
    many attempts as fit in ``seconds``; a refusal is never retried."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=submission.retry_first_s),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=submission.retry_max_s),
        maximum_attempts=attempts_within(seconds, submission.retry_first_s, submission.retry_max_s),
        non_retryable_error_types=FINAL_ERRORS,
    )


def wait_before(tries: int, submission: Submission) -> timedelta:
    """The wait before trying the database again after ``tries`` tries that could not."""
    seconds = submission.retry_first_s * 2.0 ** min(tries, 60)
    return timedelta(seconds=min(seconds, submission.retry_max_s))


#: How long one attempt at registering or giving up a night may take.
REGISTER_TIMEOUT = timedelta(seconds=30)
GIVE_UP_TIMEOUT = timedelta(minutes=5)


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
        self._run_dir = ""

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
        try:
            # The worker answers with the night's run directory (None from an earlier one).
            run_dir = await workflow.execute_activity(
                REGISTER,
                submission,
                start_to_close_timeout=max(
                    REGISTER_TIMEOUT, timedelta(seconds=submission.heartbeat_s) * 2
                ),
                retry_policy=backoff(submission, submission.retry_for_s),
            )
        except ActivityError as exc:
            kind, words = _failure(exc)
            if kind in FINAL_ERRORS:
                raise
            cause = FLEET_DATABASE_UNREACHABLE if kind == DATABASE_UNREACHABLE else FLEET_RETRIES
            return await self._give_up(submission, f"it could not be registered ({words})", cause)
        self._run_dir = str(run_dir or "")
        self._state = "running"
        if not workflow.patched(BOUNDED_DELIVERIES):
            # A night started by a worker of before: it is carried on as it was begun.
            return await self._unbounded(submission)
        # A night begun before this patch counts a delivery that could not reach the database
        # as lost, as it did then.
        waits_for_database = workflow.patched(BOUNDED_ACTIVITIES)
        end = workflow.now() + deadline_of(submission)
        counted = waits = 0
        unreachable_since: datetime | None = None
        unreachable_tries = 0
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
                unreachable = waits_for_database and kind == DATABASE_UNREACHABLE
                self._deliveries.append(
                    Delivery(
                        n=len(self._deliveries) + 1,
                        worker=exc.identity or "",
                        failure=kind,
                        detail=words,
                        counted=kind not in NOT_COUNTED and not unreachable,
                    )
                )
                if unreachable:
                    now = workflow.now()
                    unreachable_since = unreachable_since or now
                    down = now - unreachable_since
                    if down >= timedelta(seconds=submission.retry_for_s):
                        return await self._give_up(
                            submission,
                            f"the fleet database was unreachable for "
                            f"{down.total_seconds():.0f} s (retry_for_s "
                            f"{submission.retry_for_s:g})",
                            FLEET_DATABASE_UNREACHABLE,
                        )
                    await workflow.sleep(wait_before(unreachable_tries, submission))
                    unreachable_tries += 1
                    continue
                unreachable_since, unreachable_tries = None, 0
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

    async def _give_up(
        self, submission: Submission, why: str, cause: str = FLEET_RETRIES
    ) -> NightOutcome:
        """End the night ``UNRECOVERABLE_ERROR:<cause>``: in its result.json and its row, or,
        when those cannot be written in ``retry_for_s``, in this workflow's result, with a
        workflow of its own left to write them once the database is back."""
        self._state = "giving up"
        give = GiveUp(submission=submission, why=why, deliveries=self._deliveries, cause=cause)
        try:
            outcome: NightOutcome = await workflow.execute_activity(
                GIVE_UP,
                give,
                result_type=NightOutcome,
                start_to_close_timeout=GIVE_UP_TIMEOUT,
                retry_policy=backoff(submission, submission.retry_for_s),
            )
        except ActivityError as exc:
            _, words = _failure(exc)
            outcome = await self._unrecorded(give, words)
        self._state = "finished"
        return outcome

    async def _unrecorded(self, give: GiveUp, words: str) -> NightOutcome:
        """The night's ending when it could not be written: this workflow's result says it,
        and ``RecordWorkflow`` (which outlives this one) writes it once it can."""
        night_id = give.submission.night_id
        record_id = record_id_of(night_id)
        stop = Stop(Ending.UNRECOVERABLE_ERROR, give.cause, give.message())
        verdict = describe(stop)
        message = (
            f"{give.message()}; this ending could not be written yet ({words}): workflow "
            f"{record_id} writes it to result.json and the fleet database once it is back"
        )
        # One recording per night: one under way already is left to it.
        with contextlib.suppress(WorkflowAlreadyStartedError):
            await workflow.start_child_workflow(
                RecordWorkflow.run,
                give,
                id=record_id,
                execution_timeout=timedelta(hours=give.submission.record_for_h) + MARGIN,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            )
        return NightOutcome(
            night_id=night_id,
            run_dir=self._run_dir,
            stop_reason=stop.reason,
            status=verdict.outcome.value,
            exit_code=verdict.exit_code,
            deliveries=len(give.deliveries),
            result={
                "stop_reason": stop.reason,
                "status": verdict.outcome.value,
                "exit_code": verdict.exit_code,
                "resumable": verdict.resumable,
                "message": message,
                "deliveries": [d.model_dump(mode="json") for d in give.deliveries],
                "recorded_by": record_id,
            },
        )

    @workflow.query
    def state(self) -> str:
        return self._state

    @workflow.query
    def deliveries(self) -> list[Delivery]:
        return self._deliveries


def record_id_of(night_id: str) -> str:
    """The id of the workflow that records the ending of night ``night_id``."""
    return f"{night_id}.record"


@workflow.defn(name=RECORD_WORKFLOW_NAME)
class RecordWorkflow:
    """Writes the ending of a night whose give-up could not write it (the fleet database
    unreachable, most often): its ``result.json`` and its row, once it can (the give-up
    activity, retried with the night's backoff for ``record_for_h``). A night that had ended on
    its own before keeps that ending."""

    @workflow.run
    async def run(self, give: GiveUp) -> NightOutcome:
        submission = give.submission
        outcome: NightOutcome = await workflow.execute_activity(
            GIVE_UP,
            give,
            result_type=NightOutcome,
            start_to_close_timeout=GIVE_UP_TIMEOUT,
            retry_policy=backoff(submission, submission.record_for_h * 3600),
        )
        return outcome
