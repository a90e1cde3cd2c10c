"""One owner at a time: a delivery's lease on its night, with a fencing token, in PostgreSQL.

A delivery takes the night's lease before it touches the run directory: the row's token goes
up by one, so every owner the night ever had holds a token of its own, and the row says until
when (the database's clock) the current one owns it. A lease still held by another owner (a
worker lost, frozen or partitioned away, which may still be running the night's command) is
waited out, never broken: only once it has expired does the next owner take it, and then it
verifies the task in flight first, as every resume does.

The owner renews the lease from a thread of its own every few seconds. Its fence
(``check``) holds only while the last renewal that succeeded is younger than ``fraction`` of
the lease's length, measured on this process's monotonic clock from the moment that renewal
was sent: a worker that cannot reach the database stops writing (and its heartbeat drains its
night, ending the command in flight) well before the lease expires in the database and another
worker may take over. The writes that go to the database (an effect's intent) carry the token
into their statement, so a stale owner's write is refused by the database itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from overnight.fleet.database import Pool, reached
from overnight.seams import FenceLost

#: Take the lease when nobody holds it or its holder's time is up: the token goes up by one.
_TAKE = """
INSERT INTO night_leases AS l (night_id, token, owner, expires_at)
VALUES (%(night)s, 1, %(owner)s, now() + %(ttl)s * interval '1 second')
ON CONFLICT (night_id) DO UPDATE SET
    token = l.token + 1, owner = excluded.owner, expires_at = excluded.expires_at,
    taken_at = now()
WHERE l.expires_at <= now()
RETURNING token
"""

_HELD = """
SELECT owner, token, extract(epoch FROM expires_at - now()) AS left_s
FROM night_leases WHERE night_id = %s
"""

_RENEW = """
UPDATE night_leases SET expires_at = now() + %(ttl)s * interval '1 second'
WHERE night_id = %(night)s AND token = %(token)s AND expires_at > now()
RETURNING token
"""

_RELEASE = "UPDATE night_leases SET expires_at = now() WHERE night_id = %s AND token = %s"

#: The condition a fenced statement adds: this owner's lease is the night's, and current.
HELD_SQL = (
    "EXISTS (SELECT 1 FROM night_leases WHERE night_id = %(lease_night)s"
    " AND token = %(lease_token)s AND expires_at > now())"
)


class Lease:
    """A delivery's lease on ``night_id``; ``check`` is the night's ``Fence``."""

    def __init__(
        self,
        pool: Pool,
        night_id: str,
        owner: str,
        ttl_s: float,
        *,
        fraction: float = 0.5,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pool = pool
        self.night_id = night_id
        self.owner = owner
        self.ttl_s = ttl_s
        self.fraction = fraction
        self.monotonic = monotonic
        self.token = 0
        self.lost: str | None = None
        self._renewed = float("-inf")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- taking and giving back -------------------------------------------------------------

    def take(self, wait: Callable[[float], None]) -> None:
        """Take the lease, waiting (with ``wait``, which may heartbeat) for a holder's lease to
        expire first."""
        while True:
            sent = self.monotonic()
            # No connection for as long as a lease lasts: the database counts as unreachable.
            wait_s = max(self.ttl_s, 1.0)
            with reached("night lease"), self.pool.connection(timeout=wait_s) as conn:
                row: dict[str, Any] | None = conn.execute(
                    _TAKE, {"night": self.night_id, "owner": self.owner, "ttl": self.ttl_s}
                ).fetchone()
                if row is not None:
                    self.token = int(row["token"])
                    self._renewed = sent
                    return
                held: dict[str, Any] | None = conn.execute(_HELD, (self.night_id,)).fetchone()
            left = float(held["left_s"]) if held is not None else 0.0
            wait(min(max(left, 0.05), 1.0))

    def holder(self) -> dict[str, Any] | None:
        with reached("night lease"), self.pool.connection() as conn:
            row: dict[str, Any] | None = conn.execute(_HELD, (self.night_id,)).fetchone()
        return row

    def __enter__(self) -> Lease:
        self._thread = threading.Thread(target=self._keep, name="night-lease", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.ttl_s)
        if self.lost is None and self.valid():
            # Handed back at once: the next delivery need not wait the lease out.
            try:
                with self.pool.connection(timeout=self.ttl_s / 4) as conn:
                    conn.execute(_RELEASE, (self.night_id, self.token))
            except Exception:  # cannot reach the database: the lease expires on its own
                pass

    # -- keeping it ---------------------------------------------------------------------------

    def renew(self) -> bool:
        """Renew the lease; False when it is no longer this owner's or cannot be reached."""
        sent = self.monotonic()
        try:
            with self.pool.connection(timeout=self.ttl_s / 4) as conn:
                row = conn.execute(
                    _RENEW, {"night": self.night_id, "token": self.token, "ttl": self.ttl_s}
                ).fetchone()
        except (psycopg.Error, OSError, Exception):
            return False
        if row is None:
            self.lost = f"the lease of night {self.night_id} was taken over (token {self.token})"
            return False
        self._renewed = sent
        return True

    def _keep(self) -> None:
        every = max(self.ttl_s * self.fraction / 4, 0.05)
        while not self._stop.wait(every):
            if self.lost is not None:
                return
            self.renew()

    def valid(self) -> bool:
        """Whether this owner may still write: renewed recently enough, never taken over."""
        return self.lost is None and self.monotonic() - self._renewed < self.ttl_s * self.fraction

    def check(self, what: str) -> None:
        """The night's fence: ``FenceLost`` once the lease is gone or may be."""
        if not self.valid():
            if self.lost is None:
                self.lost = (
                    f"the lease of night {self.night_id} (token {self.token}) was not renewed "
                    f"for {self.ttl_s * self.fraction:g} s"
                )
            raise FenceLost(f"{what} refused: {self.lost}")

    def params(self) -> dict[str, Any]:
        """The parameters of ``HELD_SQL``."""
        return {"lease_night": self.night_id, "lease_token": self.token}
