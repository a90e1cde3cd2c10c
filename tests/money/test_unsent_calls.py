"""A call that never reached the provider costs nothing; one the provider may have received is
booked at its worst case. Through the official SDKs against 127.0.0.1: a port where nothing
listens, a host name that does not resolve and a TLS handshake that fails are released at $0,
the release saying why (``not_sent``); a server that takes the request and hangs up is booked
at the reservation. Where the request failed is read once, in ``provider_errors``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from overnight.clock import FakeClock
from overnight.core.budget import BudgetFractions, Ledger, Price, PriceTable
from overnight.core.errors import DependencyUnavailable
from overnight.messages.types import ModelRequest, estimate_input_tokens
from overnight.models.anthropic_provider import AnthropicClient
from overnight.models.gateway import ModelGateway
from overnight.models.openai_provider import OpenAIClient
from overnight.models.provider_errors import translate
from overnight.models.retry import RetryingClient
from overnight.store.journal import Journal, read_journal
from overnight.store.spend import spend_totals
from overnight.store.trace import Trace
from tests.helpers.provider import Hangup, LocalProvider, status_only, unbound_port

KEY = "test-key-not-real"
MODEL = "opus-class"
PRICE = Price(5.0, 25.0, 0.5, 6.25, 10.0)


def hello() -> ModelRequest:
    return ModelRequest(
        model=MODEL,
        purpose="execute",
        system="be brief",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=64,
    )


def worst() -> float:
    return Ledger(PriceTable({MODEL: PRICE}), 1.0).worst_case(
        MODEL, estimate_input_tokens(hello()), 64
    )


def adapter(provider: str, url: str) -> Any:
    if provider == "anthropic":
        return AnthropicClient(base_url=url, api_key=KEY, stream=False, timeout_s=5.0)
    return OpenAIClient(api="chat", base_url=url + "/v1", api_key=KEY, stream=False, timeout_s=5.0)


class Rig:
    """The gateway over an SDK adapter behind the retry policy, two attempts at most."""

    def __init__(self, tmp: Path, provider: str, url: str) -> None:
        self.tmp = tmp
        clock = FakeClock()
        self.ledger = Ledger(PriceTable({MODEL: PRICE}), 5.0)
        client = RetryingClient(
            adapter(provider, url),
            max_attempts=2,
            sleep=clock.advance,
            monotonic=clock.monotonic,
            jitter=lambda: 0.0,
        )
        self.gateway = ModelGateway(
            client,
            self.ledger,
            Journal(tmp / "spend.jsonl", durable=True),
            Trace(tmp / "trace.jsonl", clock.monotonic, clock.now_iso),
            clock.monotonic,
            BudgetFractions(),
        )

    def call(self) -> None:
        with pytest.raises(DependencyUnavailable):
            self.gateway.call(hello())

    def journal(self) -> list[dict[str, Any]]:
        return read_journal(self.tmp / "spend.jsonl")


PROVIDERS = ["anthropic", "openai"]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("where", "why"),
    [("refused", "connection_refused"), ("unresolved", "name_unresolved"), ("tls", "tls_failed")],
)
def test_a_request_that_never_left_is_released_at_nothing_saying_why(
    tmp_path: Path, provider: str, where: str, why: str
) -> None:
    with LocalProvider(status_only(200)) as plain_http:
        url = {
            "refused": f"http://127.0.0.1:{unbound_port()}",
            "unresolved": "http://models.overnight-test.invalid",
            "tls": plain_http.url.replace("http://", "https://"),
        }[where]
        rig = Rig(tmp_path, provider, url)
        rig.call()
    journal = rig.journal()
    assert [r["kind"] for r in journal] == ["reserve", "release"] * 2
    assert [r.get("not_sent") for r in journal if r["kind"] == "release"] == [why, why]
    assert rig.ledger.spent_usd == 0.0
    totals = spend_totals(journal)
    assert (totals.usd, totals.dangling_usd, totals.calls) == (0.0, 0.0, 0)
    released = [e for e in read_journal(tmp_path / "trace.jsonl") if e.get("released")]
    assert [e["not_sent"] for e in released] == [why, why]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_request_the_server_took_and_hung_up_on_is_booked_at_its_worst_case(
    tmp_path: Path, provider: str
) -> None:
    with Hangup() as server:
        rig = Rig(tmp_path, provider, server.url)
        rig.call()
        assert server.requests == 2
    journal = rig.journal()
    assert [r["kind"] for r in journal] == ["reserve", "spend"] * 2
    spent = [r for r in journal if r["kind"] == "spend"]
    assert [r["usd"] for r in spent] == [worst(), worst()]
    assert all("not_sent" not in r for r in journal)
    assert rig.ledger.spent_usd == pytest.approx(2 * worst())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_error_status_is_released_saying_its_status(tmp_path: Path, provider: str) -> None:
    with LocalProvider(status_only(529, "overloaded_error")) as server:
        rig = Rig(tmp_path, provider, server.url)
        rig.call()
    releases = [r for r in rig.journal() if r["kind"] == "release"]
    assert [(r.get("status"), r.get("not_sent")) for r in releases] == [(529, None)] * 2


def _raised(sdk_error: type[Exception], transport: Exception) -> Exception:
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")
    try:
        try:
            raise transport
        except type(transport) as exc:
            raise sdk_error(request=request) from exc
    except sdk_error as outer:
        return outer


@pytest.mark.parametrize(
    ("sdk_error", "transport", "not_sent"),
    [
        (anthropic.APITimeoutError, httpx2.ConnectTimeout("connect"), "connect_timeout"),
        (openai.APITimeoutError, httpx2.ConnectTimeout("connect"), "connect_timeout"),
        (anthropic.APITimeoutError, httpx2.ReadTimeout("read"), None),
        (openai.APIConnectionError, httpx2.RemoteProtocolError("gone"), None),
        (anthropic.APIConnectionError, httpx2.ReadError("reset"), None),
    ],
    ids=["connect-timeout-a", "connect-timeout-o", "read-timeout", "hung-up", "reset"],
)
def test_where_a_request_failed_is_read_once_at_the_boundary(
    sdk_error: type[Exception], transport: Exception, not_sent: str | None
) -> None:
    err = translate(_raised(sdk_error, transport), "anthropic")
    assert err is not None and err.retryable
    assert err.not_sent == not_sent
    assert err.maybe_billed is (not_sent is None)
