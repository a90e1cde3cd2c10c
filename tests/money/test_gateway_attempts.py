"""The gateway books every attempt at a call: each one reserved before it is made, and booked
at what it cost, at its worst case when that is unknown, or released when it cannot have been
billed. Real journal and trace files, a real ledger, the real retry policy; fake models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from overnight.clock import FakeClock
from overnight.core.budget import BudgetFractions, Ledger, Price, PriceTable, Usage
from overnight.core.errors import BudgetRefused, DependencyUnavailable, ModelCallFailed
from overnight.messages.types import ModelRequest, ModelResponse, TextBlock, estimate_input_tokens
from overnight.models.gateway import ModelGateway
from overnight.models.retry import RetryingClient
from overnight.models.seam import CallableModel
from overnight.store.journal import Journal, read_journal
from overnight.store.spend import spend_totals
from overnight.store.trace import Trace
from overnight.testing import text_answer, usage_dict
from overnight.testing.fakes import (
    FlakyModel,
    foreign_usage_answer,
    malformed_usage_answer,
    over_billed,
    provider_failure,
    unbilled_answer,
)

MODEL = "opus-class"
PRICE = Price(5.0, 25.0, 0.5, 6.25, 10.0)
ANSWER = usage_dict(input=100, output=50)  # $0.00175


def request(max_tokens: int = 1_000) -> ModelRequest:
    return ModelRequest(
        model=MODEL,
        purpose="execute",
        system="s",
        messages=[{"role": "user", "content": "do the task"}],
        max_tokens=max_tokens,
    )


class Rig:
    """A gateway over ``client`` with a ledger capped at ``usd``, writing to ``tmp``."""

    def __init__(self, tmp: Path, client: Any, usd: float = 10.0) -> None:
        self.tmp = tmp
        self.clock = FakeClock()
        self.ledger = Ledger(PriceTable({MODEL: PRICE}), usd)
        self.spend = Journal(tmp / "spend.jsonl", durable=True)
        self.trace = Trace(tmp / "trace.jsonl", self.clock.monotonic, self.clock.now_iso)
        self.gateway = ModelGateway(
            client, self.ledger, self.spend, self.trace, self.clock.monotonic, BudgetFractions()
        )

    def journal(self) -> list[dict[str, Any]]:
        return read_journal(self.tmp / "spend.jsonl")

    def kinds(self) -> list[str]:
        return [r["kind"] for r in self.journal()]

    def calls(self) -> list[dict[str, Any]]:
        return [e for e in read_journal(self.tmp / "trace.jsonl") if e["kind"] == "model_call"]


def retrying(inner: Any, clock: FakeClock | None = None, **kw: Any) -> RetryingClient:
    clock = clock or FakeClock()
    return RetryingClient(
        inner, sleep=clock.advance, monotonic=clock.monotonic, jitter=lambda: 0.0, **kw
    )


def worst(max_tokens: int = 1_000) -> float:
    led = Ledger(PriceTable({MODEL: PRICE}), 100.0)
    return led.worst_case(MODEL, estimate_input_tokens(request(max_tokens)), max_tokens)


# -- retries: one reservation per attempt ------------------------------------------------------


def test_every_attempt_is_reserved_and_the_billable_failures_are_booked(tmp_path: Path) -> None:
    flaky = FlakyModel(
        lambda r: text_answer("done", ANSWER),
        lambda r: ["dropped", "overloaded", "timeout", "stream_error"],
    )
    rig = Rig(tmp_path, retrying(flaky))
    response = rig.gateway.call(request())

    assert response.text() == "done"
    assert [kind for _r, kind in flaky.attempts] == [
        "dropped",
        "overloaded",
        "timeout",
        "stream_error",
        "answered",
    ]
    # Five attempts, five reservations; the 529 before any output released, the rest booked.
    assert rig.kinds() == [
        "reserve",
        "spend",
        "reserve",
        "release",
        "reserve",
        "spend",
        "reserve",
        "spend",
        "reserve",
        "spend",
    ]
    spent = [r for r in rig.journal() if r["kind"] == "spend"]
    assert [r["attempt"] for r in spent] == [1, 3, 4, 5]
    assert [r["usd"] for r in spent] == [worst()] * 3 + [0.00175]
    assert [[w["kind"] for w in r.get("warnings", [])] for r in spent] == [
        ["attempt_failed"],
        ["attempt_failed"],
        ["attempt_failed"],
        [],
    ]
    assert rig.ledger.spent_usd == pytest.approx(3 * worst() + 0.00175)
    assert rig.ledger.held_usd == 0.0
    # The journal says the same when a resumed run folds it.
    totals = spend_totals(rig.journal())
    assert totals.total_nanos == rig.ledger.spent_nanos and totals.dangling_nanos == 0
    assert [w["kind"] for w in totals.warnings] == ["attempt_failed"] * 3


def test_an_attempt_the_cap_cannot_cover_is_refused_before_it_is_made(tmp_path: Path) -> None:
    flaky = FlakyModel(lambda r: text_answer("done", ANSWER), lambda r: ["dropped"] * 10)
    cap = 2.5 * worst()
    rig = Rig(tmp_path, retrying(flaky), usd=cap)

    with pytest.raises(BudgetRefused):
        rig.gateway.call(request())

    # Two attempts fit the cap, each booked at its worst case; the third was never made.
    assert len(flaky.attempts) == 2
    assert rig.kinds() == ["reserve", "spend", "reserve", "spend"]
    assert rig.ledger.spent_usd == pytest.approx(2 * worst())
    assert rig.ledger.spent_usd <= cap and rig.ledger.blocked == "money"
    refused = [e for e in read_journal(tmp_path / "trace.jsonl") if e.get("decision")]
    assert refused[-1]["decision"] == "call_refused" and refused[-1]["attempt"] == 3


def test_a_failed_attempt_that_reports_its_usage_is_booked_at_it(tmp_path: Path) -> None:
    flaky = FlakyModel(lambda r: text_answer("done", ANSWER), lambda r: ["failed_billed"])
    rig = Rig(tmp_path, retrying(flaky))
    rig.gateway.call(request())
    spent = [r for r in rig.journal() if r["kind"] == "spend"]
    reported = Usage(input=50, output=10).cost(PRICE)
    assert [r["usd"] for r in spent] == [reported, 0.00175]
    assert spent[0]["usage"] == {
        "input": 50,
        "output": 10,
        "cache_read": 0,
        "cache_write_5m": 0,
        "cache_write_1h": 0,
    }
    assert "reported" in spent[0]["warnings"][0]["message"]


def test_an_outage_of_billable_failures_books_every_attempt(tmp_path: Path) -> None:
    flaky = FlakyModel(lambda r: text_answer("done", ANSWER), lambda r: ["timeout"] * 50)
    rig = Rig(tmp_path, retrying(flaky, max_attempts=4))
    with pytest.raises(DependencyUnavailable):
        rig.gateway.call(request())
    assert rig.kinds() == ["reserve", "spend"] * 4
    assert rig.ledger.spent_usd == pytest.approx(4 * worst())


def test_a_refusal_before_any_output_is_released_and_not_retried(tmp_path: Path) -> None:
    flaky = FlakyModel(lambda r: text_answer("done", ANSWER), lambda r: ["refused"])
    rig = Rig(tmp_path, retrying(flaky))
    with pytest.raises(ModelCallFailed, match="refused by fake"):
        rig.gateway.call(request())
    assert rig.kinds() == ["reserve", "release"]
    assert rig.ledger.spent_usd == 0.0


def test_a_client_without_retries_is_metered_as_its_one_attempt(tmp_path: Path) -> None:
    def dropped(_r: ModelRequest) -> dict[str, Any]:
        raise provider_failure("dropped")

    rig = Rig(tmp_path, CallableModel(dropped))
    with pytest.raises(ModelCallFailed):
        rig.gateway.call(request())
    assert rig.kinds() == ["reserve", "spend"]
    assert rig.ledger.spent_usd == worst()


def test_a_python_model_that_raises_releases_its_reservation(tmp_path: Path) -> None:
    def broken(_r: ModelRequest) -> dict[str, Any]:
        raise ConnectionError("provider went away")

    rig = Rig(tmp_path, CallableModel(broken))
    with pytest.raises(ModelCallFailed, match="provider went away"):
        rig.gateway.call(request())
    assert rig.kinds() == ["reserve", "release"]
    assert rig.ledger.spent_usd == 0.0 and rig.ledger.held_usd == 0.0
    assert "cost_usd" not in rig.calls()[0]  # nothing booked, nothing shown as a cost


# -- answers whose bill cannot be read ---------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        unbilled_answer(),
        {**unbilled_answer(), "usage": {}},
        {**unbilled_answer(), "usage": None},
        foreign_usage_answer(),
        {**unbilled_answer(), "usage": {"input_tokens": 100}},
        ModelResponse(content=[TextBlock(text="done")]),
    ],
    ids=["no-usage", "empty", "null", "bedrock-shape", "no-output-count", "response-object"],
)
def test_an_answer_without_a_readable_bill_is_booked_at_its_worst_case(
    tmp_path: Path, answer: Any
) -> None:
    rig = Rig(tmp_path, CallableModel(lambda r: answer))
    response = rig.gateway.call(request())

    assert response.text() == "done"  # the answer itself is fine and is used
    assert rig.ledger.spent_usd == worst() > 0
    assert not response.usage_known
    assert response.usage.output == 1_000  # counted as the worst case, tokens included
    (spent,) = [r for r in rig.journal() if r["kind"] == "spend"]
    assert spent["usd"] == spent["reserved_usd"] and spent["usage"] is None
    assert [w["kind"] for w in spent["warnings"]] == ["usage_unknown"]
    (call,) = rig.calls()
    assert call["booked_at_worst_case"] is True and call["warnings"][0]["kind"] == "usage_unknown"


@pytest.mark.parametrize("count", [12.0, -5, "300", True, [1]])
def test_an_answer_with_an_unreadable_count_fails_and_is_booked_at_its_worst_case(
    tmp_path: Path, count: object
) -> None:
    rig = Rig(tmp_path, CallableModel(lambda r: malformed_usage_answer(count)))
    with pytest.raises(ModelCallFailed, match="malformed"):
        rig.gateway.call(request())
    assert rig.ledger.spent_usd == worst()
    (spent,) = [r for r in rig.journal() if r["kind"] == "spend"]
    assert [w["kind"] for w in spent["warnings"]] == ["answer_unreadable"]


@pytest.mark.parametrize("answer", [None, "just text", {"content": "not a list"}])
def test_an_answer_that_cannot_be_read_at_all_is_booked_at_its_worst_case(
    tmp_path: Path, answer: object
) -> None:
    rig = Rig(tmp_path, CallableModel(lambda r: answer))
    with pytest.raises(ModelCallFailed):
        rig.gateway.call(request())
    assert rig.kinds() == ["reserve", "spend"]
    assert rig.ledger.spent_usd == worst()


# -- bills above the reservation ---------------------------------------------------------------


def test_a_bill_above_its_reservation_is_booked_and_flagged(tmp_path: Path) -> None:
    rig = Rig(tmp_path, CallableModel(lambda r: over_billed(r, factor=3)), usd=0.2)
    response = rig.gateway.call(request())

    (spent,) = [r for r in rig.journal() if r["kind"] == "spend"]
    assert spent["usd"] == pytest.approx(3 * worst()) and spent["usd"] > spent["reserved_usd"]
    assert [w["kind"] for w in spent["warnings"]] == ["over_reservation"]
    assert rig.ledger.spent_usd == spent["usd"]  # booked in full
    assert response.usage_known and response.usage.output == 3_000
    assert rig.calls()[0]["warnings"][0]["kind"] == "over_reservation"


def test_a_zero_bill_is_a_bill(tmp_path: Path) -> None:
    """A provider may report zero tokens for a complete answer (the recordings hold one): that
    is booked as zero, unflagged."""
    rig = Rig(tmp_path, CallableModel(lambda r: text_answer("ok", usage_dict())))
    rig.gateway.call(request())
    (spent,) = [r for r in rig.journal() if r["kind"] == "spend"]
    assert spent["usd"] == 0.0 and "warnings" not in spent
