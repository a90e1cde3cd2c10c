"""The fleet's daily money cap: the ``SharedCap`` seam on PostgreSQL.

One row per UTC day (the database's clock, the same for every worker) holds what the fleet
spent and what its calls in flight hold. A hold is one statement: the day's row is updated
only if spent + held + this attempt's worst case stays within the cap, and the hold is written
in the same statement. Row locking makes concurrent holds queue on that row, and each one
re-reads the row it waited for, so no interleaving of nights can take the total past the cap.
A worker killed with holds open leaves them held: money that may have been spent keeps
counting at its worst case.
"""

from __future__ import annotations

from typing import Any

from overnight.core.budget import to_nanos, to_usd
from overnight.fleet.database import Pool, reached
from overnight.seams import Fence

_TODAY = "(now() AT TIME ZONE 'UTC')::date"

#: One statement: the day's row is created or locked (``ON CONFLICT DO UPDATE`` waits for a
#: concurrent hold and reads its result), the attempt is added to ``held`` only if the total
#: stays within the cap, and the hold is recorded when it was.
_HOLD = f"""
WITH day AS (
    INSERT INTO fleet_money_days AS d (day, held_nanos, cap_nanos, last_hold_ok)
    VALUES ({_TODAY}, CASE WHEN %(nanos)s <= %(cap)s THEN %(nanos)s ELSE 0 END, %(cap)s,
            %(nanos)s <= %(cap)s)
    ON CONFLICT (day) DO UPDATE SET
        held_nanos = CASE WHEN d.spent_nanos + d.held_nanos + %(nanos)s <= %(cap)s
                     THEN d.held_nanos + %(nanos)s ELSE d.held_nanos END,
        last_hold_ok = d.spent_nanos + d.held_nanos + %(nanos)s <= %(cap)s,
        cap_nanos = %(cap)s
    RETURNING d.day, d.last_hold_ok AS ok, d.spent_nanos + d.held_nanos AS total
), hold AS (
    INSERT INTO fleet_money_holds (call_id, night_id, day, nanos)
    SELECT %(call)s, %(night)s, day, %(nanos)s FROM day WHERE ok
    RETURNING call_id
)
SELECT ok, total FROM day
"""

_SETTLE = """
WITH hold AS (DELETE FROM fleet_money_holds WHERE call_id = %(call)s RETURNING day, nanos)
UPDATE fleet_money_days AS d
SET held_nanos = d.held_nanos - hold.nanos, spent_nanos = d.spent_nanos + %(spent)s
FROM hold WHERE d.day = hold.day
RETURNING d.spent_nanos + d.held_nanos AS total
"""


class FleetMoney:
    """One night's view of the fleet's daily cap."""

    def __init__(
        self,
        pool: Pool,
        night_id: str,
        limit_usd: float,
        fence: Fence | None = None,
        *,
        wait_s: float | None = None,
    ) -> None:
        self._pool = pool
        self._fence = fence
        self._wait_s = wait_s
        """How long a statement waits for a connection (None: the pool's own)."""
        self.night_id = night_id
        self.limit_usd = limit_usd
        self._cap = to_nanos(limit_usd, up=False)
        self._total = 0
        self.refresh()

    def refresh(self) -> None:
        """Read today's total (spent and held)."""
        with reached("fleet money"), self._pool.connection(timeout=self._wait_s) as conn:
            row: dict[str, Any] | None = conn.execute(
                f"SELECT spent_nanos + held_nanos AS total FROM fleet_money_days "
                f"WHERE day = {_TODAY}"
            ).fetchone()
        self._total = int(row["total"]) if row else 0

    def hold(self, call_id: str, worst_nanos: int) -> float | None:
        if self._fence is not None:
            self._fence.check("a hold on the fleet's money")
        params = {
            "nanos": worst_nanos,
            "cap": self._cap,
            "call": self._key(call_id),
            "night": self.night_id,
        }
        with reached("fleet money"), self._pool.connection(timeout=self._wait_s) as conn:
            row = conn.execute(_HOLD, params).fetchone()
            assert row is not None
            self._total = int(row["total"])
            if row["ok"]:
                return None
            would_reach = self._total + worst_nanos
            conn.execute(
                f"INSERT INTO fleet_money_refusals (night_id, day, nanos, would_reach_nanos,"
                f" cap_nanos) VALUES (%s, {_TODAY}, %s, %s, %s)",
                (self.night_id, worst_nanos, would_reach, self._cap),
            )
        return to_usd(would_reach)

    def book(self, call_id: str, nanos: int) -> None:
        self._settle(call_id, nanos)

    def release(self, call_id: str) -> None:
        self._settle(call_id, 0)

    def _settle(self, call_id: str, spent: int) -> None:
        with reached("fleet money"), self._pool.connection(timeout=self._wait_s) as conn:
            row: dict[str, Any] | None = conn.execute(
                _SETTLE,
                {"call": self._key(call_id), "spent": spent},
            ).fetchone()
        if row is not None:
            self._total = int(row["total"])

    def spent_usd(self) -> float:
        return to_usd(self._total)

    def _key(self, call_id: str) -> str:
        return f"{self.night_id}:{call_id}"  # a call id is unique within its night only


def fleet_day_totals(pool: Pool, days: int) -> list[dict[str, Any]]:
    """The last ``days`` days: spent, held, and refusals, newest first."""
    with reached("fleet money"), pool.connection() as conn:
        rows: list[dict[str, Any]] = conn.execute(
            "SELECT d.day, d.spent_nanos, d.held_nanos, d.cap_nanos,"
            " (SELECT count(*) FROM fleet_money_refusals r WHERE r.day = d.day) AS refusals"
            " FROM fleet_money_days d"
            f" WHERE d.day > {_TODAY} - %s ORDER BY d.day DESC",
            (days,),
        ).fetchall()
    return rows
