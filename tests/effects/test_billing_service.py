"""The billing example's service and tools, over real HTTP on 127.0.0.1: idempotency keys are
honoured like a real provider's, failures are classified by whether the effect may have
happened, and a restarted service remembers what it did."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from overnight.effects import ToolFailure
from overnight.examples.refunds import billing_tools as tools
from tests.effects.billing import ORDER, TICKET, Service, posts, running_service
from tests.helpers.kills import wait_for

REFUND = {"order_id": ORDER, "amount_cents": 2400}


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    with running_service(tmp_path / "state.json") as s:
        monkeypatch.setenv("BILLING_URL", s.url)
        yield s


def inject(service: Service, path: str, status: int, *, apply: bool, times: int = 1) -> None:
    import urllib.request

    body = json.dumps({"path": path, "status": status, "apply": apply, "times": times}).encode()
    req = urllib.request.Request(service.url + "/_faults", body, method="POST")
    with urllib.request.urlopen(req, timeout=10) as response:
        assert response.status == 200


def test_a_key_the_service_has_seen_gets_the_first_answer(service: Service) -> None:
    first = tools.issue_refund(dict(REFUND), "run-a:issue_refund:issue_refund:1")
    again = tools.issue_refund(dict(REFUND), "run-a:issue_refund:issue_refund:1")
    assert again == first and first["id"].startswith("re_")
    state = service.state()
    assert [r["id"] for r in state["refunds"]] == [first["id"]]
    assert [r["replayed"] for r in posts(state, "/refunds")] == [False, True]
    assert first["idempotency_key"] == "run-a:issue_refund:issue_refund:1"


def test_a_new_key_is_a_new_refund(service: Service) -> None:
    """Like the provider in the incident: only the key stops a second refund of an order."""
    tools.issue_refund(dict(REFUND), "run-a:1")
    tools.issue_refund(dict(REFUND), "run-b:1")
    assert len(service.state()["refunds"]) == 2
    charge = tools.lookup_charge({"order_id": ORDER}, None)
    assert charge["refunded_cents"] == 4800 and charge["amount_cents"] == 2400


def test_a_key_reused_for_another_request_is_refused(service: Service) -> None:
    tools.issue_refund(dict(REFUND), "k")
    with pytest.raises(ToolFailure) as failure:
        tools.issue_refund({"order_id": ORDER, "amount_cents": 100}, "k")
    assert failure.value.retryable is False and "422" in failure.value.message
    assert len(service.state()["refunds"]) == 1


def test_4xx_is_a_refusal_nothing_happened(service: Service) -> None:
    for args, code in (
        ({"order_id": "9999", "amount_cents": 100}, "404"),
        ({"order_id": ORDER, "amount_cents": 999_999}, "400"),
    ):
        with pytest.raises(ToolFailure) as failure:
            tools.issue_refund(args, "k-" + code)
        assert failure.value.retryable is False and code in failure.value.message
    with pytest.raises(ToolFailure) as failure:
        tools.send_email({"to": "dana@example.com", "template": "free_money"}, "k-email")
    assert failure.value.retryable is False
    with pytest.raises(ToolFailure) as failure:
        tools.issue_refund({"order_id": ORDER, "amount_cents": "2400"}, "k")
    assert failure.value.retryable is False
    assert service.state()["refunds"] == [] and service.state()["emails"] == []


def test_5xx_may_have_happened_and_the_same_key_settles_it(service: Service) -> None:
    inject(service, "/refunds", 503, apply=True)  # applied, then the answer says it failed
    with pytest.raises(ToolFailure) as failure:
        tools.issue_refund(dict(REFUND), "run-a:1")
    assert failure.value.retryable is True and "503" in failure.value.message
    assert len(service.state()["refunds"]) == 1  # it did happen
    answer = tools.issue_refund(dict(REFUND), "run-a:1")  # what a reconciliation can do
    assert [r["id"] for r in service.state()["refunds"]] == [answer["id"]]


def test_a_5xx_before_the_effect_is_retryable_too(service: Service) -> None:
    inject(service, "/emails", 502, apply=False)
    with pytest.raises(ToolFailure) as failure:
        tools.send_email({"to": "dana@example.com", "template": "refund_issued"}, "e1")
    assert failure.value.retryable is True
    assert service.state()["emails"] == []  # from outside, indistinguishable from the above


def test_a_timeout_is_retryable_and_the_effect_lands_anyway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_service(tmp_path / "slow.json", latency_ms="400,400") as slow:
        monkeypatch.setenv("BILLING_URL", slow.url)
        monkeypatch.setattr(tools, "TIMEOUT_S", 0.15)
        with pytest.raises(ToolFailure) as failure:
            tools.issue_refund(dict(REFUND), "run-a:1")
        assert failure.value.retryable is True and "no answer" in failure.value.message
        monkeypatch.setattr(tools, "TIMEOUT_S", 10.0)
        # The service goes on with the refund after the client gave up.
        wait_for(lambda: len(slow.state()["refunds"]) == 1, 10.0, "the refund to land")


def test_no_service_is_retryable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with running_service(tmp_path / "gone.json") as gone:
        url = gone.url
    monkeypatch.setenv("BILLING_URL", url)  # nothing listens there any more
    with pytest.raises(ToolFailure) as failure:
        tools.close_ticket({"ticket_id": TICKET}, "c1")
    assert failure.value.retryable is True
    monkeypatch.delenv("BILLING_URL")
    with pytest.raises(ToolFailure) as failure:
        tools.close_ticket({"ticket_id": TICKET}, "c1")
    assert failure.value.retryable is False and "BILLING_URL" in failure.value.message


def test_tickets_notes_and_reads(service: Service) -> None:
    charge = tools.lookup_charge({"order_id": ORDER}, None)
    assert charge["amount_cents"] == 2400 and charge["refunded_cents"] == 0
    note = tools.write_ticket_note({"ticket_id": TICKET, "text": "refunded 4471"}, "n1")
    assert tools.write_ticket_note({"ticket_id": TICKET, "text": "refunded 4471"}, "n1") == note
    closed = tools.close_ticket({"ticket_id": TICKET}, "c1")
    assert closed["status"] == "closed"
    assert tools.close_ticket({"ticket_id": TICKET}, "c2")["closed_at"] == closed["closed_at"]
    with pytest.raises(ToolFailure) as failure:
        tools.write_ticket_note({"ticket_id": TICKET, "text": "late"}, "n2")
    assert failure.value.retryable is False and "409" in failure.value.message
    with pytest.raises(ToolFailure) as failure:
        tools.close_ticket({"ticket_id": "1"}, "c3")
    assert "404" in failure.value.message
    state = service.state()
    assert [n["id"] for n in state["notes"]] == [note["id"]]
    assert len(state["closed"]) == 1 and state["tickets"][TICKET]["status"] == "closed"
    lookups = [r for r in state["requests"] if r["path"] == f"/charges/{ORDER}"]
    assert len(lookups) == 1  # reads are logged (a verify checks the lookup happened)


def test_a_restarted_service_remembers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state_file = tmp_path / "state.json"
    with running_service(state_file) as first:
        monkeypatch.setenv("BILLING_URL", first.url)
        refund = tools.issue_refund(dict(REFUND), "run-a:1")
        tools.send_email({"to": "dana@example.com", "template": "refund_issued"}, "e1")
    on_disk = json.loads(state_file.read_text())
    assert [r["id"] for r in on_disk["refunds"]] == [refund["id"]]
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temp file left behind
    with running_service(state_file) as second:
        monkeypatch.setenv("BILLING_URL", second.url)
        assert tools.issue_refund(dict(REFUND), "run-a:1") == refund  # the key is remembered
        nxt = tools.issue_refund(dict(REFUND), "run-b:1")
        assert nxt["id"] != refund["id"]  # and ids keep counting
        assert len(second.state()["refunds"]) == 2 and len(second.state()["emails"]) == 1


def test_identifiers_must_be_spelled_as_the_provider_spells_them(service: Service) -> None:
    """The task key is made from the arguments as sent: a tool that cleaned up " 4471" would
    refund order 4471 under the key " 4471:refund", past the ledger's unique index."""
    for args in (
        {"order_id": " 4471", "amount_cents": 2400},
        {"order_id": "4471\n", "amount_cents": 2400},
        {"order_id": "#4471", "amount_cents": 2400},
    ):
        with pytest.raises(ToolFailure) as failure:
            tools.issue_refund(args, "k")
        assert failure.value.retryable is False and "order_id" in failure.value.message
    for to in ("Dana.Whitfield@example.com", " dana.whitfield@example.com"):
        with pytest.raises(ToolFailure):
            tools.send_email({"to": to, "template": "refund_issued"}, "e")
    with pytest.raises(ToolFailure):
        tools.close_ticket({"ticket_id": "88231 "}, "c")
    state = service.state()
    assert state["refunds"] == [] and state["emails"] == [] and state["closed"] == []
    assert posts(state, "/refunds") == []  # refused before anything left this process
