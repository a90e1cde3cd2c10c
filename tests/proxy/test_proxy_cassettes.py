"""Recorded real API traffic through the proxy: each recorded answer is served upstream
(gzip-compressed ones compressed again), the recorded request is sent to the proxy, and the
client must read exactly the recorded body while the meter books exactly the usage the
cassettes' own expectations give (``tests.models.test_cassettes.EXPECTED``), cache reads and
writes included; a recorded error status reaches the client as it was recorded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from overnight.proxy.allowlist import Unforwardable
from overnight.proxy.protocols import read_request
from overnight.proxy.server import MeteringProxy, upstreams_from_env
from overnight.testing.meters import RecordingMeter
from tests.models.cassettes import Interaction, cassette_dir, load
from tests.models.replay import ReplayServer
from tests.models.test_cassettes import EXPECTED, Err, Foreign, Ok
from tests.proxy.stack import KEY, TOKEN

ROUTES = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai-chat",
    "/v1/responses": "openai-responses",
}


@pytest.fixture
def folder() -> Path:
    return cassette_dir()


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    srv = ReplayServer()
    try:
        yield srv
    finally:
        srv.close()


def body_for(interaction: Interaction) -> bytes:
    """The recorded request, its streaming as the recorded answer was."""
    body = dict(interaction.request or {"model": "recorded", "messages": []})
    body["stream"] = interaction.is_sse
    if not interaction.is_sse:
        body.pop("stream_options", None)
    return json.dumps(body).encode()


#: Recorded requests that ask for what the proxy cannot bound before sending, by the end of
#: their cassette's name: the name of what the refusal names.
REFUSED = {
    "TestSyncRunTools__092be1de-d3f8-4c22-a4ea-a7ad54689836.json": "'container'",
    "anthropic_to_google_deferred_capability_history_replay.yaml": "tool_search_tool_bm25",
    "test_anthropic_compaction_usage_with_cache.yaml": "compact_20260112",
    "test_anthropic_compaction_usage_with_cache_streaming.yaml": "compact_20260112",
    "test_openai_responses_streaming_usage.yaml": "'previous_response_id'",
}


def _refusals(pairs: list[tuple[Interaction, object]]) -> list[Exception]:
    out: list[Exception] = []
    for interaction, _ in pairs:
        try:
            read_request(ROUTES[interaction.path], body_for(interaction))
        except Unforwardable as exc:
            out.append(exc)
    return out


def refused_for(name: str) -> str | None:
    return next((named for end, named in REFUSED.items() if name.endswith(end)), None)


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=lambda n: n.split("/")[-1][-70:])
def test_a_recorded_answer_reaches_the_client_whole_and_its_bill_is_booked(
    name: str, folder: Path, server: ReplayServer
) -> None:
    pairs = [
        (i, e)
        for i, e in zip(load(folder / name), EXPECTED[name], strict=True)
        if not isinstance(e, Foreign)
    ]
    env = {
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": KEY,
        "OPENAI_BASE_URL": f"{server.url}/v1",
        "OPENAI_API_KEY": KEY,
    }
    meter = RecordingMeter(max_output=100_000)
    assert refused_for(name) is None or any(
        refused_for(name) in str(exc) for exc in _refusals(pairs)
    ), "a cassette listed as refused is forwarded"
    with MeteringProxy(upstreams_from_env(env), tcp_port=0) as proxy, httpx2.Client() as client:
        proxy.admit(TOKEN, meter)
        for at, (interaction, expect) in enumerate(pairs):
            server.serve(interaction)
            api = ROUTES[interaction.path]
            auth = (
                {"x-api-key": TOKEN} if api == "anthropic" else {"authorization": f"Bearer {TOKEN}"}
            )
            response = client.post(
                f"{proxy.url}{interaction.path}",
                content=body_for(interaction),
                headers={**auth, "content-type": "application/json"},
            )
            named = refused_for(name)
            if named is not None and meter.unforwarded:
                # refused unforwarded, in the provider's shape, naming what it cannot bound
                assert response.status_code == (400 if api == "anthropic" else 429)
                assert named in response.text and "is not forwarded" in response.text
                assert len(server.received) == len(meter.records) == at  # nothing more sent
                return
            [*_, settled] = meter.settled(at + 1)

            assert server.received[-1].headers.get(
                "x-api-key" if api == "anthropic" else "authorization"
            ) in (KEY, f"Bearer {KEY}")
            if isinstance(expect, Err):
                assert response.status_code == expect.status
                assert response.content == interaction.body
                assert settled.failure is not None
                assert (settled.failure.status, settled.failure.sent) == (expect.status, True)
                assert expect.message in settled.failure.error
                continue
            assert isinstance(expect, Ok)
            assert response.status_code == 200
            assert response.content == interaction.body  # byte for byte, decompressed
            assert settled.answer is not None, settled.failure
            if expect.warning:
                assert settled.answer.usage is None
                assert settled.answer.usage_warning is not None
            else:
                assert settled.answer.usage == expect.usage
                assert settled.answer.usage_warning is None
            assert [n for n, _ in expect.tools] == list(settled.answer.tool_calls)
