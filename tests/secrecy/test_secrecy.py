"""Finding the harness's secrets in text that may carry them encoded, whole or split over a
stream's events (``overnight.secrecy``)."""

from __future__ import annotations

import base64
import itertools
import json
import string

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from overnight.secrecy import MIN_PARTIAL, MIN_SECRET, SecretScan, StreamScan

KEY = "sk-ant-api03-Zq8xV2mN4pL7rT1yW6cB9dF3hJ5kS0gA-uE_oI"
OTHER_KEY = "sk-ant-api03-Pw3eR5tY7uI9oP1aS2dF4gH6jK8lZ0xC-vB_nM"
URL_SAFE = string.ascii_letters + string.digits + "-_"

WITHHELD = "[a message that carried a credential of the harness, withheld]"


def scan() -> SecretScan:
    return SecretScan([KEY])


def json_escape_all(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


# -- the secret as it is, and escaped ----------------------------------------------------------


def test_a_secret_written_as_it_is_is_found_in_str_and_bytes() -> None:
    assert scan().found(f"the upstream said: {KEY}, then more")
    assert scan().found(f"the upstream said: {KEY}".encode())


def test_a_secret_with_every_character_json_escaped_is_found() -> None:
    assert scan().found(f'{{"error": "{json_escape_all(KEY)}"}}')


def test_a_secret_with_only_its_dashes_json_escaped_is_found() -> None:
    assert scan().found(KEY.replace("-", "\\u002d"))


def test_a_secret_with_some_characters_json_escaped_in_upper_case_hex_is_found() -> None:
    escaped = "".join(f"\\u{ord(c):04X}" if i % 3 == 0 else c for i, c in enumerate(KEY))
    assert KEY not in escaped
    assert scan().found(escaped)


def test_a_secret_json_escaped_twice_is_found() -> None:
    assert scan().found(KEY.replace("-", "\\\\u002d"))
    assert scan().found("".join(f"\\\\u{ord(c):04x}" for c in KEY))


def test_a_secret_in_json_inside_json_is_found() -> None:
    # a JSON text whose string escapes the key, quoted as a string of another JSON text
    inner = '{"message": "' + json_escape_all(KEY) + '"}'
    assert scan().found(json.dumps({"error": inner}))


def test_a_percent_encoded_secret_is_found() -> None:
    assert scan().found(KEY.replace("-", "%2D"))
    assert scan().found(KEY.replace("-", "%2d"))
    assert scan().found("".join(f"%{b:02X}" for b in KEY.encode()))


def test_a_secret_written_as_html_entities_is_found() -> None:
    assert scan().found(KEY.replace("-", "&#45;"))
    assert scan().found("".join(f"&#{ord(c)};" for c in KEY))
    assert scan().found("".join(f"&#x{ord(c):x};" for c in KEY))


# -- the secret encoded --------------------------------------------------------------------------


@pytest.mark.parametrize("before", [b"", b"x", b"xy", b"xyz", b"wxyz"])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_a_base64_secret_inside_a_longer_blob_is_found_at_every_alignment(
    before: bytes, encode: object
) -> None:
    assert callable(encode)
    blob = encode(before + KEY.encode() + b"tail").decode()
    assert KEY not in blob
    assert scan().found(f"data: {blob} end")
    assert scan().found(encode(before + KEY.encode()))


@given(
    key=st.text(alphabet=URL_SAFE, min_size=12, max_size=80),
    before=st.binary(max_size=8),
    after=st.binary(max_size=8),
    urlsafe=st.booleans(),
)
def test_any_base64_blob_holding_a_secret_is_found(
    key: str, before: bytes, after: bytes, urlsafe: bool
) -> None:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    assert SecretScan([key]).found(encode(before + key.encode() + after))


def test_a_hex_secret_is_found_in_lower_and_upper_case() -> None:
    raw = b"\x00\x01" + KEY.encode() + b"\xff"
    assert scan().found(raw.hex())
    assert scan().found(raw.hex().upper())


def test_a_reversed_secret_is_found() -> None:
    assert scan().found(f"backwards: {KEY[::-1]}!")


# -- what is not a secret ------------------------------------------------------------------------


def test_ordinary_text_is_not_flagged() -> None:
    text = (
        "The build passed. Use an API key that starts with sk-ant-api03- from the console; "
        "see https://docs.example.com/a%20b?x=1&amp;y=2 and \\u0041."
    )
    assert not scan().found(text)
    assert not scan().found_in_json(json.dumps({"text": text}).encode())


def test_a_different_key_is_not_flagged() -> None:
    assert not scan().found(OTHER_KEY)
    assert not scan().found(base64.b64encode(OTHER_KEY.encode()))
    assert not scan().found(OTHER_KEY.encode().hex())


def test_the_secret_less_its_last_character_is_not_flagged() -> None:
    assert not scan().found(KEY[:-1])


def test_a_secret_shorter_than_min_secret_is_not_looked_for() -> None:
    short = "Ab3dE6g"[: MIN_SECRET - 1]
    assert len(short) == MIN_SECRET - 1
    short_scan = SecretScan([short])
    assert not short_scan
    assert not short_scan.found(f"here it is: {short}")


def test_a_secret_of_exactly_min_secret_characters_is_looked_for() -> None:
    exact = "Ab3dE6gH"[:MIN_SECRET]
    assert len(exact) == MIN_SECRET
    assert SecretScan([exact])
    assert SecretScan([exact]).found(f"here it is: {exact}")


@settings(max_examples=300)
@given(st.text())
def test_text_without_the_secret_is_not_flagged(text: str) -> None:
    assume(KEY not in text and KEY[::-1] not in text)
    assert not scan().found(text)


# -- JSON bodies ---------------------------------------------------------------------------------


def test_found_in_json_finds_a_secret_split_over_two_strings_of_a_list() -> None:
    body = json.dumps([KEY[:7], KEY[7:]]).encode()
    assert KEY not in body.decode()
    assert scan().found_in_json(body)


def test_found_in_json_finds_a_secret_split_over_two_values_of_an_object() -> None:
    body = json.dumps({"a": KEY[:7], "b": KEY[7:]}).encode()
    assert scan().found_in_json(body)


def test_found_in_json_finds_a_secret_split_over_two_content_blocks() -> None:
    body = json.dumps(
        {
            "type": "message",
            "content": [{"type": "text", "text": KEY[:20]}, {"type": "text", "text": KEY[20:]}],
        }
    ).encode()
    assert scan().found_in_json(body)


def test_found_in_json_finds_an_escaped_secret_in_a_body_that_is_not_json() -> None:
    assert scan().found_in_json(b"<html>" + json_escape_all(KEY).encode() + b"</html>")


def test_found_in_json_does_not_flag_an_ordinary_body() -> None:
    body = json.dumps({"content": [{"type": "text", "text": "all tests pass"}]}).encode()
    assert not scan().found_in_json(body)


# -- redaction -----------------------------------------------------------------------------------


def test_redact_replaces_each_literal_secret_and_keeps_the_rest() -> None:
    text = f"HTTP 401: invalid x-api-key {KEY} (and again: {KEY})"
    assert scan().redact(text) == "HTTP 401: invalid x-api-key [redacted] (and again: [redacted])"


def test_redact_uses_the_replacement_given() -> None:
    assert scan().redact(f"key={KEY}", replacement="***") == "key=***"


def test_redact_leaves_text_without_a_secret_as_it_is() -> None:
    assert scan().redact("HTTP 529: overloaded") == "HTTP 529: overloaded"


@pytest.mark.parametrize(
    "encoded",
    [
        KEY.replace("-", "\\u002d"),
        KEY.encode().hex(),
        base64.b64encode(KEY.encode()).decode(),
        KEY[::-1],
    ],
    ids=["json-escaped", "hex", "base64", "reversed"],
)
def test_redact_replaces_the_whole_text_when_an_encoded_secret_remains(encoded: str) -> None:
    out = scan().redact(f"literal {KEY} and encoded {encoded}")
    assert out == WITHHELD
    assert KEY not in out and encoded not in out


# -- streams -------------------------------------------------------------------------------------


def bare_event(text: str) -> tuple[bytes, object]:
    """An event whose data is a bare JSON string: all a client reads from it is ``text``."""
    return f"data: {json.dumps(text)}\n\n".encode(), text


def anthropic_event(text: str) -> tuple[bytes, object]:
    data = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": text},
    }
    return f"event: content_block_delta\ndata: {json.dumps(data)}\n\n".encode(), data


def openai_event(text: str) -> tuple[bytes, object]:
    data = {"choices": [{"index": 0, "delta": {"content": text}}]}
    return f"data: {json.dumps(data)}\n\n".encode(), data


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_a_stream_is_leaked_exactly_on_the_event_that_completes_the_secret() -> None:
    lead, tail = "Your key: ", " (keep it safe)"
    parts = pieces(lead + KEY + tail, 7)
    completing = (len(lead) + len(KEY) - 1) // 7
    stream = StreamScan(scan())
    for i, part in enumerate(parts):
        stream.add(*bare_event(part))
        assert stream.leaked is (i >= completing), (i, part)


def test_a_stream_stays_leaked_after_later_events() -> None:
    stream = StreamScan(scan())
    stream.add(*bare_event(KEY))
    stream.add(*bare_event("nothing to see"))
    assert stream.leaked


def test_a_secret_in_one_event_is_leaked_from_its_raw_bytes_alone() -> None:
    stream = StreamScan(scan())
    stream.add(f'data: {{"text": "{json_escape_all(KEY)}"}}\n\n'.encode(), None)
    assert stream.leaked


@pytest.mark.parametrize("event", [anthropic_event, openai_event], ids=["anthropic", "openai"])
def test_a_secret_split_over_provider_text_deltas_is_leaked_on_the_last_piece(
    event: object,
) -> None:
    assert callable(event)
    stream = StreamScan(scan())
    parts = pieces(KEY, 7)
    for part in parts:
        stream.add(*event(part))
    assert stream.leaked


def test_holding_after_text_that_ends_with_the_start_of_the_secret() -> None:
    stream = StreamScan(scan())
    stream.add(*bare_event("Here is the key: "))
    assert not stream.holding()
    stream.add(*bare_event(KEY[:MIN_PARTIAL]))
    assert stream.holding()
    assert not stream.leaked


def test_holding_a_start_longer_than_min_partial_split_over_events() -> None:
    stream = StreamScan(scan())
    for part in pieces(KEY[:30], 7):
        stream.add(*bare_event(part))
    assert stream.holding()
    assert not stream.leaked


def test_not_holding_a_start_shorter_than_min_partial() -> None:
    stream = StreamScan(scan())
    stream.add(*bare_event("Here is the key: " + KEY[: MIN_PARTIAL - 1]))
    assert not stream.holding()


def test_not_holding_once_the_text_goes_on_past_a_false_start() -> None:
    stream = StreamScan(scan())
    stream.add(*bare_event("the prefix " + KEY[:MIN_PARTIAL]))
    assert stream.holding()
    stream.add(*bare_event(" is all keys share."))
    assert not stream.holding()
    assert not stream.leaked


def test_not_holding_ordinary_text() -> None:
    stream = StreamScan(scan())
    for part in pieces("The tests pass and the branch is ready for review.", 7):
        stream.add(*bare_event(part))
        assert not stream.holding()
    assert not stream.leaked


def test_a_stream_scan_without_secrets_never_leaks_nor_holds() -> None:
    stream = StreamScan(SecretScan([]))
    stream.add(*bare_event(KEY))
    assert not stream.leaked
    assert not stream.holding()


@st.composite
def key_and_cuts(draw: st.DrawFn) -> tuple[str, list[int]]:
    key = draw(st.text(alphabet=URL_SAFE, min_size=12, max_size=60))
    cuts = draw(st.lists(st.integers(1, len(key) - 1), unique=True, max_size=len(key) - 1))
    return key, sorted(cuts)


@settings(max_examples=300)
@given(key_and_cuts())
def test_a_key_split_anywhere_is_leaked_on_its_last_piece_and_never_before(
    case: tuple[str, list[int]],
) -> None:
    key, cuts = case
    bounds = [0, *cuts, len(key)]
    parts = [key[a:b] for a, b in itertools.pairwise(bounds)]
    stream = StreamScan(SecretScan([key]))
    stream.add(*bare_event("answer: "))
    assert not stream.leaked
    for i, part in enumerate(parts):
        stream.add(*bare_event(part))
        last = i == len(parts) - 1
        assert stream.leaked is last, (i, parts)
        if not last:  # the text ends with the key's first bounds[i + 1] characters
            assert stream.holding() is (bounds[i + 1] >= MIN_PARTIAL), (i, parts)


@settings(max_examples=300)
@given(st.lists(st.text(max_size=20), max_size=20))
def test_a_stream_without_the_key_is_never_flagged(parts: list[str]) -> None:
    assume(KEY not in "".join(parts) and KEY[::-1] not in "".join(parts))
    stream = StreamScan(scan())
    for part in parts:
        stream.add(*bare_event(part))
        assert not stream.leaked
