"""The night as a Temporal workflow. Deterministic and free of I/O: it registers the night and
has it carried out by activities (``overnight.fleet.activities``), which do all the work.

The carrying-out activity heartbeats while the night runs. When its worker dies, the heartbeat
timeout expires and Temporal retries the activity on another worker, which resumes the same
run directory: the task left in flight is verified, never executed again.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from overnight.fleet.submission import NightOutcome, Submission

WORKFLOW_NAME = "overnight-night"
REGISTER = "register_night"
CARRY_OUT = "carry_out_night"

#: Errors a retry cannot fix: the activity fails for good and so does the workflow.
FINAL_ERRORS = ["ConfigError"]


@workflow.defn(name=WORKFLOW_NAME)
class NightWorkflow:
    def __init__(self) -> None:
        self._state = "queued"

    @workflow.run
    async def run(self, submission: Submission) -> NightOutcome:
        await workflow.execute_activity(
            REGISTER,
            submission,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
        )
        self._state = "running"
        margin = timedelta(minutes=10)
        outcome: NightOutcome = await workflow.execute_activity(
            CARRY_OUT,
            submission,
            result_type=NightOutcome,
            start_to_close_timeout=timedelta(hours=submission.hours) * 1.25 + margin,
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

    @workflow.query
    def state(self) -> str:
        return self._state
