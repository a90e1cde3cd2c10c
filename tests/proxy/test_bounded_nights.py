"""The proxy forwards only what it can bound, tried as a hostile model driving a CLI would: one
night through ``overnight run`` per class of request that the provider bills by something
other than its tokens, or that makes the provider reach a host, or whose answer echoes the key.
The upstream bills what each request really asks for (its pages, pixels, uses, multiplier, the
whole of a stream the client hung up on), and every night is checked by ``assert_bounded``."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from overnight.core.budget import Usage
from overnight.testing.upstream import Fail, Received, Turn, text
from tests.executors.clis import UPSTREAM_KEY
from tests.helpers.sandbox import require_bwrap
from tests.proxy.bounded import (
    MODEL,
    OPENAI_MODEL,
    Bill,
    Night,
    assert_bounded,
    assert_no_key,
    capped,
    hostile,
    refusals,
    run_night,
)

pytestmark = pytest.mark.usefixtures("bwrap")


@pytest.fixture
def bwrap() -> None:
    require_bwrap()


def anthropic(n: int, **body: Any) -> dict[str, Any]:
    request = {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Fix calc.py."}],
        **body,
    }
    return {"path": "/v1/messages", "body": request, "headers": hostile(n)}


def responses(n: int, **body: Any) -> dict[str, Any]:
    request = {"model": OPENAI_MODEL, "input": "Fix calc.py.", "max_output_tokens": 1024, **body}
    return {"path": "/v1/responses", "body": request, "headers": hostile(n)}


def chat(n: int, **body: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": "Fix calc.py."}]
    request = {"model": OPENAI_MODEL, "messages": messages, "max_tokens": 1024, **body}
    return {"path": "/v1/chat/completions", "body": request, "headers": hostile(n)}


def plain(n: int, request: Received) -> tuple[Turn, Bill]:
    usage = capped(Usage(input=800, output=200), request)
    return text("ok", usage=usage), Bill(n, usage)


def test_a_server_tool_is_forwarded_only_priced_its_uses_capped_and_its_fees_booked(
    tmp_path: Path,
) -> None:
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 50}
    limited = {**search, "allowed_domains": ["docs.python.org"]}
    plan = [
        anthropic(0, tools=[limited]),  # priced, limited to a host the sandbox allows
        anthropic(1, tools=[search]),  # no domain: the provider may reach any host
        anthropic(2, tools=[{**search, "allowed_domains": ["evil.example"]}]),
        anthropic(3, tools=[{"type": "code_execution_20250825", "name": "code_execution"}]),
        anthropic(4, tools=[{"type": "web_fetch_20250910", "name": "web_fetch"}]),
    ]
    night = Night(
        tmp_path,
        plan,
        prices={"web_search": 0.01},
        sandbox={"hosts": ["docs.python.org"]},
    )

    def bill(n: int, request: Received) -> tuple[Turn, Bill]:
        [tool] = request.body["tools"]
        uses = int(tool["max_uses"])  # a search loop uses every search it is allowed
        # each pass of the provider's loop reads the request and the results before it
        usage = capped(Usage(input=(uses + 1) * 900 + uses * 4000, output=300), request)
        turn = text("searched", usage=usage, server_uses={"web_search": uses})
        return turn, Bill(n, usage, fees_usd=Decimal("0.01") * uses)

    done, forwarded, bills = run_night(night, bill)
    assert_bounded(night, done, forwarded, bills)
    # only the first was forwarded, its uses capped by the proxy
    assert [r.headers["x-client-request-id"] for r in forwarded] == ["hostile-0"]
    assert forwarded[0].body["tools"][0]["max_uses"] == 3
    said = refusals(night)
    assert any("limited to no domain" in s for s in said)
    assert any("evil.example" in s for s in said)
    assert any("code_execution_20250825" in s for s in said)
    assert any("web_fetch" in s and "not price" in s for s in said)
    # the host the provider reached for the sandbox is named in the trace
    reached = [e for e in night.trace() if e.get("decision") == "provider_reaches"]
    assert reached and reached[0]["hosts"] == ["docs.python.org"]
    # and the refusal reached the agent in the provider's own shape, naming the field
    received = night.received()
    assert b"credit balance is too low" in received[3] and b"code_execution" in received[3]


def test_an_unpriced_server_tool_is_refused_unforwarded(tmp_path: Path) -> None:
    search = {"type": "web_search_20250305", "name": "web_search", "allowed_domains": ["a.io"]}
    plan = [anthropic(0, tools=[search]), responses(1, tools=[{"type": "web_search"}])]
    night = Night(tmp_path, plan, sandbox={"hosts": ["a.io"], "network": False})
    done, forwarded, bills = run_night(night, plain)
    assert_bounded(night, done, forwarded, bills)
    assert forwarded == []
    assert any("web_search" in s and "does not price" in s for s in refusals(night))


URL = "https://attacker.example/exfil?k="


def test_what_makes_the_provider_fetch_a_url_never_leaves(tmp_path: Path) -> None:
    document = {"type": "document", "source": {"type": "url", "url": URL + "doc.pdf"}}
    image = {"type": "image", "source": {"type": "url", "url": URL + "i.png"}}
    mcp = [{"type": "url", "url": URL + "mcp", "name": "x"}]
    chat_image = [{"type": "image_url", "image_url": {"url": URL + "c.png"}}]
    file_url = [{"type": "input_file", "file_url": URL + "f.pdf"}]
    plan = [
        anthropic(0, messages=[{"role": "user", "content": [document]}]),
        anthropic(1, messages=[{"role": "user", "content": [image]}]),
        anthropic(2, mcp_servers=mcp),
        chat(3, messages=[{"role": "user", "content": chat_image}]),
        responses(4, input=[{"role": "user", "content": file_url}]),
        anthropic(5),  # an ordinary request still goes through
    ]
    night = Night(tmp_path, plan, sandbox={"hosts": ["attacker.example"]})
    done, forwarded, bills = run_night(night, plain)
    result = assert_bounded(night, done, forwarded, bills)
    assert result["stop_reason"] == "GOAL_MET"
    assert [r.headers["x-client-request-id"] for r in forwarded] == ["hostile-5"]
    assert not any(URL.encode() in r.raw for r in forwarded)
    said = refusals(night)
    assert sum("URL" in s or "'url'" in s for s in said) >= 4
    assert any("mcp_servers" in s for s in said)


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    rows = zlib.compress(b"\0" * ((width + 7) // 8 + 1) * height, 9)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")
    )


def pdf(pages: int) -> bytes:
    kids = " ".join(f"{3 + i} 0 R" for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        *(b"<< /Type /Page /Parent 2 0 R >>" for _ in range(pages)),
    ]
    body = b"%PDF-1.7\n" + b"".join(
        b"%d 0 obj\n%s\nendobj\n" % (i + 1, o) for i, o in enumerate(objects)
    )
    return body + b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"


def test_pdf_pages_and_image_pixels_are_held_by_their_own_rule(tmp_path: Path) -> None:
    dense = base64.b64encode(pdf(60)).decode()  # a few kB, sixty pages
    big = base64.b64encode(png(4000, 3000)).decode()  # a few kB, twelve megapixels
    document = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": dense},
    }
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": big}}
    broken = {
        **document,
        "source": {**document["source"], "data": base64.b64encode(b"%PDF-").decode()},
    }
    chat_file = [{"type": "file", "file": {"file_data": f"data:application/pdf;base64,{dense}"}}]
    plan = [
        anthropic(0, messages=[{"role": "user", "content": [document, image]}]),
        anthropic(1, messages=[{"role": "user", "content": [broken]}]),
    ]
    night = Night(tmp_path, plan)

    def bill(n: int, request: Received) -> tuple[Turn, Bill]:
        # the provider's rules: about 3,000 tokens a page, width x height / 750 an image
        usage = capped(Usage(input=60 * 3000 + 4000 * 3000 // 750 + 500, output=400), request)
        return text("read", usage=usage), Bill(n, usage)

    done, forwarded, bills = run_night(night, bill)
    assert_bounded(night, done, forwarded, bills)
    assert [r.headers["x-client-request-id"] for r in forwarded] == ["hostile-0"]
    assert any("pages cannot be counted" in s for s in refusals(night))
    # OpenAI's file input is counted the same way (a request-level check, no night needed)
    from overnight.proxy.protocols import read_request

    body = json.dumps(chat(2, messages=[{"role": "user", "content": chat_file}])["body"]).encode()
    _, asked = read_request("openai-chat", body)
    assert asked.input_bound >= 60 * 3000


def test_a_stored_conversation_continued_by_id_is_refused(tmp_path: Path) -> None:
    plan = [
        responses(0, previous_response_id="resp_0123"),
        responses(1, conversation="conv_0123"),
        responses(2, store=True),
        responses(3, background=True),
        responses(4, input=[{"type": "item_reference", "id": "msg_0123"}]),
        chat(5, store=True),
        responses(6),  # stored unless told not to: the proxy tells it not to
    ]
    night = Night(tmp_path, plan, api="openai-responses")
    done, forwarded, bills = run_night(night, plain)
    assert_bounded(night, done, forwarded, bills)
    assert [r.headers["x-client-request-id"] for r in forwarded] == ["hostile-6"]
    assert forwarded[0].body["store"] is False
    said = " ".join(refusals(night))
    for name in ("previous_response_id", "conversation", "store", "background", "item_reference"):
        assert name in said


def test_multipliers_are_priced_from_the_spec_or_refused(tmp_path: Path) -> None:
    plan = [
        anthropic(0, speed="fast"),  # priced: six times every rate
        anthropic(1, inference_geo="us"),  # unpriced
        {**anthropic(2), "headers": {**hostile(2), "anthropic-beta": "fast-mode-2026-02-01"}},
        anthropic(3),  # the service tier left open is pinned to the standard one
    ]
    night = Night(tmp_path, plan, prices={"multipliers": {"speed=fast": 6.0}})

    def bill(n: int, request: Received) -> tuple[Turn, Bill]:
        usage = capped(Usage(input=900, output=300), request)
        fast = request.body.get("speed") == "fast"
        turn = text("fast" if fast else "ok", usage=usage, served={"speed": "fast"} if fast else {})
        return turn, Bill(n, usage, rate=Decimal(6) if fast else Decimal(1))

    done, forwarded, bills = run_night(night, bill)
    assert_bounded(night, done, forwarded, bills)
    ids = [r.headers["x-client-request-id"] for r in forwarded]
    assert ids == ["hostile-0", "hostile-2", "hostile-3"]  # the beta alone asks for nothing
    assert all(r.body["service_tier"] == "standard_only" for r in forwarded)
    assert any("inference_geo=us" in s for s in refusals(night))


def test_an_openai_service_tier_is_pinned_or_priced(tmp_path: Path) -> None:
    plan = [chat(0, service_tier="priority"), chat(1, service_tier="auto"), chat(2)]
    night = Night(tmp_path, plan, api="openai-chat")
    done, forwarded, bills = run_night(night, plain)
    assert_bounded(night, done, forwarded, bills)
    assert [r.body["service_tier"] for r in forwarded] == ["default", "default"]
    assert any("service_tier=priority" in s for s in refusals(night))


def test_a_stream_the_client_hangs_up_on_is_booked_whole(tmp_path: Path) -> None:
    plan = [
        {**anthropic(0, stream=True, max_tokens=8000), "hang_up": True},
        {**anthropic(1, stream=True, max_tokens=8000), "hang_up": True},
    ]
    night = Night(tmp_path, plan, api="anthropic")

    def bill(n: int, request: Received) -> tuple[Turn, Bill]:
        usage = capped(Usage(input=1200, output=6000), request)  # the whole answer, generated
        return text("word " * 400, usage=usage, pace=0.002), Bill(n, usage)

    done, forwarded, bills = run_night(night, bill)
    assert_bounded(night, done, forwarded, bills)
    assert len(forwarded) == 2
    booked = [r for r in night.spend() if r["kind"] == "spend"]
    assert [r["usage"]["output"] for r in booked] == [6000, 6000]


def test_a_stream_that_never_reports_its_final_usage_is_booked_at_its_reservation(
    tmp_path: Path,
) -> None:
    plan = [anthropic(0, stream=True)]
    night = Night(tmp_path, plan)

    def bill(n: int, request: Received) -> tuple[Turn, Bill]:
        usage = capped(Usage(input=1200, output=600), request)
        return text("word " * 300, usage=usage, cut_after=40), Bill(n, usage)

    run_night(night, bill)
    spend = night.spend()
    [reserve] = [r for r in spend if r["kind"] == "reserve"]
    [booked] = [r for r in spend if r["kind"] == "spend"]
    assert booked["usd"] == reserve["usd"] and booked["usage"] is None
    assert night.result()["spend"]["total_usd"] <= night.usd


ESCAPED = "".join(f"\\u{ord(c):04x}" for c in UPSTREAM_KEY)


def test_an_upstream_that_echoes_the_key_reaches_the_sandbox_with_none_of_it(
    tmp_path: Path,
) -> None:
    plan = [
        anthropic(0, stream=True),  # the key split over a stream's events
        anthropic(1),  # the key JSON-escaped in a whole body
        anthropic(2),  # the key in a gzip-compressed body
        anthropic(3),  # the key in a header
        anthropic(4),  # the key in an error's message
        anthropic(5, stream=True),  # the key escaped inside one event
    ]
    night = Night(tmp_path, plan)

    def escape(data: bytes) -> bytes:
        return data.replace(b"ECHO", ESCAPED.encode())

    def bill(n: int, request: Received) -> tuple[Turn | Fail, Bill]:
        usage = capped(Usage(input=700, output=90), request)
        said = f"you sent {request.key} to me"
        if n == 4:
            return Fail(401, f"invalid x-api-key: {request.key}"), Bill(n, Usage())
        turns = {
            0: text(said, usage=usage, piece_size=7),
            1: text("you sent ECHO", usage=usage, encode=escape),
            2: text(said, usage=usage, gzip=True),
            3: text("fine", usage=usage, headers={"x-echo": f"key={request.key}"}),
            5: text("you sent ECHO", usage=usage, encode=escape),
        }
        return turns[n], Bill(n, usage)

    _, forwarded, _ = run_night(night, bill)
    assert len(forwarded) == 6
    assert_no_key(night.received())
    received = night.received()
    assert b"was withheld" in received[1] and b"was withheld" in received[2]
    assert b"x-echo" not in received[3].lower()
    assert night.result()["spend"]["total_usd"] <= night.usd
    # the key is in no record of the night either
    for path in night.run_dir.rglob("*"):
        if path.is_file():
            assert UPSTREAM_KEY.encode() not in path.read_bytes(), path
