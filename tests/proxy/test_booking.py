"""The proxy's requests are held and booked as the night's own model calls: a real ledger,
spend journal and trace behind the gateway's meter, no HTTP. The output cap a CLI asks for is
lowered to what the night (and the task's own cap) can still pay for; when not even a short
answer fits, the request is refused unforwarded and the ledger is blocked, as for the
built-in agent; every usage field is priced and the audit's totals agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from overnight.clock import FakeClock
from overnight.core.budget import BudgetFractions, Ledger, Price, PriceTable, Usage
from overnight.messages.types import ModelRequest, ModelResponse
from overnight.models.gateway import ModelGateway
from overnight.proxy.booking import MIN_OUTPUT_TOKENS, TaskMeter
from overnight.proxy.metering import Answered, Asked, Refused
from overnight.store.journal import Journal, read_intact_records, read_journal
from overnight.store.spend import spend_totals
from overnight.store.trace import Trace

MODEL = "sonnet-class"
PRICE = Price(3.0, 15.0, 0.3, 3.75, 6.0)


def _unused(request: ModelRequest) -> ModelResponse:
    raise AssertionError("the proxy's calls never reach the gateway's own client")


class Night:
    def __init__(self, tmp: Path, usd: float) -> None:
        clock = FakeClock()
        self.ledger = Ledger(PriceTable({MODEL: PRICE}), usd)
        self.spend_path = tmp / "spend.jsonl"
        self.trace_path = tmp / "trace.jsonl"
        self.gateway = ModelGateway(
            _unused,  # type: ignore[arg-type]
            self.ledger,
            Journal(self.spend_path, durable=True),
            Trace(self.trace_path, clock.monotonic, clock.now_iso),
            clock.monotonic,
            BudgetFractions(),
        )

    def records(self) -> list[dict[str, object]]:
        return read_journal(self.spend_path)

    def events(self) -> list[dict[str, object]]:
        return list(read_intact_records(self.trace_path))


def asked(max_tokens: int | None = 128_000, size: int = 40_000) -> Asked:
    return Asked(api="anthropic", model=MODEL, input_bound=size, max_tokens=max_tokens, stream=True)


def test_a_request_is_reserved_lowered_and_booked_from_every_usage_field(tmp_path: Path) -> None:
    night = Night(tmp_path, usd=1.0)
    meter = TaskMeter(night.gateway, task_id="t1")
    attempt = meter.open(asked())
    # $1 at the enforcement line cannot hold 128,000 output tokens at $15/M on top of the
    # input's worst case: the cap forwarded is what still fits.
    assert MIN_OUTPUT_TOKENS <= attempt.max_tokens < 128_000
    fits = night.ledger.worst_case_nanos(MODEL, 40_000, attempt.max_tokens, "1h")
    assert night.ledger.held_nanos == fits
    usage = Usage(input=1200, output=300, cache_read=9000, cache_write_5m=2000, cache_write_1h=0)
    attempt.answered(Answered(usage=usage, stop_reason="tool_use", tool_calls=("Edit",)))
    assert night.ledger.held_nanos == 0
    expected = (1200 * 3.0 + 300 * 15.0 + 9000 * 0.3 + 2000 * 3.75) / 1_000_000
    assert night.ledger.spent_usd == pytest.approx(expected)
    kinds = [r["kind"] for r in night.records()]
    assert kinds == ["reserve", "spend"]
    assert spend_totals(night.records()).usd == pytest.approx(expected)
    calls = [e for e in night.events() if e["kind"] == "model_call"]
    assert calls[0]["purpose"] == "execute" and calls[0]["tool_calls"] == ["Edit"]
    assert meter.forwarded == 1 and meter.refused is None


def test_a_request_no_answer_fits_is_refused_unreserved_and_the_ledger_is_blocked(
    tmp_path: Path,
) -> None:
    night = Night(tmp_path, usd=0.10)
    seen: list[str] = []
    meter = TaskMeter(night.gateway, task_id="t1", on_refused=seen.append)
    with pytest.raises(Refused) as refused:
        meter.open(asked(size=400_000))  # its input alone is past the line
    assert "budget is spent" in refused.value.message
    assert night.ledger.blocked == "money" and night.ledger.held_nanos == 0
    assert night.records() == []  # nothing reserved, nothing forwarded
    assert seen == [refused.value.message] and meter.refused == refused.value.message
    # every later request of the task is refused too, even one that would fit
    with pytest.raises(Refused):
        meter.open(asked(max_tokens=10, size=10))
    decisions = [e for e in night.events() if e.get("decision") == "call_refused"]
    assert decisions and decisions[0]["task"] == "t1"


def test_the_task_cap_lowers_and_then_refuses_while_the_night_could_pay(tmp_path: Path) -> None:
    night = Night(tmp_path, usd=100.0)
    meter = TaskMeter(night.gateway, task_id="t1", task_usd=0.05)
    first = meter.open(asked(size=2_000))
    worst = night.ledger.worst_case_nanos(MODEL, 2_000, first.max_tokens, "1h")
    assert worst <= 50_000_000  # the task's $0.05, in nanodollars
    first.answered(Answered(usage=Usage(input=2_000, output=first.max_tokens)))
    with pytest.raises(Refused) as refused:
        meter.open(asked(size=2_000))
    assert refused.value.budget == "task" and "this task's budget" in refused.value.message
    assert night.ledger.blocked is None  # the night goes on with other tasks


def test_an_unsent_request_is_released_at_zero_and_a_broken_stream_booked(tmp_path: Path) -> None:
    night = Night(tmp_path, usd=5.0)
    meter = TaskMeter(night.gateway, task_id="t1")
    meter.open(asked()).failed(status=None, sent=False, usage=None, error="refused")
    assert night.ledger.spent_nanos == 0
    broken = meter.open(asked())
    partial = Usage(input=5000, output=40)
    broken.failed(status=None, sent=True, usage=partial, error="stream cut")
    assert night.ledger.spent_usd == pytest.approx((5000 * 3.0 + 40 * 15.0) / 1e6)
    lost = meter.open(asked())
    lost.failed(status=None, sent=True, usage=None, error="stream cut, no usage seen")
    # no usage seen: booked at its worst case
    assert night.ledger.spent_usd > (5000 * 3.0 + 40 * 15.0) / 1e6 + 1.0


def test_an_unpriced_model_is_refused_before_anything_is_held(tmp_path: Path) -> None:
    night = Night(tmp_path, usd=5.0)
    meter = TaskMeter(night.gateway, task_id="t1")
    other = Asked(api="anthropic", model="mystery-1", input_bound=10, max_tokens=10, stream=False)
    with pytest.raises(Refused) as refused:
        meter.open(other)
    assert "no price is known for model 'mystery-1'" in refused.value.message
    assert night.records() == []
