"""The fleet's PostgreSQL parts on a real server: migrations, the shared effects ledger, and
the daily money cap under concurrent holds."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.kit import Link, address, fresh_database, query, services

pytest.importorskip("psycopg_pool")

from overnight.core.budget import to_nanos
from overnight.core.errors import ConfigError, DependencyUnavailable
from overnight.fleet.database import (
    MIGRATIONS,
    DatabaseUnreachable,
    Pool,
    connect_pool,
    migrate,
)
from overnight.fleet.effects import PostgresEffectStore
from overnight.fleet.money import FleetMoney
from overnight.seams import DuplicateEffect


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_database(services().admin_url) as u:
        yield u


@pytest.fixture
def pool(url: str) -> Iterator[Pool]:
    p = connect_pool(url, max_size=40)
    migrate(p)
    try:
        yield p
    finally:
        p.close()


def test_migrations_are_applied_once_in_order_and_a_newer_database_is_refused(url: str) -> None:
    p = connect_pool(url)
    try:
        results: list[list[str]] = []
        threads = [threading.Thread(target=lambda: results.append(migrate(p))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        applied = sorted(results, key=len)[-1]
        assert applied == [name for name, _ in MIGRATIONS]
        assert sum(len(r) for r in results) == len(MIGRATIONS)  # one worker applied them
        names = [r["name"] for r in query(url, "SELECT name FROM overnight_migrations")]
        assert sorted(names) == sorted(n for n, _ in MIGRATIONS)
        query(url, "INSERT INTO overnight_migrations (name) VALUES ('9999_from_the_future')")
        with pytest.raises(ConfigError, match="9999_from_the_future"):
            migrate(p)
    finally:
        p.close()


def test_an_unreachable_database_is_a_config_error_without_the_password() -> None:
    with pytest.raises(ConfigError) as caught:
        connect_pool("postgresql://someone:hunter2@127.0.0.1:1/nothing")
    message = str(caught.value)
    assert "--database" in message and "hunter2" not in message
    assert "refused" in message.lower()  # the driver's reason, not a bare pool timeout


def test_the_ledger_keeps_task_keys_unique_across_nights(pool: Pool) -> None:
    a, b = PostgresEffectStore(pool), PostgresEffectStore(pool)
    row = a.intend("run-a", "t1", "run-a:t1:1:1", "4471:refund", "issue_refund", {"n": 1})
    assert row.state == "intended" and a.get("run-a:t1:1:1") == row
    with pytest.raises(DuplicateEffect) as dup:
        b.intend("run-b", "t1", "run-b:t1:1:1", "4471:refund", "issue_refund", {"n": 1})
    assert dup.value.existing.run_id == "run-a"
    # The same step again (a resume reproducing its key) is not a second delivery.
    with pytest.raises(Exception) as again:
        a.intend("run-a", "t1", "run-a:t1:1:1", "4471:refund", "issue_refund", {"n": 1})
    assert not isinstance(again.value, DuplicateEffect)
    # A refusal for good frees the key for a corrected attempt.
    a.settle("run-a:t1:1:1", "failed", error="declined")
    b.intend("run-b", "t1", "run-b:t1:1:1", "4471:refund", "issue_refund", {"n": 2})
    settled = b.settle("run-b:t1:1:1", "confirmed", result={"ok": True})
    assert settled.result == {"ok": True} and b.for_run("run-b") == [settled]
    assert [r.run_id for r in a.all()] == ["run-a", "run-b"]
    a.resolve("effect:x", "checked by hand")
    assert b.resolutions() == {"effect:x": "checked by hand"}


def test_concurrent_holds_never_take_the_fleet_past_its_cap(pool: Pool) -> None:
    cap_usd = 1.0
    rng = random.Random(7)
    booked: list[int] = []
    lock = threading.Lock()

    def night(n: int) -> None:
        money = FleetMoney(pool, f"night-{n}", cap_usd)
        for call in range(30):
            worst = to_nanos(rng.uniform(0.001, 0.05))
            if money.hold(f"c{call}", worst) is not None:
                continue
            spent = rng.randint(0, worst)
            if rng.random() < 0.2:
                money.release(f"c{call}")
                continue
            money.book(f"c{call}", spent)
            with lock:
                booked.append(spent)

    threads = [threading.Thread(target=night, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    [day] = query(pool_url(pool), "SELECT * FROM fleet_money_days")
    assert day["held_nanos"] == 0
    assert day["spent_nanos"] == sum(booked) <= to_nanos(cap_usd)
    refusals = query(pool_url(pool), "SELECT * FROM fleet_money_refusals")
    assert refusals, "the demand was several times the cap: some holds must be refused"
    assert all(r["would_reach_nanos"] > r["cap_nanos"] for r in refusals)


def test_a_hold_exactly_at_the_cap_is_allowed_and_one_nanodollar_more_is_not(pool: Pool) -> None:
    money = FleetMoney(pool, "edge", 0.5)
    assert money.hold("a", to_nanos(0.25)) is None
    assert money.hold("b", to_nanos(0.25)) is None  # exactly the cap
    assert money.spent_usd() == 0.5
    assert money.hold("c", 1) == pytest.approx(0.500000001)
    money.release("b")
    assert money.hold("c", to_nanos(0.25) + 1) is not None
    assert money.hold("d", to_nanos(0.25)) is None


def test_a_lost_database_is_unreachable_and_a_dropped_connection_is_replaced(url: str) -> None:
    link = Link(*address(url))
    p = connect_pool(link.url(url), max_size=2, timeout=2.0)
    migrate(p)
    money = FleetMoney(p, "n", 1.0)
    import psycopg

    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    try:
        # The server drops every connection (a restart, a failover): each one is checked as
        # the pool hands it out, and replaced.
        query(
            services().admin_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (name,),
        )
        for call in ("a", "b", "c"):
            assert money.hold(call, 1) is None  # held
            money.release(call)
        # The database out of reach: no connection comes in time.
        link.cut()
        with pytest.raises(DatabaseUnreachable) as lost:
            money.hold("x", 1)
        assert isinstance(lost.value, DependencyUnavailable)
        assert "fleet money" in str(lost.value)
    finally:
        p.close()


def pool_url(pool: Pool) -> str:
    return str(pool.conninfo)


def test_the_fleet_modules_stay_out_of_a_single_machine_night(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys, overnight, overnight.api, overnight.cli.handlers, overnight.night.runs\n"
        "bad = [m for m in ('temporalio', 'psycopg', 'psycopg_pool', 'overnight.fleet')"
        " if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("night_id", ["../etc", "a/b", ".hidden", "", "x" * 129])
def test_a_submission_from_any_client_cannot_name_a_directory_outside_the_runs(
    night_id: str,
) -> None:
    from pydantic import ValidationError

    from overnight.fleet.submission import Submission, spec_hash

    spec = {"goal": "x"}
    given = {"spec_path": "/srv/night.toml", "spec": spec, "spec_sha256": spec_hash(spec)}
    with pytest.raises(ValidationError):
        Submission(night_id=night_id, hours=1.0, **given)
    assert Submission(night_id="night-01.a_b", hours=1.0, **given).night_id
    with pytest.raises(ValidationError, match="hash"):  # content and hash travel together
        Submission(night_id="n", hours=1.0, **{**given, "spec": {"goal": "y"}})
