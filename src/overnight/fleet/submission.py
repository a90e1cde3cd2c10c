"""What a fleet workflow carries: the night submitted and how it ended. Plain data, shared by
the client, the workflow and the activities (serialized by the SDK's pydantic converter)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from overnight.core.errors import ConfigError

DEFAULT_TASK_QUEUE = "overnight-nights"

#: The error type a refused night's workflow fails with: its details are the ``ConfigError``'s
#: field, problem and fix. No retry changes a refusal.
REFUSED = "NightRefused"

#: The error type of an activity that could not reach the fleet database: a retry may fix it,
#: and a delivery that fails so is not the night's fault.
DATABASE_UNREACHABLE = "DatabaseUnreachable"

#: The causes a night the fleet gives up ends with (``UNRECOVERABLE_ERROR:<cause>``): its
#: deliveries were lost too often or for too long; its database could not be reached.
FLEET_RETRIES = "fleet_retries"
FLEET_DATABASE_UNREACHABLE = "fleet_database_unreachable"

#: Night ids are workflow ids and directory names under the worker's ``--runs``.
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class Submission(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["night_submission"] = "night_submission"
    night_id: str
    """The workflow id: the night's idempotency key."""
    spec_path: str
    """Where the night.toml was submitted from (shown in status; never read again)."""
    spec: dict[str, Any] | None = None
    """The night's spec, resolved as the submitter read it (what ``RUN_DIR/spec.json``
    holds): every delivery runs from this, so moving or editing the file changes nothing.
    None only in a night submitted by an earlier overnight, which read ``spec_path``."""
    spec_sha256: str | None = None
    """The hash of ``spec`` (``spec_hash``): the same id with another spec is refused."""
    hours: float
    """The night's wall-clock budget: each delivery of it is given this much and a margin."""
    heartbeat_s: float = Field(default=10.0, gt=0)
    """A worker that stops heartbeating for this long is taken for dead: another one
    resumes the night."""
    schedule: str | None = None
    """The schedule that submits this night: each run's night id is the schedule's id and the
    scheduled time (``scheduled_night_id``), not ``night_id``."""
    retry_of: str | None = None
    """The failed night this one retries (``fleet submit --retry``)."""
    max_deliveries: int = Field(default=3, ge=1)
    """The spec's ``[fleet] max_deliveries``: lost deliveries before the night is given up."""
    stall_s: float = Field(default=900.0, gt=0)
    """The spec's ``[fleet] stall_s``: a night without progress this long is handed back."""
    retry_for_s: float = Field(default=600.0, gt=0)
    """The spec's ``[fleet] retry_for_s``: how long an unreachable database is tried."""
    retry_first_s: float = Field(default=1.0, gt=0)
    """The spec's ``[fleet] retry_first_s``: the first wait before trying it again."""
    retry_max_s: float = Field(default=60.0, gt=0)
    """The spec's ``[fleet] retry_max_s``: the longest wait between two tries."""
    record_for_h: float = Field(default=72.0, gt=0)
    """The spec's ``[fleet] record_for_h``: how long the ending of a night given up while
    its database was unreachable is tried to be recorded."""

    @field_validator("night_id")
    @classmethod
    def _a_directory_name(cls, value: str) -> str:
        # A submission may come from any Temporal client, not only ours: the id names a
        # directory under the worker's --runs and must never leave it.
        if not _ID.match(value):
            raise ValueError(f"{value!r} is not a night id")
        return value

    @model_validator(mode="after")
    def _hash_matches(self) -> Submission:
        if (self.spec is None) != (self.spec_sha256 is None) or (
            self.spec is not None and spec_hash(self.spec) != self.spec_sha256
        ):
            raise ValueError("spec_sha256 is not the hash of spec")
        return self

    @model_validator(mode="after")
    def _backoff_in_order(self) -> Submission:
        if self.retry_max_s < self.retry_first_s:
            raise ValueError("retry_max_s is shorter than retry_first_s")
        return self


def spec_hash(spec: dict[str, Any]) -> str:
    """The hash of a resolved spec, over its canonical JSON."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class Delivery(BaseModel):
    """One delivery of a night that did not end it."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["night_delivery"] = "night_delivery"
    n: int
    worker: str
    """The identity of the worker that had it (``host:pid``)."""
    failure: str
    """How it ended: ``HeartbeatTimeout``, ``NightStalled``, ``NightDrained``, ..."""
    detail: str
    counted: bool
    """Whether it counts against ``max_deliveries`` (a drain, a busy night or an unreachable
    database does not)."""

    def line(self) -> str:
        return f"#{self.n} on {self.worker or 'unknown worker'}: {self.failure} ({self.detail})"


class GiveUp(BaseModel):
    """What the workflow hands the activity that ends a night it will not deliver again."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["night_give_up"] = "night_give_up"
    submission: Submission
    why: str
    deliveries: list[Delivery]
    cause: str = FLEET_RETRIES
    """The detail of the night's ending: ``UNRECOVERABLE_ERROR:<cause>``."""

    def message(self) -> str:
        """Why the fleet gave up, with every delivery listed."""
        if not self.deliveries:
            return f"the fleet gave up on this night: {self.why}"
        lines = "; ".join(d.line() for d in self.deliveries)
        return (
            f"the fleet gave up on this night: {self.why}, after "
            f"{len(self.deliveries)} lost deliveries: {lines}"
        )


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


def night_id_for(goal: str, workspace: Path, day: date) -> str:
    """The default idempotency key: the same goal on the same workspace on the same (UTC) day
    is the same night; the next day it is a new one."""
    digest = hashlib.sha256(f"{goal}\0{workspace.resolve()}".encode()).hexdigest()
    return f"night-{digest[:20]}-{day:%Y%m%d}"


def scheduled_night_id(workflow_id: str) -> str:
    """The night id of a scheduled run: Temporal names it ``<schedule>-<RFC 3339 time>``; the
    colons go, the rest is a night id."""
    return workflow_id.replace(":", "")


def check_night_id(night_id: str) -> str:
    if not _ID.match(night_id):
        raise ConfigError(
            "--id",
            f"{night_id!r} is not a night id",
            "use letters, digits, '.', '_' and '-' (at most 128, starting with a letter or digit)",
        )
    return night_id


def refusal_details(exc: ConfigError) -> tuple[str, str, str]:
    """What a refusal carries across Temporal: enough to raise the same ``ConfigError``."""
    return (exc.field, exc.problem, exc.fix)


def refusal_of(details: Sequence[Any]) -> ConfigError:
    """The ``ConfigError`` a refused night's failure carries (see ``refusal_details``)."""
    field, problem, fix = [*details, "", "", ""][:3]
    return ConfigError(str(field or "spec"), str(problem or "refused"), str(fix or ""))
