"""Nights that recur: a Temporal Schedule submits the night on its cron.

Each run the schedule starts is a night of its own, its id the schedule's id and the
scheduled time (``<schedule>-2026-12-07T220000Z``), run from the spec as it was when the
schedule was made. A run due while the previous one is still going is skipped (the default),
or buffered, one at most (``buffer_one``).
"""

from __future__ import annotations

from typing import Any

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleHandle,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)
from temporalio.service import RPCError, RPCStatusCode

from overnight.core.errors import ConfigError
from overnight.fleet.submission import DEFAULT_TASK_QUEUE, Submission
from overnight.fleet.workflow import NightWorkflow, execution_timeout_of

#: Room left in a night id for the scheduled time Temporal appends (``-2026-12-07T220000Z``).
MAX_SCHEDULE_ID = 100


async def create(
    client: Client,
    submission: Submission,
    cron: str,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    buffer_one: bool = False,
) -> dict[str, Any]:
    """A schedule named ``submission.night_id`` submitting the night on ``cron``."""
    schedule_id = submission.night_id
    if len(schedule_id) > MAX_SCHEDULE_ID:
        raise ConfigError("--id", f"at most {MAX_SCHEDULE_ID} characters for a schedule")
    overlap = ScheduleOverlapPolicy.BUFFER_ONE if buffer_one else ScheduleOverlapPolicy.SKIP
    action = ScheduleActionStartWorkflow(
        NightWorkflow.run,
        submission.model_copy(update={"schedule": schedule_id}),
        id=schedule_id,
        task_queue=task_queue,
        execution_timeout=execution_timeout_of(submission),
    )
    try:
        await client.create_schedule(
            schedule_id,
            Schedule(
                action=action,
                spec=ScheduleSpec(cron_expressions=[cron]),
                policy=SchedulePolicy(overlap=overlap),
            ),
        )
    except ScheduleAlreadyRunningError:
        raise ConfigError(
            "--id",
            f"a schedule {schedule_id} exists already",
            f"delete it first (overnight fleet schedule delete {schedule_id}) or pick an --id",
        ) from None
    except RPCError as exc:
        if exc.status == RPCStatusCode.INVALID_ARGUMENT:
            raise ConfigError("--cron", exc.message, 'e.g. --cron "0 22 * * 1-5"') from None
        raise
    return await describe(client, schedule_id)


async def describe(client: Client, schedule_id: str) -> dict[str, Any]:
    desc = await _handle(client, schedule_id).describe()
    spec = desc.schedule.spec
    return {
        "schedule": schedule_id,
        "cron": list(spec.cron_expressions),
        "paused": desc.schedule.state.paused,
        "overlap": desc.schedule.policy.overlap.name,
        "next": [t.isoformat() for t in desc.info.next_action_times[:3]],
        "runs": [
            a.action.workflow_id
            for a in desc.info.recent_actions
            if isinstance(a.action, ScheduleActionExecutionStartWorkflow)
        ],
    }


async def listed(client: Client) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async for entry in await client.list_schedules():
        out.append(await describe(client, entry.id))
    return sorted(out, key=lambda s: str(s["schedule"]))


async def act(client: Client, action: str, schedule_id: str) -> dict[str, Any]:
    """``pause``, ``resume`` or ``delete`` the schedule."""
    handle = _handle(client, schedule_id)
    try:
        if action == "pause":
            await handle.pause(note="paused with overnight fleet schedule pause")
        elif action == "resume":
            await handle.unpause(note="resumed with overnight fleet schedule resume")
        else:
            await handle.delete()
            return {"schedule": schedule_id, "deleted": True}
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise ConfigError(
                "NAME", f"no schedule {schedule_id}", "see overnight fleet schedule list"
            ) from None
        raise
    return await describe(client, schedule_id)


def _handle(client: Client, schedule_id: str) -> ScheduleHandle:
    return client.get_schedule_handle(schedule_id)
