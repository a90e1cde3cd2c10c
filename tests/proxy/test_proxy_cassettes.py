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
