"""One usage record from every response shape the providers return.

Every adapter reads the provider's usage object here and nowhere else, and hands the ledger a
``Usage`` (``overnight.core.budget``) whose five fields are priced at five rates:

``Usage.input``
    Uncached input tokens, billed at the plain input rate.

    - Anthropic: ``input_tokens`` (Anthropic already excludes cache reads and writes from it).
    - OpenAI chat completions: ``prompt_tokens - cached_tokens - cache_write_tokens`` (both in
      ``prompt_tokens_details``), because ``prompt_tokens`` counts every input token.
    - OpenAI Responses: ``input_tokens - cached_tokens - cache_write_tokens`` (both in
      ``input_tokens_details``), for the same reason.
``Usage.cache_read``
    Input tokens served from the provider's prompt cache, billed at the cache-read rate:
    Anthropic ``cache_read_input_tokens``; OpenAI ``cached_tokens``.
``Usage.cache_write_5m``
    Input tokens written to a 5-minute cache entry. Anthropic: ``cache_creation.
    ephemeral_5m_input_tokens`` when the breakdown is present, else all of
    ``cache_creation_input_tokens`` (older responses have no breakdown, and 5 minutes is the
    API's default TTL). OpenAI ``cache_write_tokens`` land here too: OpenAI publishes a single
    cache-write rate per model (whatever retention was asked for), and ``price_for`` puts that
    rate in ``Price.cache_write_5m``, so "5-minute" means "the model's cache-write rate" there.
``Usage.cache_write_1h``
    Input tokens written to a 1-hour cache entry (Anthropic ``ephemeral_1h_input_tokens``).
    When the breakdown and ``cache_creation_input_tokens`` disagree, the larger figure is
    billed and the remainder goes to the 5-minute rate: a cap must not under-count.
``Usage.output``
    Output tokens, including reasoning / thinking tokens (Anthropic ``output_tokens``, whose
    ``output_tokens_details.thinking_tokens`` is a part of it; OpenAI ``completion_tokens`` /
    ``output_tokens``, whose ``reasoning_tokens`` is a part of it).

Special cases:

- Anthropic streaming: ``message_start`` carries the usage known when the stream opens and
  ``message_delta`` the cumulative totals at its end. Every count the delta carries wins; a
  count it omits (older deltas carry only ``output_tokens``) keeps its ``message_start`` value.
- Anthropic compaction (``usage.iterations``): the top-level figures describe only the last
  iteration, while the compaction's own tokens appear only inside ``iterations``; when the
  list is present and non-empty the bill is the sum of its entries.
- A bill that cannot be read has no figure at all (``UsageRecord.usage`` is None) and a
  ``warning`` saying why; the gateway then books the call's reservation, its worst case, and
  says so in ``result.json``. Never $0. That covers: no usage object, an empty one, one that
  names neither the input nor the output count (``inputTokens``, a foreign shape), and a count
  that is not a non-negative integer (a float, a negative number, a string; ``malformed`` is
  then set too). Optional fields that are absent (the cache counts) are zero.
- A response that stopped early (OpenAI ``status: incomplete``) yet reports all-zero usage has
  no figure either: the provider may still bill what it generated.

``reasoning`` and ``server_tool_requests`` are informational: they are already part of
``output`` or are not token-billed by the ledger (web search requests are priced per request).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from overnight.core.budget import Usage

NO_USAGE_WARNING = "the response carried no usage; its reservation (the worst case) was booked"
ZERO_INCOMPLETE_WARNING = (
    "the response is incomplete and reports zero usage, but the provider may bill the tokens "
    "it generated; its reservation (the worst case) was booked"
)


@dataclass(frozen=True)
class UsageRecord:
    """What one response says about its tokens: the billed ``usage`` and what explains it."""

    usage: Usage | None = None
    """The bill, or None when the response gives none that can be trusted (see ``warning``)."""
    reasoning: int = 0
    """Reasoning / thinking tokens, already counted in ``usage.output``."""
    server_tool_requests: int = 0
    """Server-side tool requests (web search, web fetch): not tokens, not in ``usage``."""
    warning: str | None = None
    """Set when the figures cannot be trusted to be what the provider bills."""
    malformed: bool = False
    """A count was present but was not a non-negative integer."""


class _Unreadable(ValueError):
    """A count that is not a non-negative integer."""


def count(raw: Mapping[str, object], key: str, where: str = "usage") -> int:
    """A non-negative integer count, or 0 when absent or null; anything else is a
    ``ValueError``."""
    value = raw.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Unreadable(f"{where}.{key} must be a non-negative integer, got {value!r:.40}")
    return value


def _mapping(raw: Mapping[str, object], key: str) -> Mapping[str, object]:
    value = raw.get(key)
    if isinstance(value, Mapping):
        return value
    return {}


def unreadable(reason: str) -> UsageRecord:
    """A record with no figure: the gateway books the reservation instead."""
    return UsageRecord(
        warning=f"unreadable usage ({reason}); its reservation (the worst case) was booked",
        malformed=True,
    )


def _no_object(raw: object) -> UsageRecord | None:
    """The record for a usage that is not an object with something in it; None if it is."""
    if raw is None or (isinstance(raw, Mapping) and not raw):
        return UsageRecord(warning=NO_USAGE_WARNING)
    if not isinstance(raw, Mapping):
        return unreadable(f"usage is a {type(raw).__name__}, not an object")
    return None


def _absent(raw: Mapping[str, object], needed: tuple[str, ...]) -> UsageRecord | None:
    """The record for a usage that lacks one of the ``needed`` counts; None if it has all."""
    absent = [k for k in needed if raw.get(k) is None]
    if not absent:
        return None
    keys = ", ".join(sorted(str(k) for k in raw)[:6])
    return UsageRecord(
        warning=(
            f"the usage names no {' or '.join(absent)} (it has: {keys}); its reservation "
            "(the worst case) was booked"
        )
    )


def _server_tool_requests(raw: Mapping[str, object]) -> int:
    used = _mapping(raw, "server_tool_use")
    return sum(count(used, k, "usage.server_tool_use") for k in used if k.endswith("_requests"))


def _anthropic_one(raw: Mapping[str, object]) -> Usage:
    created = count(raw, "cache_creation_input_tokens")
    split = raw.get("cache_creation")
    if isinstance(split, Mapping):
        w5 = count(split, "ephemeral_5m_input_tokens", "usage.cache_creation")
        w1h = count(split, "ephemeral_1h_input_tokens", "usage.cache_creation")
        w5 += max(0, created - w5 - w1h)
    else:
        w5, w1h = created, 0
    return Usage(
        input=count(raw, "input_tokens"),
        output=count(raw, "output_tokens"),
        cache_read=count(raw, "cache_read_input_tokens"),
        cache_write_5m=w5,
        cache_write_1h=w1h,
    )


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(
        input=a.input + b.input,
        output=a.output + b.output,
        cache_read=a.cache_read + b.cache_read,
        cache_write_5m=a.cache_write_5m + b.cache_write_5m,
        cache_write_1h=a.cache_write_1h + b.cache_write_1h,
    )


def from_anthropic(raw: object) -> UsageRecord:
    """An Anthropic Messages ``usage`` object (non-streaming, or already merged). It must name
    ``input_tokens`` and ``output_tokens``; the cache counts are optional."""
    problem = _no_object(raw)
    if problem is not None:
        return problem
    assert isinstance(raw, Mapping)
    try:
        iterations = raw.get("iterations")
        if isinstance(iterations, list) and iterations:
            billed = Usage()
            for item in iterations:
                if not isinstance(item, Mapping):
                    raise _Unreadable(f"usage.iterations holds a non-object: {item!r:.40}")
                billed = _add(billed, _anthropic_one(item))
        else:
            billed = _anthropic_one(raw)
        details = _mapping(raw, "output_tokens_details")
        reasoning = count(details, "thinking_tokens", "usage.output_tokens_details")
        server_tools = _server_tool_requests(raw)
    except ValueError as exc:
        return unreadable(str(exc))
    return _absent(raw, ("input_tokens", "output_tokens")) or UsageRecord(
        usage=billed, reasoning=reasoning, server_tool_requests=server_tools
    )


def merge_anthropic_stream(
    start: Mapping[str, object] | None, delta: Mapping[str, object] | None
) -> dict[str, object]:
    """The usage of a streamed message: ``message_start`` usage overwritten by every count the
    final ``message_delta`` carries (its counts are cumulative, not increments)."""
    merged: dict[str, object] = dict(start or {})
    for key, value in (delta or {}).items():
        if value is not None:
            merged[key] = value
    return merged


def from_anthropic_stream(
    start: Mapping[str, object] | None, delta: Mapping[str, object] | None
) -> UsageRecord:
    """A streamed Anthropic message: see ``merge_anthropic_stream``. A stream that ended
    without its final ``message_delta`` has no bill: what ``message_start`` said is only the
    beginning of it."""
    if delta is None:
        return UsageRecord(
            warning="the stream carried no final usage; its reservation (the worst case) was booked"
        )
    return from_anthropic(merge_anthropic_stream(start, delta))


def _openai(
    raw: object,
    *,
    input_key: str,
    input_details_key: str,
    output_key: str,
    output_details_key: str,
    incomplete: bool,
) -> UsageRecord:
    problem = _no_object(raw)
    if problem is not None:
        return problem
    assert isinstance(raw, Mapping)
    try:
        total_in = count(raw, input_key)
        in_details = _mapping(raw, input_details_key)
        cached = count(in_details, "cached_tokens", f"usage.{input_details_key}")
        written = count(in_details, "cache_write_tokens", f"usage.{input_details_key}")
        out = count(raw, output_key)
        reasoning = count(
            _mapping(raw, output_details_key), "reasoning_tokens", f"usage.{output_details_key}"
        )
    except ValueError as exc:
        return unreadable(str(exc))
    absent = _absent(raw, (input_key, output_key))
    if absent is not None:
        return absent
    if incomplete and total_in == 0 and out == 0:
        return UsageRecord(warning=ZERO_INCOMPLETE_WARNING)
    warning = None
    if cached + written > total_in:
        # The parts exceed the whole: bill the parts, never less than reported.
        warning = f"usage: cached + cache-write tokens exceed {input_key}"
    return UsageRecord(
        usage=Usage(
            input=max(0, total_in - cached - written),
            output=out,
            cache_read=cached,
            cache_write_5m=written,
        ),
        reasoning=reasoning,
        warning=warning,
    )


def from_openai_chat(raw: object, *, incomplete: bool = False) -> UsageRecord:
    """An OpenAI chat-completions ``usage`` object (``prompt_tokens`` counts cached input)."""
    return _openai(
        raw,
        input_key="prompt_tokens",
        input_details_key="prompt_tokens_details",
        output_key="completion_tokens",
        output_details_key="completion_tokens_details",
        incomplete=incomplete,
    )


def from_openai_responses(raw: object, *, incomplete: bool = False) -> UsageRecord:
    """An OpenAI Responses ``usage`` object (``input_tokens`` counts cached input)."""
    return _openai(
        raw,
        input_key="input_tokens",
        input_details_key="input_tokens_details",
        output_key="output_tokens",
        output_details_key="output_tokens_details",
        incomplete=incomplete,
    )
