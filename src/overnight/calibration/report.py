"""The calibration report: one result per labelled queue, and what they add up to."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from overnight.calibration.queues import Label
from overnight.core.drift import DRIFT_PRUNE_ABOVE
from overnight.core.endings import DRIFT_HALT_ABOVE

Band = Literal["none", "prune", "halt"]
BANDS: tuple[Band, ...] = ("none", "prune", "halt")
Status = Literal["judged", "unreadable", "not_judged"]

#: Exit codes: the prune line separates the sets / it does not (or was not fully measured) /
#: the provider failed and the calibration stopped.
EXIT_SEPARATES = 0
EXIT_NOT_SEPARATED = 3
EXIT_MODEL_FAILED = 4


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Thresholds(_Model):
    """The gate's lines (both strict): above ``prune_above`` prune, above ``halt_above`` halt."""

    prune_above: float = DRIFT_PRUNE_ABOVE
    halt_above: float = DRIFT_HALT_ABOVE


CONFIGURED = Thresholds()


class QueueResult(_Model):
    """One labelled queue and what the judge said about it."""

    id: str
    label: Label
    severity: float
    expected_off_goal: list[str] = Field(default_factory=list)
    status: Status = "judged"
    score: float | None = None
    band: Band | None = None
    off_goal: list[str] = Field(default_factory=list)
    """The judge's off-goal task ids."""
    agrees: bool = False
    calls: int = 0
    """Calls made for this queue: 1, or 2 when the first verdict was invalid."""
    reasoning: str = ""
    error: str | None = None


class Agreement(_Model):
    agree: int
    judged: int
    """Queues of this label with a readable verdict."""
    total: int


class Distribution(_Model):
    n: int
    min: float | None
    median: float | None
    max: float | None
    scores: list[float]
    """Sorted, lowest first."""


class Separation(_Model):
    separable: bool
    """The highest aligned score is below the lowest drifted score."""
    max_aligned: float | None
    min_drifted: float | None
    window: tuple[float, float] | None
    """Every threshold ``t`` with ``window[0] <= t < window[1]`` separates the sets."""
    at_prune: bool
    at_halt: bool
    suggested_threshold: float | None
    """A threshold inside the window, when the configured prune line is not."""
    direction: Literal["lower", "higher"] | None
    """Where ``suggested_threshold`` lies relative to the prune line."""


class Stopped(_Model):
    reason: Literal["money_cap", "model_error"]
    detail: str


class CalibrationReport(_Model):
    model: str
    thresholds: Thresholds
    queues_total: int
    queues_judged: int
    """Queues with a readable verdict."""
    unreadable: int
    """Queues whose verdict was invalid twice."""
    calls: int
    retries: int
    """Second calls made because the first verdict failed its schema."""
    spend_usd: float
    cap_usd: float
    tokens: int
    stopped: Stopped | None
    results: list[QueueResult]
    agreement: dict[str, Agreement]
    """Per label, and ``all``."""
    confusion: dict[str, dict[str, int]]
    """Label -> band -> count, over the queues with a verdict."""
    distributions: dict[str, Distribution]
    separation: Separation
    severity_order: float | None
    """Of the pairs of drifted queues with different severities, the share whose scores are
    ordered the same way (ties in score count against); None with fewer than two."""
    trusted: bool
    """Every queue has a verdict and the prune line separates the sets."""
    statements: list[str]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def exit_code(self) -> int:
        """0: trusted; 3: not separated or not fully measured; 4: the provider failed."""
        if self.trusted:
            return EXIT_SEPARATES
        if self.stopped is not None and self.stopped.reason == "model_error":
            return EXIT_MODEL_FAILED
        return EXIT_NOT_SEPARATED
