"""What the proxy does when the budgets refuse, the token is wrong, or the upstream fails: the
client gets an error its SDK understands (and does not retry when retrying cannot help), the
upstream gets nothing it should not, every attempt is settled once with what is known of it,
and the real key is in nothing the client sees."""

from __future__ import annotations

import contextlib
import threading

import anthropic
import httpx2
import openai
import pytest

from overnight.core.budget import Usage
from overnight.proxy.metering import Api
from overnight.testing.meters import RecordingMeter
from overnight.testing.upstream import Fail, Received, Turn, text
from tests.helpers.provider import Hangup, unbound_port
from tests.proxy.stack import APIS, KEY, TOKEN, ask, stack

BODIES = {
    "anthropic": ("/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": []}),
    "openai-chat": ("/v1/chat/completions", {"model": "gpt-5.5", "messages": []}),
    "openai-responses": ("/v1/responses", {"model": "gpt-5.5", "input": "hi"}),
}


@pytest.mark.parametrize("api", APIS)
def test_a_refusal_is_the_provider_s_own_error_and_is_not_retried(api: Api) -> None:
    meter = RecordingMeter(refuse="the night's budget is spent ($4.98 of $5.00)")
    with stack([text("never")], meter) as s:
        # the SDKs' own retries left on: the refusal must stop them
        if api == "anthropic":
            with pytest.raises(anthropic.BadRequestError) as info:
                ask(api, s.proxy.url or "", stream=False, retries=2)
            assert info.value.status_code == 400
            assert info.value.body == {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "Your credit balance is too low to access the Anthropic API: "
                    "the night's budget is spent ($4.98 of $5.00)",
                },
            }
        else:
            with pytest.raises(openai.RateLimitError) as oinfo:
                ask(api, s.proxy.url or "", stream=True, retries=2)
            assert oinfo.value.status_code == 429
            assert oinfo.value.code == "insufficient_quota"
            assert oinfo.value.type == "insufficient_quota"
            assert "budget is spent" in oinfo.value.message

    assert len(meter.asked) == 1  # asked once: no retry
    assert meter.records == []
    assert s.upstream.requests == []


@pytest.mark.parametrize("api", APIS)
def test_an_unknown_token_is_401_and_nothing_is_forwarded(api: Api) -> None:
    with stack([text("never")]) as s:
        s.proxy.admit("another-task", RecordingMeter())
        s.proxy.revoke("another-task")
        for token in ("guessed", "another-task", KEY):
            error = (
                anthropic.AuthenticationError if api == "anthropic" else openai.AuthenticationError
            )
            with pytest.raises(error) as info:
                ask(api, s.proxy.url or "", stream=False, token=token)
            assert info.value.status_code == 401
        no_token = httpx2.post(f"{s.proxy.url}{BODIES[api][0]}", json=BODIES[api][1])

    assert no_token.status_code == 401
    assert s.meter.asked == []
    assert s.upstream.requests == []


def test_other_paths_and_methods_are_404_in_the_provider_s_shape() -> None:
    with stack([text("never")]) as s:
        url = s.proxy.url
        models = httpx2.get(f"{url}/v1/models", headers={"authorization": f"Bearer {TOKEN}"})
        files = httpx2.post(f"{url}/v1/files", headers={"x-api-key": TOKEN}, json={})
        get_messages = httpx2.get(f"{url}/v1/messages", headers={"x-api-key": TOKEN})

    assert models.status_code == 404
    assert models.json()["error"]["type"] == "invalid_request_error"
    assert files.status_code == get_messages.status_code == 404
    assert files.json()["type"] == "error" and files.json()["error"]["type"] == "not_found_error"
    assert s.upstream.requests == []
    assert s.meter.asked == []


def test_a_request_that_cannot_be_metered_is_400_and_not_forwarded() -> None:
    with stack([text("never")]) as s:
        url = s.proxy.url
        auth = {"authorization": f"Bearer {TOKEN}"}
        several = httpx2.post(
            f"{url}/v1/chat/completions", headers=auth, json={"model": "m", "messages": [], "n": 3}
        )
        no_model = httpx2.post(f"{url}/v1/responses", headers=auth, json={"input": "hi"})
        not_json = httpx2.post(f"{url}/v1/messages", headers={"x-api-key": TOKEN}, content=b"{")

    assert several.status_code == no_model.status_code == not_json.status_code == 400
    assert "n=1" in several.json()["error"]["message"]
    assert not_json.json()["error"]["type"] == "invalid_request_error"
    assert s.upstream.requests == []
    assert s.meter.asked == []


def test_a_family_without_a_key_is_refused_403() -> None:
    with (
        stack([text("never")], env={"ANTHROPIC_API_KEY": KEY}) as s,
        pytest.raises(openai.PermissionDeniedError),
    ):
        ask("openai-chat", s.proxy.url or "", stream=False)

    assert s.meter.asked == []


@pytest.mark.parametrize("api", APIS)
def test_an_upstream_that_is_down_fails_unsent(api: Api) -> None:
    dead = f"http://127.0.0.1:{unbound_port()}"
    env = {
        "ANTHROPIC_BASE_URL": dead,
        "ANTHROPIC_API_KEY": KEY,
        "OPENAI_BASE_URL": f"{dead}/v1",
        "OPENAI_API_KEY": KEY,
    }
    with stack([], env=env) as s:
        error = anthropic.InternalServerError if api == "anthropic" else openai.InternalServerError
        with pytest.raises(error) as info:
            ask(api, s.proxy.url or "", stream=True)
        [settled] = s.meter.settled(1)

    assert info.value.status_code == 502
    assert settled.answer is None and settled.failure is not None
    assert settled.failure.sent is False
    assert settled.failure.status is None and settled.failure.usage is None
    assert s.meter.booked == 0


def test_an_upstream_that_hangs_up_on_the_request_may_have_billed_it() -> None:
    with Hangup() as hangup:
        env = {"ANTHROPIC_BASE_URL": hangup.url, "ANTHROPIC_API_KEY": KEY}
        with stack([], env=env) as s:
            with pytest.raises(anthropic.InternalServerError):
                ask("anthropic", s.proxy.url or "", stream=False)
            [settled] = s.meter.settled(1)

    assert hangup.requests == 1
    assert settled.failure is not None and settled.failure.sent is True
    assert settled.failure.status is None


@pytest.mark.parametrize(
    ("api", "error"),
    [
        ("anthropic", anthropic.InternalServerError),
        ("openai-chat", openai.InternalServerError),
        ("openai-responses", openai.RateLimitError),
    ],
)
def test_an_upstream_error_status_is_relayed_as_is(api: Api, error: type[Exception]) -> None:
    status = 429 if api == "openai-responses" else 529
    with stack([Fail(status, "Overloaded", should_retry=False)]) as s:
        with pytest.raises(error) as info:
            ask(api, s.proxy.url or "", stream=api != "openai-chat")
        [settled] = s.meter.settled(1)

    assert getattr(info.value, "status_code", None) == status
    assert settled.failure is not None
    assert (settled.failure.status, settled.failure.sent, settled.failure.usage) == (
        status,
        True,
        None,
    )
    assert "Overloaded" in settled.failure.error
    assert s.meter.booked == 0


def test_a_stream_cut_mid_way_is_booked_at_its_reservation_not_at_message_start() -> None:
    bill = Usage(input=40, output=500, cache_read=2000, cache_write_5m=300)
    with stack([Turn(text="a long streamed answer " * 20, usage=bill, cut_after=6)]) as s:
        with pytest.raises(anthropic.APIConnectionError, match="incomplete chunked read"):
            ask("anthropic", s.proxy.url or "", stream=True)
        [settled] = s.meter.settled(1)

    assert settled.answer is None and settled.failure is not None
    assert settled.failure.sent is True and settled.failure.status is None
    # message_start said the input and the first output token, but the provider may have
    # generated (and billed) the whole answer: only the final usage is a bill, and none came
    assert settled.failure.usage is None
    assert s.meter.booked == settled.held
    assert "stream broke" in settled.failure.error


@pytest.mark.parametrize("api", APIS)
def test_an_error_event_inside_a_stream_fails_the_attempt(api: Api) -> None:
    bill = Usage(input=300, output=90, cache_read=1000)
    turn = Turn(text="some words " * 30, usage=bill, cut_after=5, stream_error="Overloaded")
    with stack([turn]) as s:
        with contextlib.suppress(anthropic.APIError, openai.APIError):
            ask(api, s.proxy.url or "", stream=True)
        [settled] = s.meter.settled(1)

    assert settled.answer is None and settled.failure is not None
    assert settled.failure.sent is True and settled.failure.status is None
    assert settled.failure.error == "Overloaded"
    seen = {
        "anthropic": None,  # message_start's figures are not the bill: the reservation is
        "openai-chat": None,  # the usage chunk comes last
        "openai-responses": bill,  # response.failed carries the usage
    }
    assert settled.failure.usage == seen[api]


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses"])
def test_an_openai_stream_cut_before_its_usage_fails_with_none(api: Api) -> None:
    with stack([Turn(text="some words " * 30, cut_after=4)]) as s:
        with pytest.raises(openai.APIConnectionError):
            ask(api, s.proxy.url or "", stream=True)
        [settled] = s.meter.settled(1)

    assert settled.failure is not None
    assert (settled.failure.sent, settled.failure.usage) == (True, None)
    assert s.meter.booked == settled.held  # worst case: nobody said what it cost


def test_a_whole_answer_cut_mid_body_fails_sent() -> None:
    with stack([Turn(text="answer", cut_after=1)]) as s:
        with pytest.raises(openai.InternalServerError) as info:
            ask("openai-chat", s.proxy.url or "", stream=False)
        [settled] = s.meter.settled(1)

    assert info.value.status_code == 502
    assert settled.failure is not None and settled.failure.sent is True


def test_a_client_that_hangs_up_mid_stream_has_the_whole_answer_booked() -> None:
    """The provider goes on generating after the client hangs up, and bills all of it: the
    proxy reads the stream to its end and books its final usage, not message_start's."""
    bill = Usage(input=10, output=900, cache_read=64)
    with stack([Turn(text="word " * 200, usage=bill, pace=0.005)]) as s:
        with httpx2.stream(
            "POST",
            f"{s.proxy.url}/v1/messages",
            headers={"x-api-key": TOKEN},
            json={"model": "m", "max_tokens": 1000, "stream": True, "messages": []},
        ) as response:
            first = next(response.iter_bytes())
        [settled] = s.meter.settled(1)

    assert first.startswith(b"event: message_start")
    assert settled.failure is None and settled.answer is not None
    assert settled.answer.usage == bill  # the final usage, read after the client left
    assert s.meter.booked == bill.total_tokens


def test_a_client_that_hangs_up_on_a_stream_that_never_reports_its_usage_books_the_hold() -> None:
    bill = Usage(input=10, output=900, cache_read=64)
    turn = Turn(text="word " * 200, usage=bill, pace=0.005, cut_after=60)
    with stack([turn]) as s:
        with httpx2.stream(
            "POST",
            f"{s.proxy.url}/v1/messages",
            headers={"x-api-key": TOKEN},
            json={"model": "m", "max_tokens": 1000, "stream": True, "messages": []},
        ) as response:
            next(response.iter_bytes())
        [settled] = s.meter.settled(1)

    assert settled.failure is not None and settled.failure.usage is None
    assert s.meter.booked == settled.held  # nothing said what it cost: the worst case


@pytest.mark.parametrize("api", APIS)
def test_a_stream_is_relayed_as_it_arrives(api: Api) -> None:
    """The upstream holds its stream open after the first event until the client has read
    that event through the proxy: a proxy that waited for the end would never deliver it."""
    read_first = threading.Event()
    turn = Turn(text="first and then the rest", after_first_event=lambda: read_first.wait(10))
    path, body = BODIES[api]
    auth = {"x-api-key": TOKEN} if api == "anthropic" else {"authorization": f"Bearer {TOKEN}"}
    with stack([turn]) as s:
        with httpx2.stream(
            "POST", f"{s.proxy.url}{path}", headers=auth, json={**body, "stream": True}, timeout=5
        ) as response:
            chunks = response.iter_bytes()
            first = next(chunks)
            read_first.set()
            rest = b"".join(chunks)
        [settled] = s.meter.settled(1)

    assert first.startswith(b"event: " if api != "openai-chat" else b"data: ")
    assert rest
    assert read_first.is_set() and settled.answer is not None


def test_the_real_key_is_in_nothing_the_client_sees() -> None:
    def echoing(request: Received) -> Turn | Fail:
        if request.body.get("model") == "echo":
            return Fail(401, f"Incorrect API key provided: {request.key}")
        return text(f"hello, {request.body.get('model')}")

    seen: list[str] = []
    with stack(echoing) as s:
        url = s.proxy.url
        with httpx2.Client() as client:
            for api, (path, body) in BODIES.items():
                auth = (
                    {"x-api-key": TOKEN}
                    if api == "anthropic"
                    else {"authorization": f"Bearer {TOKEN}"}
                )
                for extra in ({}, {"stream": True}, {"model": "echo"}):
                    r = client.post(f"{url}{path}", headers=auth, json={**body, **extra})
                    seen.append(str(r.headers) + r.text)
            for token in ("wrong", TOKEN):
                r = client.get(f"{url}/v1/models", headers={"x-api-key": token})
                seen.append(str(r.headers) + r.text)
        s.proxy.admit("refused", RecordingMeter(refuse="spent"))
        r = httpx2.post(
            f"{url}/v1/messages", headers={"x-api-key": "refused"}, json=BODIES["anthropic"][1]
        )
        seen.append(str(r.headers) + r.text)
        s.meter.settled(9)

    assert all(req.key == KEY for req in s.upstream.requests)
    assert len(s.upstream.requests) == 9
    assert any("credential of the harness and was withheld" in page for page in seen)
    assert not any(KEY in page for page in seen)
    assert not any(KEY in str(r.failure) for r in s.meter.records)
    assert KEY not in repr(s.proxy.upstreams)
