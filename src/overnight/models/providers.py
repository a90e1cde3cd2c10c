"""The providers behind the model seam, and ``build_client``, which picks one from the spec.

- ``python``: a callable or client named by ``target`` (``overnight.models.seam``);
- ``script``: answers read from the file ``script`` names (``overnight.models.script_provider``);
- ``anthropic``: the Messages API (``overnight.models.anthropic_provider``);
- ``openai``: the Responses API by default, chat completions with ``api = "chat"``;
- ``openai-compatible``: chat completions (by default) against ``base_url`` (vLLM, Ollama,
  llama.cpp and other servers speaking the OpenAI protocol)
  (both in ``overnight.models.openai_provider``).

The SDK-backed providers are wrapped in ``RetryingClient``: SDK errors become
``ProviderError`` at the adapter (``overnight.models.provider_errors``) and the retry policy
turns what it cannot retry away into ``ModelCallFailed`` or ``DependencyUnavailable``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from overnight.config.spec import PROVIDERS, ModelSpec
from overnight.core.errors import ConfigError
from overnight.models.provider_errors import ProviderError, parse_retry_after, translate
from overnight.models.retry import OutageWatch, RetryingClient, sleep_for_clock
from overnight.models.script_provider import ScriptModel
from overnight.models.seam import python_model
from overnight.seams import ModelClient

if TYPE_CHECKING:
    from overnight.models.anthropic_provider import AnthropicClient
    from overnight.models.openai_provider import Api, OpenAIClient

#: The API each OpenAI-protocol provider uses when the spec does not say.
DEFAULT_API: dict[str, Api] = {"openai": "responses", "openai-compatible": "chat"}

#: Backoff of the retry policy: the first wait is about a second, no wait is over a minute
#: (unless the provider's ``retry-after`` asks for more).
BASE_DELAY_S = 1.0
MAX_DELAY_S = 60.0

__all__ = [
    "DEFAULT_API",
    "ProviderError",
    "RetryingClient",
    "build_client",
    "key_variables",
    "parse_retry_after",
    "sdk_client",
    "sleep_for_clock",
    "translate",
]


def sdk_client(spec: ModelSpec) -> AnthropicClient | OpenAIClient:
    """The adapter for an SDK-backed provider, without the retry policy. (The SDKs are
    imported here, not with this module: they take a second to import.)"""
    import anthropic
    import openai

    from overnight.models.anthropic_provider import AnthropicClient
    from overnight.models.openai_provider import OpenAIClient

    if spec.provider == "anthropic" and not (
        os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
    ):
        # The SDK builds a client without a key and fails on the first call: the night would
        # exist (a branch, a worktree) before it could find out.
        raise ConfigError(
            "model.provider",
            "ANTHROPIC_API_KEY is not set, so no call to Anthropic can be made",
            "set ANTHROPIC_API_KEY in the environment (export ANTHROPIC_API_KEY=sk-ant-...)",
        )
    try:
        if spec.provider == "anthropic":
            return AnthropicClient(
                base_url=spec.base_url, stream=spec.stream, timeout_s=spec.timeout_s
            )
        if spec.provider in DEFAULT_API:
            return OpenAIClient(
                api=spec.api or DEFAULT_API[spec.provider],
                base_url=spec.base_url,
                stream=spec.stream,
                timeout_s=spec.timeout_s,
                compatible=spec.provider == "openai-compatible",
            )
    except (anthropic.AnthropicError, openai.OpenAIError) as exc:
        raise ConfigError(
            "model.provider",
            f"the {spec.provider} client cannot be set up: {exc}",
            "set the provider's API key in the environment (e.g. ANTHROPIC_API_KEY, "
            "OPENAI_API_KEY)",
        ) from None

    raise ConfigError(
        "model.provider",
        f"unknown provider {spec.provider!r}",
        f"use one of {', '.join(PROVIDERS)}",
    )


def key_variables(spec: ModelSpec) -> list[str]:
    """The environment variables the spec's provider takes its key from that are set (their
    names: a message may name them, never show them)."""
    if spec.provider == "anthropic":
        names = ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"]
    elif spec.provider in DEFAULT_API:
        names = ["OPENAI_API_KEY"]
    else:
        return []
    return [name for name in names if os.environ.get(name)]


def build_client(
    spec: ModelSpec,
    *,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    watch: OutageWatch | None = None,
    time_left: Callable[[], float] = lambda: float("inf"),
    call_guard: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> ModelClient:
    """The ``ModelClient`` the spec's ``[model]`` describes. ``sleep`` and ``monotonic`` are the
    harness's, so retry waits count against the night's clock."""
    if spec.provider == "python":
        if spec.target is None:
            raise ConfigError("model.target", "the python provider needs a target", "module:attr")
        return python_model(spec.target)
    if spec.provider == "script":
        return ScriptModel(spec.scripted_turns())
    return RetryingClient(
        sdk_client(spec),
        max_attempts=spec.max_attempts,
        base_delay_s=BASE_DELAY_S,
        max_delay_s=MAX_DELAY_S,
        outage_limit_s=spec.outage_limit_s,
        sleep=sleep,
        monotonic=monotonic,
        watch=watch,
        time_left=time_left,
        call_guard=call_guard,
    )
