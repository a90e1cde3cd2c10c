"""The ``[alerts]`` section: what ``alert`` and ``page`` do when a night ends."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from overnight.core.endings import Ending

Action = Literal["none", "alert", "page"]


class AlertAction(BaseModel):
    """What one urgency does: a ``command`` or a ``webhook``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    command: str | None = None
    """A shell command run with result.json on its standard input (secrets scrubbed from its
    environment)."""
    webhook: str | None = None
    """A URL that receives result.json as a JSON POST."""
    timeout_s: float = Field(default=30.0, gt=0)
    """Seconds before the command or the POST is abandoned (and recorded as failed)."""

    @model_validator(mode="after")
    def _one_way(self) -> AlertAction:
        if (self.command is None) == (self.webhook is None):
            raise ValueError("an alert action has exactly one of `command` or `webhook`")
        if self.webhook is not None and urlsplit(self.webhook).scheme not in ("http", "https"):
            raise ValueError("webhook must be an http:// or https:// URL")
        return self


class AlertsSpec(BaseModel):
    """``[alerts]``: what ``alert`` and ``page`` do when a night ends, and which endings
    call for which."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    alert: AlertAction | None = None
    """What ``alert`` does (by default: PARTIAL and FAILURE endings)."""
    page: AlertAction | None = None
    """What ``page`` does (by default: DRIFT_DETECTED, the run was spending on the wrong
    problem). Without a ``page`` action, a page falls back to ``alert``."""
    routes: dict[str, Action] = Field(default_factory=dict)
    """Override the urgency of an ending or a class, e.g. ``QUEUE_EMPTY_GOAL_UNMET = "page"``
    or ``SUCCESS = "alert"``. Endings win over classes."""

    @model_validator(mode="after")
    def _known_routes(self) -> AlertsSpec:
        known = {str(e) for e in Ending} | {"SUCCESS", "PARTIAL", "FAILURE"}
        unknown = sorted(set(self.routes) - known)
        if unknown:
            raise ValueError(f"unknown endings or classes in routes: {unknown}")
        return self
