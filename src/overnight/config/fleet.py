"""The ``[fleet]`` section: what a night run by a fleet worker shares with the other nights.

A night run on its own ignores it; a fleet worker (``overnight fleet worker``) reads it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class FleetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    usd_per_day: float | None = Field(default=None, gt=0)
    """The fleet's money cap for one UTC day, in dollars, shared by every night of the fleet
    database: each model call of each night holds its worst case against it before it is
    made, and a call that would cross it ends its night ``BUDGET_EXHAUSTED:fleet_money``
    (resumable). Unset: the worker's ``--usd-per-day``, or no fleet cap. The night's own
    ``[budget] usd`` applies as well."""
    max_deliveries: int = Field(default=3, ge=1)
    """How many deliveries of the night may be lost (a worker killed, frozen or partitioned
    away, a night stalled) before the fleet gives up on it: it then ends
    ``UNRECOVERABLE_ERROR:fleet_retries`` with every delivery listed, in the review queue. A
    delivery handed back by a worker's shutdown does not count."""
    stall_s: float = Field(default=900.0, gt=0)
    """Seconds without progress (no trace event, no model call, no command output) after
    which a worker hands the night back: it drains it (ending the command in flight) and the
    night is delivered again, resuming. Counts as a lost delivery."""
