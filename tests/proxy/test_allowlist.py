"""Unknown means refused: a field, a block or part type, a tool type, a header or an
``anthropic-beta`` value that is not on the proxy's allowlist is refused unforwarded, in the
provider's own error shape, with a message naming it. The names are generated, not listed:
whatever the provider adds next is refused until it is priced."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from overnight.proxy import allowlist
from overnight.proxy.allowlist import Unforwardable, bound
from overnight.testing.upstream import text
from tests.proxy.stack import TOKEN, Stack, stack

KNOWN = (
    allowlist.ANTHROPIC_FIELDS
    | allowlist.CHAT_FIELDS
    | allowlist.RESPONSES_FIELDS
    | set(allowlist.ANTHROPIC_BLOCKS)
    | set(allowlist.CHAT_PARTS)
    | set(allowlist.RESPONSES_PARTS)
    | set(allowlist.RESPONSES_ITEMS)
    | allowlist.HEADERS
    | allowlist.BETAS
    | {"custom", "function", "namespace", "local_shell", "shell", "apply_patch", "message"}
)
names = (
    st.from_regex(r"\A[a-z][a-z0-9_]{2,24}\Z")
    .filter(lambda n: n not in KNOWN)
    .filter(lambda n: not n.startswith(("bash_", "text_editor_", "computer_", "memory_")))
    .filter(lambda n: not n.startswith(("web_search", "web_fetch", "x_stainless")))
)

ANTHROPIC = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    "tools": [{"name": "Edit", "description": "edit", "input_schema": {"type": "object"}}],
}
CHAT = {
    "model": "gpt-5",
    "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
}
RESPONSES = {
    "model": "gpt-5",
    "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
    "tools": [{"type": "function", "name": "f", "parameters": {}}],
}
PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions"}
PATHS["openai-responses"] = "/v1/responses"
BODIES = {"anthropic": ANTHROPIC, "openai-chat": CHAT, "openai-responses": RESPONSES}


def top_level(body: dict[str, Any], name: str) -> None:
    body[name] = True


def block_type(body: dict[str, Any], name: str) -> None:
    messages = body.get("messages") or body.get("input")
    messages[0]["content"][0]["type"] = name


def block_field(body: dict[str, Any], name: str) -> None:
    messages = body.get("messages") or body.get("input")
    messages[0]["content"][0][name] = 1


def tool_type(body: dict[str, Any], name: str) -> None:
    body["tools"][0]["type"] = name


PLACES: dict[str, Callable[[dict[str, Any], str], None]] = {
    "field": top_level,
    "block type": block_type,
    "block field": block_field,
    "tool type": tool_type,
}


@pytest.fixture(scope="module")
def served() -> Iterator[Stack]:
    with stack(lambda _request: text("answered")) as s:
        yield s


def send(s: Stack, api: str, body: dict[str, Any], headers: dict[str, str]) -> httpx2.Response:
    auth = {"x-api-key": TOKEN} if api == "anthropic" else {"authorization": f"Bearer {TOKEN}"}
    return httpx2.post(
        f"{s.proxy.url}{PATHS[api]}",
        content=json.dumps(body).encode(),
        headers={**auth, "content-type": "application/json", **headers},
        timeout=10,
    )


def assert_refused(s: Stack, response: httpx2.Response, api: str, name: str, before: int) -> None:
    assert response.status_code == (400 if api == "anthropic" else 429)
    assert response.headers["x-should-retry"] == "false"
    data = response.json()
    message = data["error"]["message"]
    assert name in message and "is not forwarded" in message
    if api == "anthropic":
        assert data["type"] == "error" and data["error"]["type"] == "invalid_request_error"
    else:
        assert data["error"]["code"] == "insufficient_quota"
    assert len(s.upstream.requests) == before  # nothing reached the provider
    assert s.meter.unforwarded[-1] == message.split(": ", 1)[-1] or name in s.meter.unforwarded[-1]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    api=st.sampled_from(sorted(BODIES)),
    place=st.sampled_from(sorted(PLACES)),
    name=names,
)
def test_an_unknown_name_anywhere_is_refused_unforwarded_naming_it(
    served: Stack, api: str, place: str, name: str
) -> None:
    body = copy.deepcopy(BODIES[api])
    PLACES[place](body, name)
    before = len(served.upstream.requests)
    assert_refused(served, send(served, api, body, {}), api, name, before)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=names, as_header=st.booleans())
def test_an_unknown_header_or_beta_value_is_refused(
    served: Stack, name: str, as_header: bool
) -> None:
    headers = {f"x-{name}".replace("_", "-"): "1"} if as_header else {"anthropic-beta": name}
    named = next(iter(headers)) if as_header else name
    before = len(served.upstream.requests)
    response = send(served, "anthropic", copy.deepcopy(ANTHROPIC), headers)
    assert_refused(served, response, "anthropic", named, before)


def test_what_is_on_the_list_is_forwarded(served: Stack) -> None:
    for api, body in BODIES.items():
        before = len(served.upstream.requests)
        response = send(
            served, api, copy.deepcopy(body), {"anthropic-beta": "claude-code-20250219"}
        )
        assert response.status_code == 200, response.text
        assert len(served.upstream.requests) == before + 1


#: What Claude Code 2.1 and Codex 0.171 send (read from their requests): on the list.
CLAUDE_CODE = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 32000,
    "stream": True,
    "metadata": {"user_id": "{}"},
    "system": [
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}
    ],
    "thinking": {"type": "enabled", "budget_tokens": 31999, "display": "updates"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "tools": [{"name": "Read", "description": "read", "input_schema": {"type": "object"}}],
    "messages": [
        {
            "role": "user",
            "content": [{"type": "text", "text": "fix", "cache_control": {"type": "ephemeral"}}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
    ],
}
CODEX = {
    "model": "gpt-5",
    "instructions": "You are Codex.",
    "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "d"}]},
        {"role": "user", "content": [{"type": "input_text", "text": "fix"}]},
    ],
    "tools": [
        {
            "type": "function",
            "name": "exec_command",
            "description": "run",
            "strict": False,
            "parameters": {},
        },
        {
            "type": "namespace",
            "name": "multi_agent_v1",
            "description": "agents",
            "tools": [
                {"type": "function", "name": "close_agent", "description": "c", "parameters": {}},
            ],
        },
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "reasoning": {"summary": "auto"},
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "k",
    "client_metadata": {"a": "b"},
    "max_output_tokens": 32000,
}
BETAS = "claude-code-20250219,context-management-2025-06-27,interleaved-thinking-2025-05-14," + (
    "thinking-display-updates-2026-08-18,thinking-token-count-2026-05-13"
)


def test_the_pinned_clis_ordinary_requests_are_on_the_list() -> None:
    headers = [("anthropic-beta", BETAS), ("anthropic-version", "2023-06-01"), ("x-app", "cli")]
    needs = bound("anthropic", copy.deepcopy(CLAUDE_CODE), 3000, headers)
    assert needs.uses() == 0 and needs.multipliers == []
    codex_headers = [("originator", "codex_exec"), ("session-id", "s"), ("x-codex-window-id", "w")]
    body = copy.deepcopy(CODEX)
    needs = bound("openai-responses", body, 3000, codex_headers)
    assert body["store"] is False and body["service_tier"] == "default"


def test_a_server_tool_asked_for_more_uses_is_capped_and_its_passes_bounded() -> None:
    body = copy.deepcopy(ANTHROPIC)
    body["tools"] = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 99}]
    needs = bound("anthropic", body, 500)
    assert body["tools"][0]["max_uses"] == allowlist.MAX_SERVER_TOOL_USES
    uses = allowlist.MAX_SERVER_TOOL_USES
    assert needs.server_uses == {"web_search": uses} and needs.open_web
    # every pass of the provider's loop reads the request and every result before it
    assert needs.input_bound() == (uses + 1) * (
        needs.input_tokens + uses * allowlist.SERVER_TOOL_RESULT_TOKENS
    )


def test_an_image_that_cannot_be_read_is_refused() -> None:
    body = copy.deepcopy(ANTHROPIC)
    body["messages"][0]["content"] = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    ]
    with pytest.raises(Unforwardable, match="size cannot be read"):
        bound("anthropic", body, 500)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=names)
def test_an_unknown_query_parameter_is_refused(served: Stack, name: str) -> None:
    before = len(served.upstream.requests)
    response = httpx2.post(
        f"{served.proxy.url}/v1/messages?beta=true&{name}=1",
        content=json.dumps(ANTHROPIC).encode(),
        headers={"x-api-key": TOKEN, "content-type": "application/json"},
        timeout=10,
    )
    assert_refused(served, response, "anthropic", name, before)
