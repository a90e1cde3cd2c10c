"""Where a judged task goes next: the one routing of a verify's outcome, for a lap and for the
task a resume finds in flight alike.

A lap's task that is not done is tried again while it has attempts left (and the agent did not
loop); the task a dead process left in flight goes back to the front of the queue, its attempt
counted. Work whose effects a person must settle first is held before any routing, by the
caller. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from overnight.core.resume import VerifyOutcome


def cannot_run_reason_text(why: str) -> str:
    """The reason a task is parked with when its verify could not run."""
    return f"the verify command could not run ({why or 'no verdict'})"


class Route(Enum):
    LAND = "land"
    """Verified: the candidate goes on the branch."""
    RETRY = "retry"
    """Not done, attempts left: the lap runs it again, its edits kept."""
    REQUEUE = "requeue"
    """Not done, found in flight by a resume: back to the front of the queue."""
    PARK = "park"
    """Not done for good: its work is saved as a patch, the reason said."""


@dataclass(frozen=True)
class Routed:
    route: Route
    reason: str = ""
    """Why it is parked (empty otherwise)."""


def route_verdict(
    outcome: VerifyOutcome,
    *,
    cannot_run: str = "",
    resumed: bool = False,
    looping: bool = False,
    attempt: int = 1,
    retries: int = 0,
    steps_exhausted: bool = False,
) -> Routed:
    """Where a task whose verify said ``outcome`` goes: for a lap, ``looping`` (the agent
    repeated the same call with the same result), its ``attempt`` against ``retries`` and
    the night's steps decide between a retry and parking; ``resumed``: the task a dead
    process left in flight."""
    if outcome is VerifyOutcome.DONE:
        return Routed(Route.LAND)
    if outcome is VerifyOutcome.PARTIAL:
        if resumed:
            return Routed(Route.PARK, "resumed into a partially applied state; needs a human")
        return Routed(Route.PARK, "verify reports a partially applied state")
    if outcome is VerifyOutcome.CANNOT_RUN:  # it would not run the next time either
        return Routed(Route.PARK, cannot_run_reason_text(cannot_run))
    if resumed:
        return Routed(Route.REQUEUE)
    if looping:  # the same inputs would loop again: no retry
        return Routed(Route.PARK, "the agent repeated the same tool call with the same result")
    if attempt > retries or steps_exhausted:
        return Routed(Route.PARK, f"not done after {attempt} attempt(s)")
    return Routed(Route.RETRY)
