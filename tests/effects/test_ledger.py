"""Intent first: ``dispatch_with_ledger`` writes the row before the call, settles it after,
replays a confirmed row without calling, and refuses a second delivery of a task."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from overnight.effects import ToolFailure
from overnight.effects.ledger import EffectRefused, dispatch_with_ledger, render_done
from overnight.effects.store import SqliteEffectStore

ARGS = {"order_id": "4471", "amount_cents": 2400}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteEffectStore]:
    s = SqliteEffectStore(tmp_path / "effects.sqlite")
    yield s
    s.close()


class Provider:
    """Counts its calls; answers, or raises what it is told to."""

    def __init__(self, answer: Callable[[str], Any] | None = None) -> None:
        self.keys: list[str] = []
        self.answer = answer or (lambda key: {"id": f"re_{len(self.keys)}", "key": key})

    def __call__(self, key: str) -> Any:
        self.keys.append(key)
        return self.answer(key)


def dispatch(
    store: SqliteEffectStore,
    call: Callable[[str], Any],
    *,
    run_id: str = "run-a",
    step: str = "run-a:issue_refund:issue_refund:1",
    task_key: str | None = "4471:refund",
    args: dict[str, Any] | None = None,
) -> Any:
    return dispatch_with_ledger(
        store,
        run_id=run_id,
        task_id="issue_refund",
        step_key=step,
        task_key=task_key,
        tool="issue_refund",
        args=dict(ARGS if args is None else args),
        call=call,
    )


def state_on_disk(db: Path, step: str) -> str | None:
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT state FROM effects WHERE step_key = ?", (step,)).fetchone()
    finally:
        con.close()
    return None if row is None else str(row[0])


def raise_(exc: BaseException) -> Callable[[str], Any]:
    def call(_key: str) -> Any:
        raise exc

    return call


def test_the_row_is_intended_on_disk_before_the_call(store: SqliteEffectStore) -> None:
    seen: list[str | None] = []

    def provider(key: str) -> dict[str, str]:
        seen.append(state_on_disk(store.path, key))  # what a kill at this instant leaves
        return {"id": "re_1"}

    outcome = dispatch(store, provider)
    assert seen == ["intended"]
    assert state_on_disk(store.path, "run-a:issue_refund:issue_refund:1") == "confirmed"
    assert outcome.replayed is False and outcome.result == {"id": "re_1"}
    assert outcome.row is not None and outcome.row.state == "confirmed"


def test_the_run_step_key_is_the_idempotency_key(store: SqliteEffectStore) -> None:
    provider = Provider()
    dispatch(store, provider, step="run-a:issue_refund:issue_refund:1")
    assert provider.keys == ["run-a:issue_refund:issue_refund:1"]


def test_a_confirmed_row_is_replayed_without_calling(store: SqliteEffectStore) -> None:
    provider = Provider()
    first = dispatch(store, provider)
    again = dispatch(store, provider)  # a resumed execution reproduces the step key
    assert len(provider.keys) == 1
    assert again.replayed is True and again.result == first.result
    assert again.row is not None and again.row.state == "confirmed"
    assert [r.state for r in store.all()] == ["confirmed"]


def test_a_replay_with_other_arguments_is_refused(store: SqliteEffectStore) -> None:
    provider = Provider()
    dispatch(store, provider)
    with pytest.raises(EffectRefused, match="differs"):
        dispatch(store, provider, args={"order_id": "4471", "amount_cents": 1200})
    assert len(provider.keys) == 1


def test_a_second_run_is_refused_by_the_task_key(store: SqliteEffectStore) -> None:
    provider = Provider()
    dispatch(store, provider, run_id="run-a", step="run-a:issue_refund:issue_refund:1")
    with pytest.raises(EffectRefused) as refused:
        dispatch(store, provider, run_id="run-b", step="run-b:issue_refund:issue_refund:1")
    assert len(provider.keys) == 1
    assert refused.value.existing.run_id == "run-a"
    message = str(refused.value)
    assert "run-a" in message and "4471:refund" in message and "confirmed" in message
    assert [r.run_id for r in store.all()] == ["run-a"]


def test_an_unknown_row_blocks_its_own_step_until_a_person_settles_it(
    store: SqliteEffectStore,
) -> None:
    """An effect that may have happened is not made again, not even at its own step with the
    same idempotency key: the provider's memory is not the ledger's to count on."""
    step = "run-a:issue_refund:issue_refund:1"
    with pytest.raises(ToolFailure):
        dispatch(store, raise_(ToolFailure("502 bad gateway", retryable=True)))
    assert [r.state for r in store.all()] == ["unknown"]
    provider = Provider()
    with pytest.raises(EffectRefused, match="unknown outcome"):
        dispatch(store, provider)
    assert provider.keys == []
    assert [r.state for r in store.all()] == ["unknown"]

    # A person found it did not happen: the same step reaches the provider once more, with
    # the same key, written down as intended first.
    mark = {"resolved_in_review": "not_happened", "note": "not at the bank"}
    store.settle(step, "failed", result=mark, error="did not happen")
    seen: list[str | None] = []

    def answer(key: str) -> dict[str, str]:
        seen.append(state_on_disk(store.path, key))
        return {"id": "re_1"}

    provider = Provider(answer)
    outcome = dispatch(store, provider)
    assert provider.keys == [step] and seen == ["intended"]
    assert outcome.replayed is False and [r.state for r in store.all()] == ["confirmed"]
    again = dispatch(store, provider)
    assert again.replayed is True and len(provider.keys) == 1
    with pytest.raises(EffectRefused):
        dispatch(store, provider, run_id="run-b", step="run-b:issue_refund:issue_refund:1")
    assert len(provider.keys) == 1


def test_a_failed_row_taken_up_again_is_refused_when_another_run_holds_its_task_key(
    store: SqliteEffectStore,
) -> None:
    with pytest.raises(ToolFailure):
        dispatch(store, raise_(ToolFailure("400 card declined", retryable=False)))
    provider = Provider()
    dispatch(store, provider, run_id="run-b", step="run-b:issue_refund:issue_refund:1")
    with pytest.raises(EffectRefused) as refused:
        dispatch(store, provider)  # run-a's failed step again: run-b holds 4471:refund now
    assert refused.value.existing.run_id == "run-b" and len(provider.keys) == 1
    assert [r.state for r in store.all()] == ["failed", "confirmed"]


def test_a_retryable_failure_leaves_unknown(store: SqliteEffectStore) -> None:
    with pytest.raises(ToolFailure) as failure:
        dispatch(store, raise_(ToolFailure("POST /refunds: no answer (timed out)", retryable=True)))
    assert failure.value.retryable is True
    [row] = store.all()
    assert (row.state, row.error, row.result) == (
        "unknown",
        "POST /refunds: no answer (timed out)",
        None,
    )


def test_a_refusal_by_the_provider_leaves_failed(store: SqliteEffectStore) -> None:
    with pytest.raises(ToolFailure) as failure:
        dispatch(store, raise_(ToolFailure("400 amount too large", retryable=False)))
    assert failure.value.retryable is False
    [row] = store.all()
    assert (row.state, row.error) == ("failed", "400 amount too large")


def test_a_crashing_call_leaves_unknown(store: SqliteEffectStore) -> None:
    with pytest.raises(ToolFailure) as failure:
        dispatch(store, raise_(KeyError("amount")))
    assert failure.value.retryable is True  # no answer we can trust: it may have happened
    assert "KeyError" in failure.value.message
    [row] = store.all()
    assert row.state == "unknown" and row.error is not None and "KeyError" in row.error


def test_results_are_kept_as_json(store: SqliteEffectStore) -> None:
    outcome = dispatch(store, Provider(lambda key: {"id": "re_1", "amounts": (2400, 0)}))
    assert outcome.result == {"id": "re_1", "amounts": (2400, 0)}  # what the tool returned
    replay = dispatch(store, Provider())
    assert replay.result == {"amounts": [2400, 0], "id": "re_1"}  # what the ledger kept


def test_render_done_names_only_confirmed_effects(store: SqliteEffectStore) -> None:
    assert render_done([]) == ""
    dispatch(store, Provider(lambda key: {"id": "re_000001"}))
    with pytest.raises(ToolFailure):
        dispatch(
            store,
            raise_(ToolFailure("timeout", retryable=True)),
            step="run-a:notify_customer:send_email:1",
            task_key="dana@example.com:refund_issued",
            args={"to": "dana@example.com"},
        )
    text = render_done(store.for_run("run-a"))
    assert text.startswith("Already done in an earlier attempt: ")
    assert "issue_refund(amount_cents=2400, order_id=4471)" in text and "re_000001" in text
    assert "dana@example.com" not in text  # unknown is not done
    assert text.endswith("Do not repeat these.")
    assert render_done([r for r in store.all() if r.state != "confirmed"]) == ""
