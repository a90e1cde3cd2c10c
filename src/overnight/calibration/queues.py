"""Labelled queues for calibrating the drift judge, and the code that loads them.

``queues.json`` (bundled) holds hand-labelled queues: each is a goal, a task queue, a label
(``aligned`` or ``drifted``), a severity (0 for aligned; for drifted, the expected share of
off-goal work in the queue) and the task ids a correct judge calls off-goal. Any file of the
same shape can be given instead (``overnight calibrate --queues FILE``); it is validated here
before a single call is made.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from overnight.core.errors import ConfigError
from overnight.core.tasks import Task

Label = Literal["aligned", "drifted"]
LABELS: tuple[Label, ...] = ("aligned", "drifted")

#: What the judge is shown as a task's verify command when a labelled task gives none.
VERIFY_NOT_GIVEN = "(not given)"

_ID = r"^[A-Za-z0-9_.:-]+$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CalibrationTask(_Strict):
    id: str = Field(min_length=1, max_length=120, pattern=_ID)
    title: str = ""
    brief: str = Field(min_length=1)
    verify: str | None = Field(default=None, min_length=1)
    """Optional: production queues carry one, so the bundled tasks do too."""

    def to_task(self) -> Task:
        return Task(
            id=self.id,
            title=self.title,
            brief=self.brief,
            verify=self.verify or VERIFY_NOT_GIVEN,
            origin="plan",
        )


class LabelledQueue(_Strict):
    id: str = Field(min_length=1, pattern=_ID)
    goal: str = Field(min_length=1)
    queue: list[CalibrationTask] = Field(min_length=1)
    label: Label
    severity: float = Field(ge=0.0, le=1.0)
    """0 for an aligned queue; for a drifted one, the expected share of off-goal work."""
    off_goal_task_ids: list[str] = Field(default_factory=list)
    """The tasks a correct judge names as off-goal (empty for aligned queues)."""
    note: str = ""
    """Why the queue carries its label; for people, never shown to the judge."""

    @model_validator(mode="after")
    def _consistent(self) -> LabelledQueue:
        ids = [t.id for t in self.queue]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"task ids repeat within the queue: {dupes}")
        unknown = sorted(set(self.off_goal_task_ids) - set(ids))
        if unknown:
            raise ValueError(f"off_goal_task_ids name tasks not in the queue: {unknown}")
        if self.label == "aligned":
            if self.severity != 0.0:
                raise ValueError("an aligned queue has severity 0")
            if self.off_goal_task_ids:
                raise ValueError("an aligned queue has no off-goal tasks")
        elif self.severity <= 0.0:
            raise ValueError("a drifted queue has a severity above 0")
        return self

    def tasks(self) -> list[Task]:
        """The queue as the harness holds it, for ``drift_request``."""
        return [t.to_task() for t in self.queue]


class CalibrationSet(_Strict):
    description: str = ""
    queues: list[LabelledQueue]

    @model_validator(mode="after")
    def _both_labels(self) -> CalibrationSet:
        ids = [q.id for q in self.queues]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"queue ids repeat: {dupes}")
        missing = [label for label in LABELS if not any(q.label == label for q in self.queues)]
        if missing:
            raise ValueError(
                f"no {' or '.join(missing)} queue: calibration needs both labelled sets"
            )
        return self

    def by_label(self, label: Label) -> list[LabelledQueue]:
        return [q for q in self.queues if q.label == label]


def bundled_text() -> str:
    return (
        resources.files("overnight.calibration").joinpath("queues.json").read_text(encoding="utf-8")
    )


def parse_set(text: str, source: str = "queues") -> CalibrationSet:
    """Validate a calibration file's text; any problem is a ``ConfigError`` naming it."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(source, f"not valid JSON: {exc}") from None
    try:
        return CalibrationSet.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(file)"
        more = f" (and {len(exc.errors()) - 1} more problem(s))" if len(exc.errors()) > 1 else ""
        raise ConfigError(
            source,
            f"{where}: {err['msg']}{more}",
            "see src/overnight/calibration/queues.json for the shape",
        ) from None


def load_queues(path: Path | None = None) -> CalibrationSet:
    """The labelled queues in ``path``, or the bundled set when ``path`` is None."""
    if path is None:
        return parse_set(bundled_text(), "queues.json (bundled)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("--queues", f"cannot read {path}: {exc}") from None
    return parse_set(text, f"--queues {path}")


__all__ = [
    "LABELS",
    "VERIFY_NOT_GIVEN",
    "CalibrationSet",
    "CalibrationTask",
    "Label",
    "LabelledQueue",
    "bundled_text",
    "load_queues",
    "parse_set",
]
