"""A scripted upstream, the proxy in front of it with the upstream's key as the harness's own,
and the official SDKs as the clients a CLI would be."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai

from overnight.proxy.metering import Api
from overnight.proxy.server import MeteringProxy, upstreams_from_env
from overnight.testing.meters import RecordingMeter
from overnight.testing.upstream import Script, ScriptedUpstream

KEY = "sk-real-secret-0123456789"
TOKEN = "ovn-one-time-token"
APIS: tuple[Api, ...] = ("anthropic", "openai-chat", "openai-responses")
MESSAGES = [{"role": "user", "content": "Fix the failing test in calc.py."}]


@dataclass
class Stack:
    upstream: ScriptedUpstream
    proxy: MeteringProxy
    meter: RecordingMeter


@contextmanager
def stack(
    script: Script,
    meter: RecordingMeter | None = None,
    *,
    env: dict[str, str] | None = None,
    socket_path: Path | None = None,
    tcp: bool = True,
) -> Iterator[Stack]:
    meter = meter or RecordingMeter()
    with ScriptedUpstream(script, key=KEY) as upstream:
        upstreams = upstreams_from_env(env if env is not None else upstream.env())
        proxy = MeteringProxy(upstreams, socket_path=socket_path, tcp_port=0 if tcp else None)
        with proxy:
            proxy.admit(TOKEN, meter)
            yield Stack(upstream, proxy, meter)


def anthropic_client(url: str, token: str = TOKEN, retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key=token, max_retries=retries)


def openai_client(url: str, token: str = TOKEN, retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=token, max_retries=retries)


def ask(
    api: Api, url: str, *, stream: bool, token: str = TOKEN, retries: int = 0, **extra: Any
) -> tuple[str, list[str]]:
    """One request through the official SDK of ``api``: the text and tool names it read."""
    if api == "anthropic":
        client = anthropic_client(url, token, retries)
        kwargs = {"model": "claude-sonnet-4-5", "max_tokens": 2048, "messages": MESSAGES}
        kwargs.update(extra)
        if stream:
            with client.messages.stream(**kwargs) as events:
                for _ in events:
                    pass
                message = events.get_final_message()
        else:
            message = client.messages.create(**kwargs)
        texts = [b.text for b in message.content if b.type == "text"]
        return "".join(texts), [b.name for b in message.content if b.type == "tool_use"]
    oa = openai_client(url, token, retries)
    if api == "openai-chat":
        kwargs = {"model": "gpt-5.5", "messages": MESSAGES, **extra}
        if stream:
            text, tools = "", []
            for chunk in oa.chat.completions.create(stream=True, **kwargs):
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    tools += [
                        c.function.name
                        for c in choice.delta.tool_calls or []
                        if c.function and c.function.name
                    ]
            return text, tools
        completion = oa.chat.completions.create(**kwargs)
        message = completion.choices[0].message
        return message.content or "", [c.function.name for c in message.tool_calls or []]
    kwargs = {"model": "gpt-5.5", "input": MESSAGES[0]["content"], **extra}
    if not stream:
        response = oa.responses.create(**kwargs)
        tools = [item.name for item in response.output if item.type == "function_call"]
        return response.output_text, tools
    text, tools = "", []
    for event in oa.responses.create(stream=True, **kwargs):
        if event.type == "response.output_text.delta":
            text += event.delta
        elif event.type == "response.output_item.added" and event.item.type == "function_call":
            tools.append(event.item.name)
    return text, tools
