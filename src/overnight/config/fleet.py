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
