"""The fleet's record of its nights: one row per night, with its ``result.json`` once it
has one.

A night's row is written when its workflow starts (``queued``), marked ``running`` by the
worker that takes it (each delivery counts an attempt), and ``finished`` with the result the
night ended with. A night drained by a worker's shutdown is ``running`` again on the worker
that resumes it: the report shows it as running, never as missing or as done.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from psycopg.types.json import Jsonb

from overnight.core.errors import ConfigError
from overnight.fleet.database import Pool, reached

NightState = Literal["queued", "running", "finished", "refused"]


@dataclass(frozen=True)
class NightRow:
    night_id: str
    spec_path: str
    run_dir: str
    state: NightState
    worker: str | None
    attempts: int
    submitted_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result: dict[str, Any] | None
    refusal: str | None = None
    """Why a worker could not start the night (a spec or set-up error no retry fixes)."""
    retry_of: str | None = None
    """The failed night this one retries."""
    schedule: str | None = None
    """The schedule that submitted it."""

    def as_json(self) -> dict[str, Any]:
        return {
            "night_id": self.night_id,
            "spec_path": self.spec_path,
            "run_dir": self.run_dir,
            "state": self.state,
            "worker": self.worker,
            "attempts": self.attempts,
            "submitted_at": self.submitted_at.isoformat(),
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "stop_reason": (self.result or {}).get("stop_reason"),
            "refusal": self.refusal,
            "retry_of": self.retry_of,
            "schedule": self.schedule,
        }


def _night(r: dict[str, Any]) -> NightRow:
    result = r["result"]
    if isinstance(result, str):
        result = json.loads(result)
    return NightRow(
        night_id=r["night_id"],
        spec_path=r["spec_path"],
        run_dir=r["run_dir"],
        state=r["state"],
        worker=r["worker"],
        attempts=int(r["attempts"]),
        submitted_at=r["submitted_at"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
        result=result,
        refusal=r.get("refusal"),
        retry_of=r.get("retry_of"),
        schedule=r.get("schedule"),
    )


class Nights:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def _execute(self, sql: str, params: tuple[Any, ...], timeout: float | None = None) -> None:
        with reached("nights"), self._pool.connection(timeout=timeout) as conn:
            conn.execute(sql, params)

    def queued(
        self,
        night_id: str,
        spec_path: str,
        run_dir: str,
        spec_sha256: str | None,
        *,
        retry_of: str | None = None,
        schedule: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """The night was submitted (a second submission of the same night changes nothing).
        A ``ConfigError`` when the id is already the fleet's night of another spec.
        ``timeout``: how long to wait for a connection (here and below; the pool's own by
        default) before the database counts as unreachable."""
        with reached("nights"), self._pool.connection(timeout=timeout) as conn:
            row: dict[str, Any] | None = conn.execute(
                "INSERT INTO nights AS n (night_id, spec_path, run_dir, state, spec_sha256,"
                " retry_of, schedule) VALUES (%s, %s, %s, 'queued', %s, %s, %s)"
                " ON CONFLICT (night_id) DO UPDATE"
                " SET spec_sha256 = coalesce(n.spec_sha256, excluded.spec_sha256)"
                " RETURNING spec_sha256",
                (night_id, spec_path, run_dir, spec_sha256, retry_of, schedule),
            ).fetchone()
        held = None if row is None else row["spec_sha256"]
        if held is not None and spec_sha256 is not None and held != spec_sha256:
            raise ConfigError(
                "--id",
                f"night {night_id} is the fleet's night of another spec (sha256 {held[:12]})",
                "give this spec an id of its own",
            )

    def running(
        self,
        night_id: str,
        spec_path: str,
        run_dir: str,
        worker: str,
        *,
        timeout: float | None = None,
    ) -> int:
        """A worker took the night; return the delivery's number (1 for the first)."""
        with reached("nights"), self._pool.connection(timeout=timeout) as conn:
            row: dict[str, Any] | None = conn.execute(
                "INSERT INTO nights (night_id, spec_path, run_dir, state, worker, attempts,"
                " started_at) VALUES (%s, %s, %s, 'running', %s, 1, now())"
                " ON CONFLICT (night_id) DO UPDATE SET state = 'running', worker = %s,"
                " attempts = nights.attempts + 1,"
                " started_at = coalesce(nights.started_at, now()), finished_at = NULL"
                " RETURNING attempts",
                (night_id, spec_path, run_dir, worker, worker),
            ).fetchone()
        assert row is not None
        return int(row["attempts"])

    def finished(
        self, night_id: str, result: dict[str, Any], *, timeout: float | None = None
    ) -> None:
        self._execute(
            "UPDATE nights SET state = 'finished', result = %s, finished_at = now()"
            " WHERE night_id = %s",
            (Jsonb(result), night_id),
            timeout,
        )

    def refused(self, night_id: str, why: str) -> None:
        self._execute(
            "UPDATE nights SET state = 'refused', refusal = %s, finished_at = now()"
            " WHERE night_id = %s",
            (why, night_id),
        )

    def get(self, night_id: str, *, timeout: float | None = None) -> NightRow | None:
        with reached("nights"), self._pool.connection(timeout=timeout) as conn:
            row: dict[str, Any] | None = conn.execute(
                "SELECT * FROM nights WHERE night_id = %s", (night_id,)
            ).fetchone()
        return None if row is None else _night(row)

    def since(self, start: datetime | None) -> list[NightRow]:
        """Every night submitted at or after ``start`` (all when None), oldest first."""
        with reached("nights"), self._pool.connection() as conn:
            if start is None:
                rows: list[dict[str, Any]] = conn.execute(
                    "SELECT * FROM nights ORDER BY submitted_at, night_id"
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT * FROM nights WHERE submitted_at >= %s"
                    " OR finished_at >= %s OR state <> 'finished'"
                    " ORDER BY submitted_at, night_id",
                    (start, start),
                ).fetchall()
        return [_night(r) for r in rows]
