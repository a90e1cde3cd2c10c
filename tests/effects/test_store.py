"""The SQLite effects store: durable state changes, the two keys the database enforces, and
resolutions that are added, never deleted."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from overnight.effects.store import SqliteEffectStore
from overnight.seams import DuplicateEffect
from tests.helpers.nights import cli_env

ARGS = {"order_id": "4471", "amount_cents": 2400}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteEffectStore]:
    s = SqliteEffectStore(tmp_path / "ledger" / "effects.sqlite")
    yield s
    s.close()


def raw(db: Path, sql: str) -> list[tuple[object, ...]]:
    """Read through a connection of its own: what another process would see."""
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_intend_then_settle_round_trip(store: SqliteEffectStore) -> None:
    row = store.intend(
        "run-a",
        "issue_refund",
        "run-a:issue_refund:issue_refund:1",
        "4471:refund",
        "issue_refund",
        ARGS,
    )
    assert (row.state, row.result, row.error) == ("intended", None, None)
    assert row.args == ARGS and row.task_key == "4471:refund" and row.run_id == "run-a"

    answer = {"id": "re_000001", "amount_cents": 2400, "nested": {"ok": True}}
    done = store.settle(row.step_key, "confirmed", result=answer)
    assert done.state == "confirmed" and done.result == answer and done.error is None
    assert store.get(row.step_key) == done
    assert done.created_at == row.created_at

    as_dict = done.as_dict()
    assert as_dict == {
        "tool": "issue_refund",
        "key": row.step_key,
        "task_key": "4471:refund",
        "task": "issue_refund",
        "run_id": "run-a",
        "state": "confirmed",
        "args": ARGS,
        "detail": answer,
        "error": None,
    }


def test_every_state_change_is_committed_when_the_call_returns(
    store: SqliteEffectStore,
) -> None:
    store.intend("run-a", "t", "k1", "4471:refund", "issue_refund", ARGS)
    assert raw(store.path, "SELECT step_key, state FROM effects") == [("k1", "intended")]
    store.settle("k1", "unknown", error="timed out")
    assert raw(store.path, "SELECT state, error FROM effects") == [("unknown", "timed out")]


def test_wal_and_synchronous_full(store: SqliteEffectStore) -> None:
    con = store._db
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    # WAL is a property of the file: every later connection (another process) gets it too.
    assert raw(store.path, "PRAGMA journal_mode") == [("wal",)]


def test_the_task_key_refuses_a_second_run(store: SqliteEffectStore) -> None:
    first = store.intend("run-a", "issue_refund", "run-a:1", "4471:refund", "issue_refund", ARGS)
    store.settle(first.step_key, "confirmed", result={"id": "re_1"})
    with pytest.raises(DuplicateEffect) as refused:
        store.intend("run-b", "issue_refund", "run-b:1", "4471:refund", "issue_refund", ARGS)
    assert refused.value.existing.run_id == "run-a"
    assert refused.value.existing.state == "confirmed"
    assert "run-a" in str(refused.value) and "4471:refund" in str(refused.value)
    assert store.get("run-b:1") is None
    assert [r.step_key for r in store.all()] == ["run-a:1"]


def test_a_row_left_intended_refuses_too(store: SqliteEffectStore) -> None:
    """A first run killed mid-call leaves ``intended``: the second delivery must not guess."""
    store.intend("run-a", "issue_refund", "run-a:1", "4471:refund", "issue_refund", ARGS)
    with pytest.raises(DuplicateEffect) as refused:
        store.intend("run-b", "issue_refund", "run-b:1", "4471:refund", "issue_refund", ARGS)
    assert refused.value.existing.state == "intended"


def test_the_same_step_key_is_one_row(store: SqliteEffectStore) -> None:
    store.intend("run-a", "t", "run-a:1", "4471:refund", "issue_refund", ARGS)
    with pytest.raises(sqlite3.IntegrityError):  # not a DuplicateEffect: it is the same effect
        store.intend("run-a", "t", "run-a:1", "4471:refund", "issue_refund", ARGS)
    assert len(store.all()) == 1


def test_effects_without_a_task_key_do_not_collide(store: SqliteEffectStore) -> None:
    store.intend("run-a", "t", "k1", None, "ping", {})
    store.intend("run-a", "t", "k2", None, "ping", {})
    assert [r.step_key for r in store.all()] == ["k1", "k2"]


def test_for_run_keeps_runs_apart_in_order(store: SqliteEffectStore) -> None:
    store.intend("run-a", "t1", "a1", "x:1", "tool", {"n": 1})
    store.intend("run-b", "t1", "b1", "x:2", "tool", {"n": 2})
    store.intend("run-a", "t2", "a2", "x:3", "tool", {"n": 3})
    assert [r.step_key for r in store.for_run("run-a")] == ["a1", "a2"]
    assert [r.step_key for r in store.for_run("run-b")] == ["b1"]
    assert store.for_run("run-c") == []


def test_two_stores_on_one_file_share_the_index(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    a, b = SqliteEffectStore(db), SqliteEffectStore(db)
    try:
        a.intend("run-a", "t", "run-a:1", "4471:refund", "issue_refund", ARGS)
        with pytest.raises(DuplicateEffect):
            b.intend("run-b", "t", "run-b:1", "4471:refund", "issue_refund", ARGS)
    finally:
        a.close()
        b.close()


RACER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from overnight.effects.store import DuplicateEffect, SqliteEffectStore

    db, run = Path(sys.argv[1]), sys.argv[2]
    go = Path(sys.argv[3])
    store = SqliteEffectStore(db)
    while not go.exists():
        pass
    try:
        store.intend(run, "issue_refund", run + ":1", "4471:refund", "issue_refund", {})
    except DuplicateEffect as dup:
        print("refused", dup.existing.run_id)
    else:
        print("won")
    """
)


def test_racing_processes_one_wins_the_task_key(tmp_path: Path) -> None:
    """Several processes (fresh deliveries) intend the same task key at once: the database lets
    exactly one in and tells every other one who won."""
    db, go = tmp_path / "race.sqlite", tmp_path / "go"
    SqliteEffectStore(db).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(db), f"run-{n}", str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(),
        )
        for n in range(6)
    ]
    try:
        go.touch()
        outputs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for p in procs), [err for _out, err in outputs]
    lines = [out.strip() for out, _err in outputs]
    assert lines.count("won") == 1, lines
    store = SqliteEffectStore(db)
    try:
        [row] = store.all()
    finally:
        store.close()
    assert sorted(lines) == sorted(["won"] + [f"refused {row.run_id}"] * 5)


def test_resolutions_are_added_never_deleted(store: SqliteEffectStore) -> None:
    store.intend("run-a", "t", "k1", "4471:refund", "issue_refund", ARGS)
    store.settle("k1", "unknown", error="timed out")
    store.resolve("effect:k1", "the bank shows no refund; safe to retry")
    store.resolve("effect:k1", "correction: refund re_9 went out on the 3rd")
    store.resolve("parked:run-a:t", "done by hand")
    assert store.resolutions() == {
        "effect:k1": "correction: refund re_9 went out on the 3rd",
        "parked:run-a:t": "done by hand",
    }
    rows = raw(store.path, "SELECT item, note FROM review_resolutions ORDER BY id")
    assert rows == [
        ("effect:k1", "the bank shows no refund; safe to retry"),
        ("effect:k1", "correction: refund re_9 went out on the 3rd"),
        ("parked:run-a:t", "done by hand"),
    ]
    # Resolving says what a person did; it does not rewrite what the ledger recorded.
    [effect] = store.all()
    assert (effect.state, effect.error) == ("unknown", "timed out")


def test_a_reopened_store_sees_everything(tmp_path: Path) -> None:
    db = tmp_path / "effects.sqlite"
    first = SqliteEffectStore(db)
    first.intend("run-a", "t", "k1", "4471:refund", "issue_refund", ARGS)
    first.settle("k1", "confirmed", result={"id": "re_1"})
    first.resolve("effect:k0", "noted")
    first.close()
    again = SqliteEffectStore(db)
    try:
        [row] = again.all()
        assert (row.state, row.result) == ("confirmed", {"id": "re_1"})
        assert again.by_task_key("4471:refund") == row
        assert again.resolutions() == {"effect:k0": "noted"}
    finally:
        again.close()


def test_a_refused_effect_does_not_hold_its_task_key(store: SqliteEffectStore) -> None:
    # The provider said no for good (failed): a corrected attempt may follow, once.
    store.intend("run-a", "refund", "run-a:refund:1", "4471:refund", "issue_refund", {"n": 1})
    store.settle("run-a:refund:1", "failed", error="card expired")
    store.intend("run-b", "refund", "run-b:refund:1", "4471:refund", "issue_refund", {"n": 2})
    store.settle("run-b:refund:1", "confirmed", result={"refund_id": "re_1"})
    with pytest.raises(DuplicateEffect) as info:
        store.intend("run-c", "refund", "run-c:refund:1", "4471:refund", "issue_refund", {})
    assert info.value.existing.run_id == "run-b"  # the live row is named, not the failed one
