"""The fleet's effects ledger: the ``EffectStore`` seam on PostgreSQL.

The same two keys as the single-machine SQLite ledger, enforced by the database for every
night of every worker: the run-step key is unique, and a task key is unique among the rows
that did not fail. Each state change is one autocommitted statement: when a call returns, the
row is durable in the database.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import psycopg

from overnight.effects.store import effect_row
from overnight.fleet.database import Pool, reached
from overnight.fleet.lease import HELD_SQL, Lease
from overnight.seams import DuplicateEffect, EffectRow, EffectState, FenceLost


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class PostgresEffectStore:
    """Every night of the fleet writes its effects here (the pool is the worker's)."""

    def __init__(self, pool: Pool, lease: Lease | None = None) -> None:
        self._pool = pool
        self._lease = lease
        """A delivery's lease: an intent is written only while it holds (in the statement)."""
        self._wait_s = None if lease is None else max(lease.ttl_s, 1.0)
        """How long a statement waits for a connection: a delivery's, no longer than its
        lease lasts (the night is being stopped by then); otherwise the pool's own."""

    def _one(self, sql: str, params: tuple[Any, ...]) -> dict[str, Any] | None:
        with reached("effects ledger"), self._pool.connection(timeout=self._wait_s) as conn:
            row: dict[str, Any] | None = conn.execute(sql, params).fetchone()
            return row

    def _all(self, sql: str, params: tuple[Any, ...] = ()) -> list[EffectRow]:
        with reached("effects ledger"), self._pool.connection(timeout=self._wait_s) as conn:
            rows: list[dict[str, Any]] = conn.execute(sql, params).fetchall()
        return [effect_row(r) for r in rows]

    def get(self, step_key: str) -> EffectRow | None:
        r = self._one("SELECT * FROM effects WHERE step_key = %s", (step_key,))
        return None if r is None else effect_row(r)

    def by_task_key(self, task_key: str) -> EffectRow | None:
        r = self._one(
            "SELECT * FROM effects WHERE task_key = %s ORDER BY state = 'failed', id DESC LIMIT 1",
            (task_key,),
        )
        return None if r is None else effect_row(r)

    def intend(
        self,
        run_id: str,
        task_id: str,
        step_key: str,
        task_key: str | None,
        tool: str,
        args: dict[str, Any],
    ) -> EffectRow:
        now = _now()
        params: dict[str, Any] = {
            "run": run_id,
            "task": task_id,
            "step": step_key,
            "key": task_key,
            "tool": tool,
            "args": _dumps(args),
            "now": now,
        }
        fenced = ""
        if self._lease is not None:
            self._lease.check("an effect's intent")
            fenced = f" WHERE {HELD_SQL}"
            params.update(self._lease.params())
        try:
            with reached("effects ledger"), self._pool.connection(timeout=self._wait_s) as conn:
                r: dict[str, Any] | None = conn.execute(
                    "INSERT INTO effects (run_id, task_id, step_key, task_key, tool, args, state,"
                    " created_at, updated_at) SELECT %(run)s, %(task)s, %(step)s, %(key)s,"
                    f" %(tool)s, %(args)s, 'intended', %(now)s, %(now)s{fenced} RETURNING *",
                    params,
                ).fetchone()
        except psycopg.errors.UniqueViolation as exc:
            existing = self.by_task_key(task_key) if task_key else None
            if existing is not None and existing.step_key != step_key:
                raise DuplicateEffect(existing) from exc
            raise
        if r is None:  # the database refused it: this delivery's lease is no longer the night's
            raise FenceLost(f"an effect's intent ({tool}, {step_key}) refused: the lease is lost")
        return effect_row(r)

    def settle(
        self, step_key: str, state: EffectState, result: Any = None, error: str | None = None
    ) -> EffectRow:
        try:
            r = self._one(
                "UPDATE effects SET state = %s, result = %s, error = %s, updated_at = %s "
                "WHERE step_key = %s RETURNING *",
                (state, None if result is None else _dumps(result), error, _now(), step_key),
            )
        except psycopg.errors.UniqueViolation as exc:  # a failed row taken up again
            existing = self._task_key_holder(step_key)
            if existing is None:
                raise
            raise DuplicateEffect(existing) from exc
        if r is None:
            raise KeyError(f"no effect row has step key {step_key!r}")
        return effect_row(r)

    def _task_key_holder(self, step_key: str) -> EffectRow | None:
        """The row of another step that holds the task key of ``step_key``'s row."""
        row = self.get(step_key)
        holder = self.by_task_key(row.task_key) if row is not None and row.task_key else None
        return holder if holder is not None and holder.step_key != step_key else None

    def for_run(self, run_id: str) -> list[EffectRow]:
        return self._all("SELECT * FROM effects WHERE run_id = %s ORDER BY id", (run_id,))

    def for_task(self, run_id: str, task_id: str) -> list[EffectRow]:
        return self._all(
            "SELECT * FROM effects WHERE run_id = %s AND task_id = %s ORDER BY id",
            (run_id, task_id),
        )

    def all(self) -> list[EffectRow]:
        return self._all("SELECT * FROM effects ORDER BY id")

    def resolve(self, item: str, note: str) -> None:
        self._one(
            "INSERT INTO review_resolutions (item, note, resolved_at) VALUES (%s, %s, %s) "
            "RETURNING id",
            (item, note, _now()),
        )

    def resolutions(self) -> dict[str, str]:
        with reached("effects ledger"), self._pool.connection(timeout=self._wait_s) as conn:
            rows: list[dict[str, Any]] = conn.execute(
                "SELECT item, note FROM review_resolutions ORDER BY id"
            ).fetchall()
        return {str(r["item"]): str(r["note"]) for r in rows}

    def close(self) -> None:
        """The pool belongs to the worker: a night closing its ledger leaves it open."""
