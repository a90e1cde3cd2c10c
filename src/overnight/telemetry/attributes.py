"""Span attributes from the night's trace records, without the OpenTelemetry SDK.

What goes out by default is what says how the night went, never what was said: names, ids,
counts, tokens, costs, exit codes, outcomes. Free text (prompts, answers, tool arguments and
results, summaries, error messages, details) is added only when content is asked for, and it
comes from records the trace has already scrubbed of secret values.

Model calls follow the OpenTelemetry GenAI conventions: ``gen_ai.usage.input_tokens`` counts
every input token, cached ones included, with the cache reads and writes also given apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

#: An attribute value OpenTelemetry accepts.
Value = str | bool | int | float | list[str] | list[int] | list[float]
Attributes = dict[str, Value]

#: The longest text attribute exported (characters): a prompt can be a whole conversation.
MAX_TEXT = 16_000

#: Trace fields that are free text: exported only with content.
TEXT_FIELDS = frozenset(
    {"text", "summary", "error", "detail", "traceback", "refused", "warnings", "usage_warning"}
)


def clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more]"


def as_json(value: Any) -> str:
    return clip(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))


def error_type(text: str) -> str:
    """The kind of an error, not its message: ``RuntimeError('...')`` -> ``RuntimeError``."""
    match = re.match(r"\s*([A-Za-z_][\w.]*)", text)
    name = match.group(1) if match else ""
    return name if name and (name[0].isupper() or "." in name) else "error"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def model_call(record: Mapping[str, Any], provider: str, content: bool) -> Attributes:
    """A ``model_call`` record: request, usage, cost, outcome."""
    attrs: Attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": str(record.get("model", "")),
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,
        "overnight.purpose": str(record.get("purpose", "")),
        "overnight.call.attempt": _int(record.get("attempt")) or 1,
    }
    usage = record.get("usage")
    if isinstance(usage, Mapping):
        uncached = _int(usage.get("input"))
        read = _int(usage.get("cache_read"))
        write_5m, write_1h = _int(usage.get("cache_write_5m")), _int(usage.get("cache_write_1h"))
        attrs.update(
            {
                "gen_ai.usage.input_tokens": uncached + read + write_5m + write_1h,
                "gen_ai.usage.output_tokens": _int(usage.get("output")),
                "gen_ai.usage.cache_read.input_tokens": read,
                "gen_ai.usage.cache_creation.input_tokens": write_5m + write_1h,
                "overnight.usage.uncached_input_tokens": uncached,
                "overnight.usage.cache_write_5m_tokens": write_5m,
                "overnight.usage.cache_write_1h_tokens": write_1h,
            }
        )
    for field in ("cost_usd", "reserved_usd"):
        value = record.get(field)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attrs[f"overnight.{field}"] = float(value)
    if record.get("booked_at_worst_case") is not None:
        attrs["overnight.booked_at_worst_case"] = bool(record.get("booked_at_worst_case"))
    if record.get("released"):
        attrs["overnight.released"] = True
    stop_reason = record.get("stop_reason")
    if isinstance(stop_reason, str) and stop_reason:
        attrs["gen_ai.response.finish_reasons"] = [stop_reason]
    tools = record.get("tool_calls")
    if isinstance(tools, list) and tools:
        attrs["overnight.response.tool_calls"] = [str(t) for t in tools]
    if record.get("warnings"):
        attrs["overnight.warnings"] = sorted(
            {str(w.get("kind")) for w in record["warnings"] if isinstance(w, Mapping)}
        )
    if record.get("error"):
        attrs["error.type"] = error_type(str(record["error"]))
    if content:
        attrs.update(_texts(record))
        text = record.get("text")
        if isinstance(text, str) and text:
            message = {"role": "assistant", "parts": [{"type": "text", "content": text}]}
            if isinstance(stop_reason, str):
                message["finish_reason"] = stop_reason
            attrs["gen_ai.output.messages"] = as_json([message])
    return attrs


def tool_call(record: Mapping[str, Any], content: bool) -> Attributes:
    """A ``tool_call`` record: a tool the agent called, or a command, verify or predicate the
    harness ran."""
    tool = str(record.get("tool", ""))
    attrs: Attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "overnight.tool.by": "harness" if tool in HARNESS_TOOLS else "agent",
    }
    for field in ("exit_code", "met", "ran", "timed_out", "cut_at_time_limit", "sandboxed"):
        value = record.get(field)
        if isinstance(value, bool | int) and value is not None:
            attrs[f"overnight.{field}"] = value
    if isinstance(record.get("seconds"), int | float):
        attrs["overnight.seconds"] = float(record["seconds"])
    if record.get("error") is True:
        attrs["error.type"] = "tool_error"
    if record.get("refused"):
        attrs["error.type"] = "refused"
    if content:
        attrs.update(_texts(record))
    return attrs


#: Tool names of what the harness itself runs (the rest are the agent's tools).
HARNESS_TOOLS = frozenset({"command", "verify", "predicate", "executor"})


def record_event(record: Mapping[str, Any], content: bool) -> tuple[str, Attributes]:
    """A record that is no span of its own (a decision, a retry, a warning) as a span event:
    its kind and the fields that carry no text."""
    kind = str(record.get("kind", ""))
    name = f"{kind} {record['decision']}" if kind == "decision" else kind
    attrs: Attributes = {}

    def stop_reason(key: str) -> bool:  # a stop's reason is its ending's name
        return key == "reason" and record.get("decision") == "stop"

    for key, value in record.items():
        if key in ("kind", "t", "at", "crc"):
            continue
        if key in TEXT_FIELDS and not content:
            continue
        if isinstance(value, bool | int | float):
            attrs[f"overnight.{key}"] = value
        elif isinstance(value, str) and (content or key in SAFE_STRINGS or stop_reason(key)):
            attrs[f"overnight.{key}"] = clip(value)
        elif content and value is not None:
            attrs[f"overnight.{key}"] = as_json(value)
        elif isinstance(value, list) and key in SAFE_LISTS:
            attrs[f"overnight.{key}"] = [str(v) for v in value]
    if kind == "decision" and record.get("error") and not content:
        attrs["error.type"] = error_type(str(record["error"]))
    return name, attrs


#: String fields of decisions and warnings that are names, ids or enumerations, never text.
SAFE_STRINGS = frozenset(
    {"decision", "task", "outcome", "purpose", "budget", "model", "classified", "stop_reason"}
)
#: List fields that hold task ids.
SAFE_LISTS = frozenset({"tasks", "added"})


def _texts(record: Mapping[str, Any]) -> Attributes:
    out: Attributes = {}
    for key in sorted(TEXT_FIELDS & set(record)):
        value = record[key]
        if key == "text" or value is None or isinstance(value, bool):
            continue
        out[f"overnight.{key}"] = clip(value) if isinstance(value, str) else as_json(value)
    return out


def request_content(system: Any, messages: Any) -> Attributes:
    """A model request's prompt, as the GenAI conventions name it."""
    out: Attributes = {"gen_ai.input.messages": as_json(messages)}
    if system:
        out["gen_ai.system_instructions"] = as_json(system)
    return out


def tool_content(arguments: Any, result: Any) -> Attributes:
    return {
        "gen_ai.tool.call.arguments": as_json(arguments),
        "gen_ai.tool.call.result": clip(result) if isinstance(result, str) else as_json(result),
    }
