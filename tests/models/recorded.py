"""From a recorded request to our (Anthropic-shaped) ``ModelRequest``, and back to comparable
facts: the request our adapter sends must say what the recorded one said."""

from __future__ import annotations

import json
from typing import Any

from overnight.messages.types import ModelRequest, ToolSpec

DEFAULT_MAX_TOKENS = 1024


def _tool_specs_anthropic(tools: list[dict[str, Any]]) -> list[ToolSpec]:
    # Server tools (web search, tool search) have no input_schema: they are not ours to send.
    return [
        ToolSpec(
            name=t["name"],
            description=t.get("description", ""),
            input_schema=t["input_schema"],
            cache_control=t.get("cache_control"),
        )
        for t in tools
        if "input_schema" in t
    ]


def anthropic_request(recorded: dict[str, Any]) -> ModelRequest:
    messages = recorded.get("messages", [])
    if any(not isinstance(m, dict) for m in messages):
        # anthropic_completion_error.yaml sent bare strings on purpose to provoke its 400.
        messages = [{"role": "user", "content": str(m)} for m in messages]
    effort = (recorded.get("output_config") or {}).get("effort")
    return ModelRequest(
        model=recorded["model"],
        purpose="execute",
        system=recorded.get("system") or "",
        messages=messages,
        tools=_tool_specs_anthropic(recorded.get("tools", [])),
        max_tokens=recorded["max_tokens"],
        effort=effort,
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def chat_request(recorded: dict[str, Any]) -> ModelRequest:
    system = ""
    messages: list[dict[str, Any]] = []
    for m in recorded["messages"]:
        role = m["role"]
        if role in ("system", "developer") and not messages:
            system = _text_of(m["content"])
        elif role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": _text_of(m["content"]),
            }
            messages.append({"role": "user", "content": [block]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if _text_of(m.get("content")):
                blocks.append({"type": "text", "text": _text_of(m["content"])})
            for call in m.get("tool_calls") or []:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "input": json.loads(call["function"]["arguments"]),
                    }
                )
            messages.append({"role": "assistant", "content": blocks})
        else:
            messages.append({"role": role, "content": _text_of(m["content"])})
    tools = [
        ToolSpec(
            name=t["function"]["name"],
            description=t["function"].get("description", ""),
            input_schema=t["function"]["parameters"],
        )
        for t in recorded.get("tools", [])
    ]
    limit = recorded.get("max_completion_tokens") or recorded.get("max_tokens")
    return ModelRequest(
        model=recorded["model"],
        purpose="execute",
        system=system,
        messages=messages,
        tools=tools,
        max_tokens=limit or DEFAULT_MAX_TOKENS,
        effort=recorded.get("reasoning_effort"),
    )


def responses_request(recorded: dict[str, Any]) -> ModelRequest:
    items = recorded.get("input", [])
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    messages: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": item["role"], "content": _text_of(item["content"])})
        elif kind == "function_call":
            block = {
                "type": "tool_use",
                "id": item["call_id"],
                "name": item["name"],
                "input": json.loads(item["arguments"]),
            }
            messages.append({"role": "assistant", "content": [block]})
        elif kind == "function_call_output":
            block = {
                "type": "tool_result",
                "tool_use_id": item["call_id"],
                "content": item["output"],
            }
            messages.append({"role": "user", "content": [block]})
        # reasoning items are not carried by our messages (encrypted, provider-side state)
    tools = [
        ToolSpec(name=t["name"], description=t.get("description", ""), input_schema=t["parameters"])
        for t in recorded.get("tools", [])
        if t.get("type") == "function"
    ]
    return ModelRequest(
        model=recorded["model"],
        purpose="execute",
        system=recorded.get("instructions") or "",
        messages=messages,
        tools=tools,
        max_tokens=recorded.get("max_output_tokens") or DEFAULT_MAX_TOKENS,
        effort=(recorded.get("reasoning") or {}).get("effort"),
    )


def chat_facts(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Role, text, tool calls and tool-call ids of chat messages, empty turns left out."""
    out: list[tuple[Any, ...]] = []
    for m in messages:
        calls = tuple(
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in m.get("tool_calls") or []
        )
        text = _text_of(m.get("content"))
        if m["role"] == "assistant" and not text and not calls:
            continue
        out.append((m["role"], text, calls, m.get("tool_call_id")))
    return out


def responses_facts(items: Any) -> list[tuple[Any, ...]]:
    """The conversation in Responses ``input`` items, reasoning items left out."""
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    out: list[tuple[Any, ...]] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            out.append(("message", item["role"], _text_of(item["content"])))
        elif kind == "function_call":
            out.append(("call", item["call_id"], item["name"], json.loads(item["arguments"])))
        elif kind == "function_call_output":
            out.append(("output", item["call_id"], item["output"]))
    return out


def sse_events(body: bytes) -> list[dict[str, Any]]:
    """The JSON ``data:`` payloads of an SSE body, in order."""
    out = []
    for line in body.decode("utf-8").splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data and data != "[DONE]":
                out.append(json.loads(data))
    return out


def recorded_text(api: str, body: bytes, sse: bool) -> str:
    """The text a recorded response carries, read straight from the wire format (an oracle
    independent of the adapters)."""
    if api == "anthropic":
        if sse:
            return "".join(
                e["delta"]["text"]
                for e in sse_events(body)
                if e.get("type") == "content_block_delta" and e["delta"].get("type") == "text_delta"
            )
        return "".join(b["text"] for b in json.loads(body)["content"] if b["type"] == "text")
    if api == "chat":
        if sse:
            return "".join(
                c["delta"].get("content") or ""
                for e in sse_events(body)
                for c in e.get("choices", [])
                if c.get("index", 0) == 0
            )
        return json.loads(body)["choices"][0]["message"].get("content") or ""
    if sse:
        return "".join(
            e["delta"] for e in sse_events(body) if e.get("type") == "response.output_text.delta"
        )
    return "".join(
        part["text"]
        for item in json.loads(body)["output"]
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )
