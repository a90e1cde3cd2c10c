"""``[agent]`` in the spec: how the built-in executor works one task."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class AgentSpec(BaseModel):
    """``[agent]``: how the built-in agent works one task."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    max_calls: int = Field(default=6, gt=0, le=200)
    """Model calls per task before it is handed to verify as it stands."""
    max_tokens: int = Field(default=8192, gt=0, le=1_000_000)
    """``max_tokens`` of each execute call."""
    task_tokens: int | None = Field(default=None, gt=0, le=10**12)
    """Tokens billed per task (all fields) before it is handed to verify; none by default."""
    task_seconds: float | None = Field(default=None, gt=0)
    """Seconds per task before it is handed to verify; none by default (the night's clock
    still applies)."""
    loop_repeats: int = Field(default=3, ge=2)
    """The same tool call with the same arguments and the same result this many times in a
    row ends the task as looping."""
    cache: Literal["adaptive", "always", "off"] = "adaptive"
    """Prompt caching: ``adaptive`` measures the gaps between calls per kind of task and
    writes the cache only when a read will follow within the TTL (the 1-hour TTL when the gaps
    are longer than 5 minutes and ``cache_1h`` allows); ``always`` marks 5-minute breakpoints
    from the first call; ``off`` never marks."""
    cache_1h: bool = True
    """Allow the 1-hour TTL where gaps exceed 5 minutes but not an hour."""
    min_cacheable_tokens: int = Field(default=1024, gt=0)
    """The model's minimum cacheable prefix; a shorter prefix is not marked and a first call
    that wrote nothing is recorded as a warning in the trace."""
    compact_at_tokens: int = Field(default=60_000, gt=0)
    """When the conversation's size passes this, a ``compact`` call summarizes it."""
    task_budget: bool = False
    """Send the visible task budget (Anthropic's task-budget beta): the money left converted
    to tokens at the next call's output price."""
    mechanical_model: str | None = None
    """A cheaper model for tasks the planner marks mechanical (must be priced)."""
    max_lessons: int = Field(default=12, ge=0)
    """Lessons shown to later tasks (the most recent ones)."""
    effort: str | None = None
    """Provider effort setting for execute calls; none: the provider's default."""
    instructions: str = ""
    """Project notes appended to the agent's system prompt (conventions, layout, commands).
    Part of the stable, cached prefix: keep anything that changes per task out of it."""
