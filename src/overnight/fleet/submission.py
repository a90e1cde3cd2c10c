"""What a fleet workflow carries: the night submitted and how it ended. Plain data, shared by
the client, the workflow and the activities (serialized by the SDK's pydantic converter)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from overnight.core.errors import ConfigError

DEFAULT_TASK_QUEUE = "overnight-nights"

#: Night ids are workflow ids and directory names under the worker's ``--runs``.
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class Submission(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["night_submission"] = "night_submission"
    night_id: str
    """The workflow id: the night's idempotency key."""
    spec_path: str
    """The night.toml, by an absolute path every worker reaches."""
    hours: float
    """The night's wall-clock budget: each delivery of it is given this much and a margin."""
    heartbeat_s: float = Field(default=10.0, gt=0)
    """A worker that stops heartbeating for this long is taken for dead: another one
    resumes the night."""

    @field_validator("night_id")
    @classmethod
    def _a_directory_name(cls, value: str) -> str:
        # A submission may come from any Temporal client, not only ours: the id names a
        # directory under the worker's --runs and must never leave it.
        if not _ID.match(value):
            raise ValueError(f"{value!r} is not a night id")
        return value


class NightOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["night_outcome"] = "night_outcome"
    night_id: str
    run_dir: str
    stop_reason: str
    status: str
    """SUCCESS, PARTIAL or FAILURE."""
    exit_code: int
    deliveries: int
    """How many times a worker took the night (more than one: it was resumed)."""
    result: dict[str, Any]


def night_id_for(goal: str, workspace: Path) -> str:
    """The default idempotency key: the same goal on the same workspace is the same night."""
    digest = hashlib.sha256(f"{goal}\0{workspace.resolve()}".encode()).hexdigest()
    return f"night-{digest[:20]}"


def check_night_id(night_id: str) -> str:
    if not _ID.match(night_id):
        raise ConfigError(
            "--id",
            f"{night_id!r} is not a night id",
            "use letters, digits, '.', '_' and '-' (at most 128, starting with a letter or digit)",
        )
    return night_id
