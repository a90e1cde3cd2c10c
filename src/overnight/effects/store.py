"""Where effects are written down: the SQLite implementation of the ``EffectStore`` seam.

Each state change is one transaction on a database in WAL mode with ``synchronous=FULL``:
when a call returns, the row is on disk. Two keys are enforced by the database itself: the
run-step key (unique: a resume reproduces it and finds the row) and the task-scoped key
(unique when set: a second delivery of the same task, as a fresh run, collides with the first
attempt's row whatever the model believes).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from overnight.core.errors import DiskFull
from overnight.seams import DuplicateEffect, EffectRow, EffectState

SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    step_key TEXT NOT NULL UNIQUE,
    task_key TEXT,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('intended', 'confirmed', 'failed', 'unknown')),
    result TEXT,
    error TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS effects_by_run ON effects (run_id, task_id);
-- A task key names an effect that may be performed once. A row the provider refused for good
-- ('failed') does not hold it: a corrected attempt may follow.
CREATE UNIQUE INDEX IF NOT EXISTS effects_task_key ON effects (task_key)
    WHERE task_key IS NOT NULL AND state != 'failed';
CREATE TABLE IF NOT EXISTS review_resolutions (
    id INTEGER PRIMARY KEY,
    item TEXT NOT NULL,
    note TEXT NOT NULL,
    resolved_at TEXT NOT NULL
);
"""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def effect_row(r: Mapping[str, Any]) -> EffectRow:
    """An ``EffectRow`` from a database row of the ``effects`` table (SQLite or PostgreSQL:
    the same columns, JSON kept as text)."""
    return EffectRow(
        run_id=r["run_id"],
        task_id=r["task_id"],
        step_key=r["step_key"],
        task_key=r["task_key"],
        tool=r["tool"],
        args=json.loads(r["args"]),
        state=r["state"],
        result=None if r["result"] is None else json.loads(r["result"]),
        error=r["error"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
    )


class SqliteEffectStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._full_disk_is_disk_full():
            if not path.exists():
                os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))  # sqlite keeps its mode
            self._db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(SCHEMA)

    @contextmanager
    def _full_disk_is_disk_full(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "full" in str(exc).lower():
                raise DiskFull(f"effects ledger {self.path}: {exc}") from exc
            raise

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._full_disk_is_disk_full(), self._db:  # one transaction per state change
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(sql, params)

    def get(self, step_key: str) -> EffectRow | None:
        r = self._db.execute("SELECT * FROM effects WHERE step_key = ?", (step_key,)).fetchone()
        return None if r is None else effect_row(r)

    def by_task_key(self, task_key: str) -> EffectRow | None:
        r = self._db.execute(
            "SELECT * FROM effects WHERE task_key = ? ORDER BY state = 'failed', id DESC",
            (task_key,),
        ).fetchone()
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
        try:
            self._write(
                "INSERT INTO effects (run_id, task_id, step_key, task_key, tool, args, state,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'intended', ?, ?)",
                (
                    run_id,
                    task_id,
                    step_key,
                    task_key,
                    tool,
                    json.dumps(args, sort_keys=True, default=str),
                    now,
                    now,
                ),
            )
        except sqlite3.IntegrityError as exc:
            existing = self.by_task_key(task_key) if task_key else None
            if existing is not None and existing.step_key != step_key:
                raise DuplicateEffect(existing) from exc
            raise
        row = self.get(step_key)
        assert row is not None
        return row

    def settle(
        self, step_key: str, state: EffectState, result: Any = None, error: str | None = None
    ) -> EffectRow:
        try:
            self._write(
                "UPDATE effects SET state = ?, result = ?, error = ?, updated_at = ? "
                "WHERE step_key = ?",
                (
                    state,
                    None if result is None else json.dumps(result, sort_keys=True, default=str),
                    error,
                    _now(),
                    step_key,
                ),
            )
        except sqlite3.IntegrityError as exc:  # a failed row taken up again
            mine = self.get(step_key)
            holder = self.by_task_key(mine.task_key) if mine and mine.task_key else None
            if holder is None or holder.step_key == step_key:
                raise
            raise DuplicateEffect(holder) from exc
        row = self.get(step_key)
        assert row is not None
        return row

    def for_run(self, run_id: str) -> list[EffectRow]:
        rows = self._db.execute(
            "SELECT * FROM effects WHERE run_id = ? ORDER BY id", (run_id,)
        ).fetchall()
        return [effect_row(r) for r in rows]

    def for_task(self, run_id: str, task_id: str) -> list[EffectRow]:
        rows = self._db.execute(
            "SELECT * FROM effects WHERE run_id = ? AND task_id = ? ORDER BY id",
            (run_id, task_id),
        ).fetchall()
        return [effect_row(r) for r in rows]

    def all(self) -> list[EffectRow]:
        return [effect_row(r) for r in self._db.execute("SELECT * FROM effects ORDER BY id")]

    def resolve(self, item: str, note: str) -> None:
        self._write(
            "INSERT INTO review_resolutions (item, note, resolved_at) VALUES (?, ?, ?)",
            (item, note, _now()),
        )

    def resolutions(self) -> dict[str, str]:
        rows = self._db.execute("SELECT item, note FROM review_resolutions ORDER BY id")
        return {r["item"]: r["note"] for r in rows}

    def close(self) -> None:
        self._db.close()
