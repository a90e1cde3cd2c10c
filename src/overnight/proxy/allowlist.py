"""What the metering proxy forwards: the fields, content blocks, tools, headers and beta values
of each API whose cost it can bound before the request is sent, and the bound itself.

The rule is an allowlist. A request written by code a model drives may ask for anything the
provider's API offers, and the API grows every month; a list of what to refuse is always one
feature behind. So every name is looked up here, and a name that is not here (a top-level
field, a block or tool type, a block's own field, a header, an ``anthropic-beta`` value) is
refused unforwarded, the refusal naming it. A name is here only with a rule that bounds it:

- text is bounded by its bytes (no tokenizer makes more tokens than bytes), so a body's byte
  count bounds the text it carries;
- an inline image or PDF is bounded by its own rule (``overnight.proxy.media``): its bytes
  are taken out of the byte count and the image's pixels, or the PDF's pages, put in;
- a server tool (the provider's web search or fetch) is bounded by its uses, which the proxy
  caps (``max_uses``, ``max_tool_calls``), its fee per use, which only the spec can price, and
  what each use adds to the input of the loop the provider runs;
- a multiplier (fast mode, a service tier, regional inference) only at a factor the spec
  prices; the service tier is pinned to the standard one when the request leaves it open;
- anything whose cost depends on what the provider holds or fetches (a URL source, a file id,
  a stored response or conversation continued by id, a stored prompt, a container, a
  background job, an MCP server) cannot be bounded, and is refused with that reason.

A request that has the provider reach a host (web search or fetch) carries the domains it is
limited to in ``Needs.domains``; the night's side forwards it only when the spec's sandbox
allows them. Nothing here does I/O; the body is read and, for the caps and pins above,
rewritten in place.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from overnight.proxy import media
from overnight.proxy.metering import Api

#: The most uses of one server tool a request may make: set when absent, lowered when higher.
MAX_SERVER_TOOL_USES = 3
#: What one use of a server tool is assumed to add to the input of the provider's loop, in
#: tokens: web fetch's own ``max_content_tokens`` is lowered to it; a search's results are
#: bounded by the provider to a few thousand tokens a use.
SERVER_TOOL_RESULT_TOKENS = 20_000
#: Input the provider adds for a request that offers tools (its tool-use system prompt).
TOOLS_PROMPT_TOKENS = 1_000
#: Input the provider adds for each of its own client tools (bash, text editor, computer).
BUILTIN_TOOL_TOKENS = 1_500
#: The most an inline image or PDF may weigh once decoded.
MAX_MEDIA_BYTES = 32 * 1024 * 1024


class Unforwardable(ValueError):
    """A request the proxy will not forward: ``message`` names what and why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class Needs:
    """What a request can cost besides its output, read before it is forwarded."""

    input_tokens: int = 0
    """An upper bound on the input of one pass of the model over the request."""
    server_uses: dict[str, int] = field(default_factory=dict)
    """The most uses of each server tool (``web_search``, ``web_fetch``) the request allows."""
    multipliers: list[str] = field(default_factory=list)
    """The ``field=value`` multipliers the request asks for."""
    domains: list[str] = field(default_factory=list)
    """The domains a server tool is limited to (the hosts the provider will reach)."""
    open_web: bool = False
    """A server tool that is limited to no domain: it may reach any host."""
    long_context: bool = False
    """The request asks for a context past the model's standard window (priced by tier)."""
    media_bytes: int = 0
    """Bytes of inline media in the body, counted by their own rule instead."""
    cache_writes: bool = False
    """It asks the provider to write its prompt to a cache (billed at the cache-write rate):
    an OpenAI request with ``prompt_cache_options``; Anthropic's are held so always."""

    def uses(self) -> int:
        return sum(self.server_uses.values())

    def input_bound(self) -> int:
        """The input of every pass the provider may make: with server tools it samples once
        more after each use, each pass reading what the uses before it returned."""
        uses = self.uses()
        if uses == 0:
            return self.input_tokens
        return (uses + 1) * (self.input_tokens + uses * SERVER_TOOL_RESULT_TOKENS)


def _refuse(what: str, why: str = "the proxy cannot bound its cost before sending it") -> NoReturn:
    raise Unforwardable(f"overnight: {what} is not forwarded: {why}")


_NOT_BOUNDED = "its cost depends on what the provider holds or fetches, unknown before it is sent"
_UNKNOWN = "it is not on the proxy's list of what it can bound"


def _keys(where: str, obj: Mapping[str, Any], allowed: Iterable[str]) -> None:
    known = set(allowed)
    for key in obj:
        if key not in known:
            _refuse(f"{where} field {key!r}", _UNKNOWN)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _dicts(value: object) -> list[Mapping[str, Any]]:
    return [v for v in _list(value) if isinstance(v, Mapping)]


# --- headers ---------------------------------------------------------------------------------

#: Headers forwarded as they are (lower case); ``x-stainless-*`` (the SDKs' own) too. The
#: client's credentials, hop-by-hop and framing headers are dropped by the relay first.
HEADERS = frozenset(
    {
        "accept",
        "accept-language",
        "content-type",
        "user-agent",
        "anthropic-version",
        "anthropic-beta",
        "anthropic-dangerous-direct-browser-access",
        "x-app",
        "x-claude-code-session-id",
        "x-client-request-id",
        "x-request-id",
        "idempotency-key",
        "originator",
        "session-id",
        "session_id",
        "thread-id",
        "conversation-id",
        "x-codex-window-id",
        "x-codex-turn-metadata",
        "x-codex-beta-features",
        "openai-version",
        "version",
    }
)
_HEADER_PREFIXES = ("x-stainless-",)

#: ``anthropic-beta`` values the proxy knows: each only changes what the request may hold
#: (and is bounded by the body's own rules) or what the answer shows.
BETAS = frozenset(
    {
        "claude-code-20250219",
        "interleaved-thinking-2025-05-14",
        "fine-grained-tool-streaming-2025-05-14",
        "token-efficient-tools-2025-02-19",
        "prompt-caching-2024-07-31",
        "extended-cache-ttl-2025-04-11",
        "context-management-2025-06-27",
        "output-128k-2025-02-19",
        "computer-use-2024-10-22",
        "computer-use-2025-01-24",
        "computer-use-2025-11-24",
        "web-search-2025-03-05",
        "web-fetch-2025-09-10",
        "search-results-2025-06-09",
        "effort-2025-11-24",
        "structured-outputs-2025-11-13",
        "model-context-window-exceeded-2025-08-26",
        "thinking-display-updates-2026-08-18",
        "thinking-token-count-2026-05-13",
        "oauth-2025-04-20",
    }
)
#: Beta values that only let the body ask for a dearer way of serving (``speed``), which is
#: priced by the spec or refused where the body asks for it.
_BETA_FIELDS = ("fast-mode-",)
#: Beta values that let a prompt run past the standard window (a dearer price tier).
_BETA_LONG_CONTEXT = ("context-1m-",)


#: Query parameters forwarded (the Anthropic SDKs' ``?beta=true``); any other is refused.
QUERY = frozenset({"beta"})


def check_query(query: str) -> None:
    """Refuse a query parameter the proxy does not know (a channel beside the body)."""
    for pair in query.split("&") if query else ():
        name = pair.partition("=")[0]
        if name not in QUERY:
            _refuse(f"the query parameter {name!r}", _UNKNOWN)


def check_headers(api: Api, headers: Iterable[tuple[str, str]], needs: Needs) -> None:
    """Refuse a header, or an ``anthropic-beta`` value, the proxy does not know."""
    for name, value in headers:
        lower = name.lower()
        if lower not in HEADERS and not lower.startswith(_HEADER_PREFIXES):
            _refuse(f"the header {name!r}", _UNKNOWN)
        if lower == "anthropic-beta":
            for beta in (b.strip() for b in value.split(",")):
                if not beta or beta in BETAS:
                    continue
                if beta.startswith(_BETA_FIELDS):
                    continue  # what it allows is asked for by a field of the body, priced there
                if beta.startswith(_BETA_LONG_CONTEXT):
                    needs.long_context = True
                else:
                    _refuse(f"the anthropic-beta value {beta!r}", _UNKNOWN)


# --- media -----------------------------------------------------------------------------------

_DATA_URL = re.compile(r"^data:([\w.+/-]*)((?:;[\w.+-]+=[^;,]*)*);base64,", re.ASCII)


def _image_tokens(data: str, where: str, needs: Needs) -> int:
    try:
        raw = media.decode_base64(data, limit=MAX_MEDIA_BYTES)
        tokens = media.image_tokens(raw)
    except media.Unreadable as exc:
        _refuse(f"the image in {where}", f"its size cannot be read ({exc})")
    needs.media_bytes += len(data)
    return tokens


def _pdf_tokens(data: str, where: str, needs: Needs) -> int:
    try:
        raw = media.decode_base64(data, limit=MAX_MEDIA_BYTES)
        tokens = media.pdf_tokens(raw)
    except media.Unreadable as exc:
        _refuse(f"the PDF in {where}", f"its pages cannot be counted ({exc})")
    needs.media_bytes += len(data)
    return tokens


def _data_url(url: str, where: str) -> tuple[str, str]:
    """The media type and base64 payload of a ``data:`` URL; anything else is refused (the
    provider would fetch it)."""
    match = _DATA_URL.match(url)
    if match is None:
        _refuse(f"the URL source in {where}", _NOT_BOUNDED + " (a URL the provider fetches)")
    return match.group(1).lower(), url[match.end() :]


# --- Anthropic Messages ----------------------------------------------------------------------

ANTHROPIC_FIELDS = frozenset(
    {
        "model",
        "messages",
        "system",
        "max_tokens",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "top_k",
        "top_p",
        "tools",
        "tool_choice",
        "thinking",
        "context_management",
        "output_config",
        "cache_control",
        "service_tier",
        "speed",
        "inference_geo",
    }
)
_ANTHROPIC_REFUSED = {
    "mcp_servers": "the provider would call the MCP servers it names for the sandbox; "
    + _NOT_BOUNDED,
    "container": "a container the provider keeps runs code billed by its time; " + _NOT_BOUNDED,
}
_CACHE = ("cache_control",)
ANTHROPIC_BLOCKS: dict[str, tuple[str, ...]] = {
    "text": ("type", "text", "citations", *_CACHE),
    "image": ("type", "source", *_CACHE),
    "document": ("type", "source", "title", "context", "citations", *_CACHE),
    "search_result": ("type", "source", "title", "content", "citations", *_CACHE),
    "tool_use": ("type", "id", "name", "input", "caller", *_CACHE),
    "tool_result": ("type", "tool_use_id", "content", "is_error", *_CACHE),
    "thinking": ("type", "thinking", "signature"),
    # a deferred tool named by a tool search: its definition is in the request's own tools
    "tool_reference": ("type", "tool_name", *_CACHE),
    "redacted_thinking": ("type", "data"),
    # the history of a server tool's earlier uses: input, bounded by its bytes
    "server_tool_use": ("type", "id", "name", "input", "caller", *_CACHE),
    "web_search_tool_result": ("type", "tool_use_id", "content", "caller", *_CACHE),
    "web_fetch_tool_result": ("type", "tool_use_id", "content", "caller", *_CACHE),
}
#: The provider's own client tools (run by the CLI, in the sandbox): bounded by their bytes
#: and the prompt the provider adds for each.
_ANTHROPIC_CLIENT_TOOLS = ("bash_", "text_editor_", "computer_", "memory_")
_ANTHROPIC_CLIENT_TOOL_FIELDS = (
    "type",
    "name",
    "display_width_px",
    "display_height_px",
    "display_number",
    "enable_zoom",
    "max_characters",
    *_CACHE,
)
_ANTHROPIC_CUSTOM_TOOL_FIELDS = (
    "type",
    "name",
    "description",
    "input_schema",
    "strict",
    "input_examples",
    "eager_input_streaming",
    "defer_loading",
    "allowed_callers",
    *_CACHE,
)
_ANTHROPIC_SERVER_TOOLS = {"web_search_": "web_search", "web_fetch_": "web_fetch"}
_ANTHROPIC_SERVER_TOOL_FIELDS = (
    "type",
    "name",
    "max_uses",
    "allowed_domains",
    "blocked_domains",
    "user_location",
    "citations",
    "max_content_tokens",
    *_CACHE,
)
#: Context edits that only take input away.
_CONTEXT_EDITS = ("clear_tool_uses_", "clear_thinking_")


def _anthropic_source(source: object, where: str, needs: Needs, pdf_ok: bool) -> int:
    if not isinstance(source, Mapping):
        _refuse(f"the source of {where}", "it is not an object")
    kind = _str(source.get("type"))
    if kind in ("url", "file"):
        what = "a URL the provider fetches" if kind == "url" else "a file the provider holds"
        _refuse(f"a {kind!r} source in {where}", f"{_NOT_BOUNDED} ({what})")
    if kind == "base64":
        mime = _str(source.get("media_type")).lower()
        data = _str(source.get("data"))
        if mime == "application/pdf":
            if not pdf_ok:
                _refuse(f"a PDF in {where}", _UNKNOWN)
            return _pdf_tokens(data, where, needs)
        if mime.startswith("image/"):
            return _image_tokens(data, where, needs)
        _refuse(f"the media type {mime!r} in {where}", _UNKNOWN)
    if kind == "text":
        return 0  # plain text: its bytes are in the body
    if kind == "content":
        return _anthropic_blocks(source.get("content"), where, needs)
    _refuse(f"the source type {kind!r} in {where}", _UNKNOWN)


def _anthropic_blocks(content: object, where: str, needs: Needs) -> int:
    """The tokens that the blocks of ``content`` cost beyond their bytes."""
    if isinstance(content, str) or content is None:
        return 0
    if not isinstance(content, list):
        _refuse(f"the content of {where}", "it is neither text nor a list of blocks")
    extra = 0
    for block in content:
        if not isinstance(block, Mapping):
            continue  # text at most: its bytes bound it, and the provider refuses it
        kind = _str(block.get("type"))
        fields = ANTHROPIC_BLOCKS.get(kind)
        if fields is None:
            _refuse(f"the content block type {kind!r} (in {where})", _UNKNOWN)
        _keys(f"the {kind!r} block's", block, fields)
        if kind in ("image", "document"):
            extra += _anthropic_source(block.get("source"), f"a {kind} block", needs, True)
        elif kind == "search_result":
            extra += _anthropic_blocks(block.get("content"), "a search result", needs)
        elif kind == "tool_result":
            extra += _anthropic_blocks(block.get("content"), "a tool result", needs)
        elif kind == "web_fetch_tool_result":
            result = block.get("content")
            inner = result.get("content") if isinstance(result, Mapping) else None
            if isinstance(inner, Mapping):
                extra += _anthropic_blocks([inner], "a web fetch result", needs)
    return extra


def _anthropic_tools(tools: object, needs: Needs) -> int:
    extra = 0
    for tool in _dicts(tools):
        kind = _str(tool.get("type"))
        if kind in ("", "custom"):
            _keys("a custom tool's", tool, _ANTHROPIC_CUSTOM_TOOL_FIELDS)
            continue
        if kind.startswith(_ANTHROPIC_CLIENT_TOOLS):
            _keys(f"the {kind!r} tool's", tool, _ANTHROPIC_CLIENT_TOOL_FIELDS)
            extra += BUILTIN_TOOL_TOKENS
            continue
        server = next((n for p, n in _ANTHROPIC_SERVER_TOOLS.items() if kind.startswith(p)), None)
        if server is None:
            _refuse(f"the tool type {kind!r}", _UNKNOWN)
        _keys(f"the {kind!r} tool's", tool, _ANTHROPIC_SERVER_TOOL_FIELDS)
        assert isinstance(tool, dict)
        uses = tool.get("max_uses")
        if not isinstance(uses, int) or isinstance(uses, bool) or uses > MAX_SERVER_TOOL_USES:
            tool["max_uses"] = uses = MAX_SERVER_TOOL_USES
        if server == "web_fetch":
            most = tool.get("max_content_tokens")
            if not isinstance(most, int) or most > SERVER_TOOL_RESULT_TOKENS:
                tool["max_content_tokens"] = SERVER_TOOL_RESULT_TOKENS
        needs.server_uses[server] = needs.server_uses.get(server, 0) + max(0, uses)
        _domains(tool.get("allowed_domains"), needs)
        extra += BUILTIN_TOOL_TOKENS
    if _list(tools):
        extra += TOOLS_PROMPT_TOKENS
    return extra


def _domains(allowed: object, needs: Needs) -> None:
    names = [d for d in _list(allowed) if isinstance(d, str) and d]
    if not names:
        needs.open_web = True
    needs.domains += names


def _anthropic(body: dict[str, Any], needs: Needs) -> int:
    for key in body:
        if key in _ANTHROPIC_REFUSED:
            _refuse(f"the field {key!r}", _ANTHROPIC_REFUSED[key])
        if key not in ANTHROPIC_FIELDS:
            _refuse(f"the field {key!r}", _UNKNOWN)
    extra = 0
    for i, message in enumerate(_list(body.get("messages"))):
        if not isinstance(message, Mapping):
            continue  # text at most: its bytes bound it, and the provider refuses it
        _keys(f"message {i}'s", message, ("role", "content"))
        extra += _anthropic_blocks(message.get("content"), f"message {i}", needs)
    extra += _anthropic_blocks(body.get("system"), "the system prompt", needs)
    extra += _anthropic_tools(body.get("tools"), needs)
    context = body.get("context_management")
    if isinstance(context, Mapping):
        _keys("context_management's", context, ("edits",))
        for edit in _dicts(context.get("edits")):
            if not _str(edit.get("type")).startswith(_CONTEXT_EDITS):
                _refuse(f"the context edit {edit.get('type')!r}", _UNKNOWN)
    tier = body.get("service_tier")
    if tier in (None, "auto"):
        body["service_tier"] = "standard_only"  # "auto" may be served, and billed, at priority
    elif tier != "standard_only":
        needs.multipliers.append(f"service_tier={tier}")
    speed = body.get("speed")
    if speed not in (None, "standard"):
        needs.multipliers.append(f"speed={speed}")
    geo = body.get("inference_geo")
    if geo not in (None, "global"):
        needs.multipliers.append(f"inference_geo={geo}")
    return extra


# --- OpenAI Chat Completions -----------------------------------------------------------------

CHAT_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "n",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "functions",
        "function_call",
        "response_format",
        "seed",
        "user",
        "safety_identifier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "prompt_cache_options",
        "reasoning_effort",
        "verbosity",
        "service_tier",
        "store",
        "metadata",
        "modalities",
    }
)
_CHAT_REFUSED = {
    "audio": "audio output is billed by its own rates",
    "prediction": "a predicted output's rejected tokens are billed beyond the output cap",
    "web_search_options": "the provider would search the web for the sandbox; "
    + "price web search and use the Responses API's tool",
}
CHAT_MESSAGE_FIELDS = (
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "refusal",
    "function_call",
    "reasoning_content",
    "annotations",
)
_BREAKPOINT = "prompt_cache_breakpoint"
CHAT_PARTS: dict[str, tuple[str, ...]] = {
    "text": ("type", "text", _BREAKPOINT),
    "image_url": ("type", "image_url"),
    "file": ("type", "file"),
    "refusal": ("type", "refusal"),
}


def _openai_image(url: object, where: str, needs: Needs) -> int:
    mime, data = _data_url(_str(url), where)
    if not mime.startswith("image/"):
        _refuse(f"the media type {mime!r} in {where}", _UNKNOWN)
    return _image_tokens(data, where, needs)


def _openai_file(part: Mapping[str, Any], where: str, needs: Needs) -> int:
    if part.get("file_id") is not None or part.get("file_url") is not None:
        _refuse(f"a file by id or URL in {where}", f"{_NOT_BOUNDED} (a file the provider holds)")
    data = _str(part.get("file_data"))
    if data.startswith("data:"):
        mime, data = _data_url(data, where)
        if mime != "application/pdf":
            _refuse(f"the file type {mime!r} in {where}", "only PDFs can be bounded")
    elif not _str(part.get("filename")).lower().endswith(".pdf"):
        _refuse(f"the file in {where}", "only PDFs can be bounded")
    return _pdf_tokens(data, where, needs)


def _chat_content(content: object, where: str, needs: Needs) -> int:
    extra = 0
    for part in _dicts(content):
        kind = _str(part.get("type"))
        fields = CHAT_PARTS.get(kind)
        if fields is None:
            _refuse(f"the content part type {kind!r} (in {where})", _UNKNOWN)
        _keys(f"the {kind!r} part's", part, fields)
        needs.cache_writes = needs.cache_writes or _BREAKPOINT in part
        if kind == "image_url":
            image = part.get("image_url")
            image = image if isinstance(image, Mapping) else {}
            _keys("image_url's", image, ("url", "detail"))
            extra += _openai_image(image.get("url"), where, needs)
        elif kind == "file":
            file = part.get("file")
            file = file if isinstance(file, Mapping) else {}
            _keys("file's", file, ("file_data", "file_id", "filename"))
            extra += _openai_file(file, where, needs)
    return extra


def _function_tools(tools: object, allowed: Mapping[str, tuple[str, ...]]) -> int:
    for tool in _dicts(tools):
        kind = _str(tool.get("type"))
        if kind not in allowed:
            _refuse(f"the tool type {kind!r}", _UNKNOWN)
        _keys(f"the {kind!r} tool's", tool, allowed[kind])
    return TOOLS_PROMPT_TOKENS if _list(tools) else 0


def _service_tier(body: dict[str, Any], needs: Needs) -> None:
    tier = body.get("service_tier")
    if tier in (None, "auto", "default"):
        body["service_tier"] = "default"  # "auto" is the project's default, maybe priority
    else:
        needs.multipliers.append(f"service_tier={tier}")


def _chat(body: dict[str, Any], needs: Needs) -> int:
    for key in body:
        if key in _CHAT_REFUSED:
            _refuse(f"the field {key!r}", _CHAT_REFUSED[key])
        if key not in CHAT_FIELDS:
            _refuse(f"the field {key!r}", _UNKNOWN)
    if body.get("store") not in (None, False):
        _refuse("store = true", "a stored completion outlives the night")
    modalities = body.get("modalities")
    if modalities is not None and modalities != ["text"]:
        _refuse(f"modalities {modalities!r}", "only text output is bounded")
    extra = 0
    for i, message in enumerate(_list(body.get("messages"))):
        if not isinstance(message, Mapping):
            continue  # text at most: its bytes bound it, and the provider refuses it
        _keys(f"message {i}'s", message, CHAT_MESSAGE_FIELDS)
        extra += _chat_content(message.get("content"), f"message {i}", needs)
    extra += _function_tools(
        body.get("tools"),
        {"function": ("type", "function"), "custom": ("type", "custom")},
    )
    _service_tier(body, needs)
    _cache_options(body, needs)
    return extra


# --- OpenAI Responses ------------------------------------------------------------------------

RESPONSES_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "max_output_tokens",
        "max_tool_calls",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "top_logprobs",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "text",
        "include",
        "store",
        "metadata",
        "user",
        "safety_identifier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "prompt_cache_options",
        "service_tier",
        "truncation",
        "client_metadata",
    }
)
_RESPONSES_REFUSED = {
    "previous_response_id": "it continues a conversation the provider stored, of a size "
    "unknown here",
    "conversation": "it continues a conversation the provider stored, of a size unknown here",
    "background": "a background response is billed after the night stops watching it",
    "prompt": "a stored prompt's content, and so its cost, is unknown here",
    "context_management": "the provider's own compaction is billed beyond the request",
}
RESPONSES_ITEMS: dict[str, tuple[str, ...]] = {
    "message": ("type", "role", "content", "id", "status", "phase"),
    "function_call": ("type", "id", "call_id", "name", "arguments", "status", "namespace"),
    "function_call_output": ("type", "id", "call_id", "output", "status"),
    "custom_tool_call": ("type", "id", "call_id", "name", "input", "status", "namespace"),
    "custom_tool_call_output": ("type", "id", "call_id", "output", "status"),
    "reasoning": ("type", "id", "summary", "content", "encrypted_content", "status"),
    "local_shell_call": ("type", "id", "call_id", "action", "status"),
    "local_shell_call_output": ("type", "id", "call_id", "output", "status"),
    "compaction": ("type", "id", "encrypted_content"),
}
RESPONSES_PARTS: dict[str, tuple[str, ...]] = {
    "input_text": ("type", "text", _BREAKPOINT),
    "output_text": ("type", "text", "annotations", "logprobs"),
    "refusal": ("type", "refusal"),
    "summary_text": ("type", "text"),
    "reasoning_text": ("type", "text"),
    "input_image": ("type", "image_url", "file_id", "detail"),
    "input_file": ("type", "file_data", "file_id", "file_url", "filename"),
}
_INCLUDE = frozenset({"reasoning.encrypted_content", "message.output_text.logprobs"})
_RESPONSES_FUNCTION = ("type", "name", "description", "parameters", "strict", "defer_loading")
_RESPONSES_TOOLS: dict[str, tuple[str, ...]] = {
    "function": _RESPONSES_FUNCTION,
    "custom": ("type", "name", "description", "format", "defer_loading"),
    "namespace": ("type", "name", "description", "tools"),
    "local_shell": ("type",),
    "shell": ("type",),
    "apply_patch": ("type",),
}
_RESPONSES_SEARCH = ("web_search", "web_search_preview", "web_search_2025_08_26")
_RESPONSES_SEARCH_FIELDS = (
    "type",
    "filters",
    "search_context_size",
    "user_location",
    "external_web_access",
)


def _responses_content(content: object, where: str, needs: Needs) -> int:
    extra = 0
    for part in _dicts(content):
        kind = _str(part.get("type"))
        fields = RESPONSES_PARTS.get(kind)
        if fields is None:
            _refuse(f"the content part type {kind!r} (in {where})", _UNKNOWN)
        _keys(f"the {kind!r} part's", part, fields)
        needs.cache_writes = needs.cache_writes or _BREAKPOINT in part
        if kind == "input_image":
            if part.get("file_id") is not None:
                _refuse(f"an image by file id in {where}", _NOT_BOUNDED)
            extra += _openai_image(part.get("image_url"), where, needs)
        elif kind == "input_file":
            extra += _openai_file(part, where, needs)
    return extra


def _responses_tools(body: dict[str, Any], needs: Needs) -> int:
    tools = _dicts(body.get("tools"))
    searches = 0
    for tool in tools:
        kind = _str(tool.get("type"))
        if kind in _RESPONSES_SEARCH:
            _keys(f"the {kind!r} tool's", tool, _RESPONSES_SEARCH_FIELDS)
            filters = tool.get("filters")
            limited = filters.get("allowed_domains") if isinstance(filters, Mapping) else None
            _domains(limited, needs)
            searches += 1
            continue
        if kind not in _RESPONSES_TOOLS:
            _refuse(f"the tool type {kind!r}", _UNKNOWN)
        _keys(f"the {kind!r} tool's", tool, _RESPONSES_TOOLS[kind])
        if kind == "namespace":
            _function_tools(
                tool.get("tools"),
                {"function": _RESPONSES_FUNCTION, "custom": _RESPONSES_TOOLS["custom"]},
            )
    if searches:
        # The provider's own tools are capped by one count for the whole response.
        most = body.get("max_tool_calls")
        if not isinstance(most, int) or isinstance(most, bool) or most > MAX_SERVER_TOOL_USES:
            body["max_tool_calls"] = most = MAX_SERVER_TOOL_USES
        needs.server_uses["web_search"] = max(0, most)
        return TOOLS_PROMPT_TOKENS + BUILTIN_TOOL_TOKENS
    return TOOLS_PROMPT_TOKENS if tools else 0


def _responses(body: dict[str, Any], needs: Needs) -> int:
    for key in body:
        if key in _RESPONSES_REFUSED:
            _refuse(f"the field {key!r}", _RESPONSES_REFUSED[key])
        if key not in RESPONSES_FIELDS:
            _refuse(f"the field {key!r}", _UNKNOWN)
    if body.get("store") is True:
        _refuse("store = true", "a stored response can be continued by id, at a cost unknown here")
    body["store"] = False  # the API stores a response unless told not to
    for name in _list(body.get("include")):
        if name not in _INCLUDE:
            _refuse(f"include {name!r}", _UNKNOWN)
    extra = 0
    items = body.get("input")
    for i, item in enumerate(_list(items)):
        if not isinstance(item, Mapping):
            continue  # text at most: its bytes bound it, and the provider refuses it
        kind = _str(item.get("type")) or ("message" if "role" in item else "")
        fields = RESPONSES_ITEMS.get(kind)
        if fields is None:
            why = _NOT_BOUNDED if kind == "item_reference" else _UNKNOWN
            _refuse(f"the input item type {kind!r}", why)
        _keys(f"the {kind!r} item's", item, fields)
        if kind == "message":
            extra += _responses_content(item.get("content"), f"input item {i}", needs)
    extra += _responses_tools(body, needs)
    _service_tier(body, needs)
    _cache_options(body, needs)
    return extra


def _cache_options(body: dict[str, Any], needs: Needs) -> None:
    options = body.get("prompt_cache_options")
    if options is None:
        return
    if not isinstance(options, Mapping):
        _refuse("prompt_cache_options", "it is not an object")
    _keys("prompt_cache_options'", options, ("mode", "ttl"))
    needs.cache_writes = True


_CHECKS: dict[Api, Callable[[dict[str, Any], Needs], int]] = {
    "anthropic": _anthropic,
    "openai-chat": _chat,
    "openai-responses": _responses,
}


def bound(
    api: Api, body: dict[str, Any], raw_size: int, headers: Iterable[tuple[str, str]] = ()
) -> Needs:
    """What ``body`` (``raw_size`` bytes as received) can cost besides its output, once its
    headers and every name in it are found on the allowlist; ``Unforwardable`` otherwise.

    The body is rewritten in place for what the proxy caps or pins (a server tool's uses, the
    service tier, ``store``)."""
    needs = Needs()
    check_headers(api, headers, needs)
    extra = _CHECKS[api](body, needs)
    needs.input_tokens = max(0, raw_size - needs.media_bytes) + extra
    return needs
