"""The fleet database: a PostgreSQL connection pool and the schema's migrations.

Migrations are named and append-only: a database records the names applied to it, a worker
applies the ones it lacks in order (one at a time across workers, under an advisory lock), and
a database that records a name this version does not know was migrated by a newer overnight:
it is refused rather than written with an older idea of the schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool

from overnight.core.errors import ConfigError, DependencyUnavailable

#: The fleet's pool: autocommit connections whose rows are dicts.
Pool = ConnectionPool[psycopg.Connection[DictRow]]

#: (name, SQL). Never edit or reorder an entry once released: add a new one.
MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0001_effects",
        """
        CREATE TABLE effects (
            id BIGSERIAL PRIMARY KEY,
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
        CREATE INDEX effects_by_run ON effects (run_id, task_id);
        CREATE UNIQUE INDEX effects_task_key ON effects (task_key)
            WHERE task_key IS NOT NULL AND state <> 'failed';
        CREATE TABLE review_resolutions (
            id BIGSERIAL PRIMARY KEY,
            item TEXT NOT NULL,
            note TEXT NOT NULL,
            resolved_at TEXT NOT NULL
        );
        """,
    ),
    (
        "0002_fleet_money",
        """
        CREATE TABLE fleet_money_days (
            day DATE PRIMARY KEY,
            spent_nanos BIGINT NOT NULL DEFAULT 0,
            held_nanos BIGINT NOT NULL DEFAULT 0 CHECK (held_nanos >= 0),
            cap_nanos BIGINT,
            last_hold_ok BOOLEAN NOT NULL DEFAULT true
        );
        CREATE TABLE fleet_money_holds (
            call_id TEXT PRIMARY KEY,
            night_id TEXT NOT NULL,
            day DATE NOT NULL REFERENCES fleet_money_days (day),
            nanos BIGINT NOT NULL CHECK (nanos >= 0),
            held_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        CREATE TABLE fleet_money_refusals (
            id BIGSERIAL PRIMARY KEY,
            night_id TEXT NOT NULL,
            day DATE NOT NULL,
            nanos BIGINT NOT NULL,
            would_reach_nanos BIGINT NOT NULL,
            cap_nanos BIGINT NOT NULL,
            refused_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        """,
    ),
    (
        "0003_nights",
        """
        CREATE TABLE nights (
            night_id TEXT PRIMARY KEY,
            spec_path TEXT NOT NULL,
            run_dir TEXT NOT NULL,
            state TEXT NOT NULL
                CHECK (state IN ('queued', 'running', 'finished', 'refused')),
            worker TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            submitted_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            started_at TIMESTAMPTZ,
            finished_at TIMESTAMPTZ,
            result JSONB,
            refusal TEXT
        );
        CREATE INDEX nights_by_submission ON nights (submitted_at);
        """,
    ),
    (
        "0004_night_specs",
        """
        ALTER TABLE nights ADD COLUMN spec_sha256 TEXT;
        """,
    ),
    (
        "0005_night_leases",
        """
        CREATE TABLE night_leases (
            night_id TEXT PRIMARY KEY,
            token BIGINT NOT NULL,
            owner TEXT NOT NULL,
            expires_at TIMESTAMPTZ NOT NULL,
            taken_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        """,
    ),
    (
        "0006_night_links",
        """
        ALTER TABLE nights ADD COLUMN retry_of TEXT;
        ALTER TABLE nights ADD COLUMN schedule TEXT;
        """,
    ),
)

_MIGRATION_LOCK = 7_244_510_001  # any constant: the advisory lock the migrating worker holds

#: How long the pool keeps reconnecting on its own, its waits growing, before it gives up
#: until a statement asks for a connection again: a database back from an outage is reached
#: again within seconds, not after a wait grown over the whole outage.
RECONNECT_S = 10.0


class DatabaseUnreachable(DependencyUnavailable):
    """The fleet database could not be reached: the connection was refused or lost, or none
    came in time. A night ends with it as with any dependency unavailable; the fleet's own
    bookkeeping tries again, for a bounded time (``[fleet] retry_for_s``)."""


def connect_pool(url: str, *, max_size: int = 20, timeout: float = 30.0) -> Pool:
    """A pool of autocommit connections to ``url``; a database that cannot be reached is a
    ``ConfigError`` naming the URL (with the password left out). ``timeout``: how long a
    statement waits for a connection by default.

    One plain connection is tried first: the pool would retry a refused one until its
    timeout and then report only that it timed out, where the driver says why at once. Each
    connection is checked as it is handed out: one the server dropped (a restart, a
    failover) is replaced, not handed to a night."""
    try:
        psycopg.connect(url, connect_timeout=15).close()
    except psycopg.Error as exc:
        raise ConfigError(
            "--database",
            f"cannot connect to {redacted(url)}: {_scrubbed(str(exc), url)}",
            "check the URL and that the server is up",
        ) from None
    pool: Pool = ConnectionPool(
        url,
        connection_class=psycopg.Connection[DictRow],
        min_size=1,
        max_size=max_size,
        kwargs={"autocommit": True, "row_factory": dict_row},
        check=ConnectionPool.check_connection,
        timeout=timeout,
        reconnect_timeout=RECONNECT_S,
        open=False,
    )
    try:
        pool.open(wait=True, timeout=15.0)
    except Exception as exc:  # psycopg_pool raises PoolTimeout with the cause in its text
        pool.close()
        raise ConfigError(
            "--database", f"cannot connect to {redacted(url)}: {exc}", "check the URL"
        ) from None
    return pool


def _scrubbed(message: str, url: str) -> str:
    """``message`` on one line, without the URL's password should the driver quote it."""
    message = " ".join(message.split())
    try:
        password = psycopg.conninfo.conninfo_to_dict(url).get("password")
    except psycopg.ProgrammingError:
        return message
    return message.replace(str(password), "***") if password else message


def redacted(url: str) -> str:
    """``url`` with any password replaced, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the database URL"
    if info.get("password"):
        info["password"] = "***"
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items() if v})


@contextmanager
def reached(what: str) -> Iterator[None]:
    """Translate a lost or failing database into the run error a night ends with."""
    try:
        yield
    except psycopg.OperationalError as exc:
        raise DatabaseUnreachable(f"the fleet database ({what}): {exc}") from exc
    except psycopg.errors.DatabaseError as exc:
        if isinstance(exc, psycopg.errors.IntegrityError):
            raise
        raise DependencyUnavailable(f"the fleet database ({what}): {exc}") from exc


def migrate(pool: Pool) -> list[str]:
    """Apply the migrations this database lacks; return the names applied now."""
    applied_now: list[str] = []
    with pool.connection() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS overnight_migrations ("
            " name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        rows: list[dict[str, Any]] = conn.execute(
            "SELECT name FROM overnight_migrations ORDER BY name"
        ).fetchall()
        done = {str(r["name"]) for r in rows}
        known = {name for name, _ in MIGRATIONS}
        unknown = sorted(done - known)
        if unknown:
            raise ConfigError(
                "--database",
                f"the database has migrations this overnight does not know: {unknown}",
                "upgrade overnight on this worker to the version that migrated the database",
            )
        for name, sql in MIGRATIONS:
            if name in done:
                continue
            conn.execute(sql)
            conn.execute("INSERT INTO overnight_migrations (name) VALUES (%s)", (name,))
            applied_now.append(name)
    return applied_now
