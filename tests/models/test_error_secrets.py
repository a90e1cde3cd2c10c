"""A provider's error text reaches the trace, the report and the built-in agent's model: an
upstream (a gateway in front of the provider) that quotes the key it was sent, in any encoding,
leaves none of it in the error the harness keeps."""

from __future__ import annotations

import anthropic
import pytest

from overnight.models.provider_errors import ProviderError, translate
from overnight.testing.upstream import Fail, ScriptedUpstream

KEY = "sk-ant-api03-gateway-echo-5c0ffee1234"


@pytest.mark.parametrize(
    "quoted",
    [
        KEY,
        "".join(f"\\u{ord(c):04x}" for c in KEY),
        KEY.replace("-", "%2D"),
        KEY.replace("-", "&#45;"),
    ],
    ids=["plain", "json-escaped", "percent", "html"],
)
def test_an_error_that_quotes_the_key_keeps_none_of_it(
    quoted: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with ScriptedUpstream([Fail(401, f"invalid x-api-key: {quoted}")], key=KEY) as upstream:
        client = anthropic.Anthropic(base_url=upstream.url, api_key=KEY, max_retries=0)
        with pytest.raises(anthropic.APIError) as raised:
            client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=10,
                messages=[{"role": "user", "content": "hi"}],
            )
    error = translate(raised.value, "anthropic")
    assert isinstance(error, ProviderError) and error.status == 401
    for text in (error.message, str(error)):
        assert KEY not in text
        assert quoted not in text


def test_an_error_without_a_secret_is_kept_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    error = ProviderError("anthropic", "overloaded, try again", status=529, retryable=True)
    assert error.message == "overloaded, try again"
