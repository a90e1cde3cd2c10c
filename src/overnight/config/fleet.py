"""The ``[fleet]`` section: what a night run by a fleet worker shares with the other nights.

A night run on its own ignores it; a fleet worker (``overnight fleet worker``) reads it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class FleetSpec(BaseModel):
    """``[fleet]``: what a night run by a fleet worker shares with the fleet."""

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
    retry_for_s: float = Field(default=600.0, gt=0)
    """How long the fleet keeps trying when its database cannot be reached, in seconds.
    Registering the night and giving it up are retried (with the backoff below) for as many
    attempts as fit in this time; a delivery that cannot reach the database is delivered
    again, not counted against ``max_deliveries``, until the database has been unreachable
    this long in a row. Then the night ends ``UNRECOVERABLE_ERROR:fleet_database_unreachable``
    and its workflow closes."""
    retry_first_s: float = Field(default=1.0, gt=0)
    """The first wait before trying the database again, in seconds; each wait doubles, up to
    ``retry_max_s``."""
    retry_max_s: float = Field(default=60.0, gt=0)
    """The longest wait between two tries of the database, in seconds."""
    record_for_h: float = Field(default=72.0, gt=0)
    """A night the fleet gave up while its database could not be reached ends at once, in
    its workflow's result; a workflow of its own (``<night id>.record``) writes that ending to
    ``result.json`` and the night's row once the database is back, trying for this many
    hours."""

    @model_validator(mode="after")
    def _backoff_in_order(self) -> FleetSpec:
        if self.retry_max_s < self.retry_first_s:
            raise ValueError(
                f"retry_max_s ({self.retry_max_s:g}) is shorter than retry_first_s "
                f"({self.retry_first_s:g})"
            )
        return self
