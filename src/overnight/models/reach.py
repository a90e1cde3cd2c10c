"""Whether the spec's model can be reached, asked once before a night starts with a request
that costs nothing: Anthropic's token count (``messages.count_tokens``), OpenAI's model lookup
(``models.retrieve``), through an SDK client built as the night's is (``sdk_client``: the
spec's key and base URL), with a short timeout and no retry.

A host name that does not resolve, a refused connection or a failed TLS handshake, and an
answer of 401 or 403, end the night before anything is written (``ConfigError``). Any other
answer or none in time (a 404 from a server without the endpoint, 429, 5xx, a timeout) lets
the night go on, with a note of what it was: the night's own retries deal with a provider that
is only slow or busy.
"""

from __future__ import annotations

from overnight.config.spec import ModelSpec
from overnight.core.errors import ConfigError
from overnight.models.provider_errors import UNREACHABLE, ProviderError, translate
from overnight.models.providers import DEFAULT_API, key_variables, sdk_client

PROBE_TIMEOUT_S = 5.0
"""Seconds the check waits for each step (connect, send, answer)."""

REFUSED_KEY = frozenset({401, 403})


def check_reach(spec: ModelSpec, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the provider answered the check; a note when it answered otherwise or not in
    time; a ``ConfigError`` when it cannot be reached at its address or refuses the key."""
    if spec.provider != "anthropic" and spec.provider not in DEFAULT_API:
        return None
    from overnight.models.anthropic_provider import AnthropicClient  # with the SDK: slow

    client = sdk_client(spec)
    url = str(client.sdk.base_url)
    try:
        if isinstance(client, AnthropicClient):
            client.sdk.with_options(timeout=timeout_s, max_retries=0).messages.count_tokens(
                model=spec.name, messages=[{"role": "user", "content": "."}]
            )
        else:
            client.sdk.with_options(timeout=timeout_s, max_retries=0).models.retrieve(spec.name)
    except Exception as exc:
        err = translate(exc, spec.provider)
        if err is None:
            raise
        return _judged(err, spec, url)
    finally:
        client.sdk.close()
    return None


def _judged(err: ProviderError, spec: ModelSpec, url: str) -> str:
    if err.not_sent in UNREACHABLE:
        raise ConfigError(
            "model.base_url",
            f"the {spec.provider} API at {url} cannot be reached: {err.message}",
            "check [model] base_url (its host name, port and http/https)"
            + ("" if spec.base_url else f" or {_url_variable(spec)}")
            + ", and that this machine's network and DNS reach it",
        )
    if err.status in REFUSED_KEY:
        raise _refused_key(err, spec, url)
    what = f"HTTP {err.status}" if err.status is not None else "no answer"
    return (
        f"the check that the {spec.provider} API at {url} can be reached got {what} "
        f"({err.message[:200]}); the night goes on"
    )


def _refused_key(err: ProviderError, spec: ModelSpec, url: str) -> ConfigError:
    # The provider's words are left out: some repeat part of the key they refused.
    said = f"HTTP {err.status}" + (f" {err.error_type}" if err.error_type else "")
    names = key_variables(spec)
    if not names:
        return ConfigError(
            "model.provider",
            f"the {spec.provider} API at {url} asks for a key ({said}) and none was sent: "
            "OPENAI_API_KEY is not set",
            "set OPENAI_API_KEY in the environment to the key this server accepts",
        )
    held = " and ".join(names)
    return ConfigError(
        "model.provider",
        f"the {spec.provider} API at {url} refused the key in {held} ({said})",
        f"set {names[0]} to a valid key for this provider, one that may use {spec.name}"
        + ("" if spec.base_url is None else f" at {spec.base_url}"),
    )


def _url_variable(spec: ModelSpec) -> str:
    return "ANTHROPIC_BASE_URL" if spec.provider == "anthropic" else "OPENAI_BASE_URL"
