"""Finding a secret in text that may carry it encoded: what the harness checks before any
byte from a provider's side (an upstream's answer, a provider's error text) reaches a place a
model can read.

A byte-literal search is not enough: an upstream that quotes the credential it received may
write it JSON-escaped (``\\u002d``), percent-encoded, as HTML entities, in base64 or hex, or
split over the events of a stream, which the client joins again. ``SecretScan.found`` looks in
the text as it is and in each of its decoded views, for the secret and for its encoded forms.
``StreamScan`` does the same across a stream: it keeps what the client would have joined so
far, and says how much of the newest text it must hold back because it could be the start of
a secret the next event completes.

Which environment variables are secrets is decided here too (``is_secret_name``): a child
process never gets them (``overnight.process.scrubbed_env``), and their values
(``secret_values``) are replaced by ``[redacted]`` wherever the run writes text.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import unquote

#: Variables removed from every child environment whatever their shape.
SECRET_NAMES: frozenset[str] = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
    }
)

#: A variable whose name matches one of these (case-insensitively) is treated as a secret.
#: Suffixes carry the leading underscore so that names such as ``PYTHONHASHSEED`` or
#: ``KEYTIMEOUT`` survive; ``_API_KEY`` is covered by ``_KEY``.
SECRET_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"(_KEY|_TOKEN|_SECRET)$", re.IGNORECASE),
    re.compile(r"SECRET|PASSWORD|PASSWD|CREDENTIALS", re.IGNORECASE),
)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable called ``name`` must not reach a child process."""
    if name.upper() in SECRET_NAMES:
        return True
    return any(pattern.search(name) for pattern in SECRET_PATTERNS)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the secret-looking variables of ``environ`` (default: this process's),
    longest first: what is replaced by ``[redacted]`` wherever the run writes text."""
    env = dict(os.environ if environ is None else environ)
    return sorted(
        (v for k, v in env.items() if is_secret_name(k) and len(v) >= 8), key=len, reverse=True
    )


#: Secrets shorter than this are not looked for (they would match ordinary text).
MIN_SECRET = 8
#: The shortest start of a secret that is held back at the end of a stream's text.
MIN_PARTIAL = 6

_JSON_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[\"\\/bfnrt])")
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescape_json(text: str) -> str:
    """``text`` with JSON string escapes decoded wherever they stand (a fragment of a JSON
    string, or JSON inside JSON)."""

    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        return chr(int(code[1:], 16)) if code[0] == "u" else _SIMPLE[code]

    return _JSON_ESCAPE.sub(one, text)


def _views(text: str) -> list[str]:
    """``text`` and what each decoding a client might apply makes of it, twice over (an
    escape inside an escape)."""
    views = [text]
    for _ in range(2):
        more = []
        for view in views:
            for decoded in (_unescape_json(view), unquote(view), html.unescape(view)):
                if decoded not in views and decoded not in more:
                    more.append(decoded)
        views += more
    return views


def _encoded_forms(secret: str) -> list[str]:
    """How ``secret`` reads once encoded: base64 (standard and URL-safe, at each of the three
    alignments it can fall at in a longer text), hex, reversed."""
    raw = secret.encode()
    forms = [raw.hex(), raw.hex().upper(), secret[::-1]]
    for pad in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * pad + raw).decode().rstrip("=")
            # the characters fixed by the secret alone: drop those the padding or the text
            # around it may change
            start = (pad * 4 + 2) // 3 + (1 if pad else 0)
            stable = encoded[start : len(encoded) - 2]
            if len(stable) >= MIN_SECRET:
                forms.append(stable)
    return forms


class SecretScan:
    """Looks for any of ``secrets`` in a text, in any encoding listed in the module's doc."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True)
        self._forms = [form for s in self.secrets for form in _encoded_forms(s)]

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def found(self, text: str | bytes) -> bool:
        """Whether ``text`` carries a secret, as it is or decoded."""
        if not self.secrets:
            return False
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if any(form in text for form in self._forms):
            return True
        return any(s in view for view in _views(text) for s in self.secrets)

    def found_in_json(self, data: bytes) -> bool:
        """Whether a body carries a secret: its bytes, and, when it is JSON, every string it
        holds and the strings joined (as a client joins the parts of a message)."""
        if self.found(data):
            return True
        try:
            parsed = json.loads(data)
        except (ValueError, RecursionError):
            return False
        return any(self.found("".join(view(parsed))) for view in (strings, values, texts))

    def redact(self, text: str, replacement: str = "[redacted]") -> str:
        """``text`` with each secret replaced; a text that still carries one (encoded) is
        replaced whole."""
        for secret in self.secrets:
            text = text.replace(secret, replacement)
        if self.found(text):
            return "[a message that carried a credential of the harness, withheld]"
        return text


#: The fields whose strings a client joins into what it shows or runs: a message's text, a
#: streamed delta's text or tool input, a tool call's arguments, a result's output.
TEXT_FIELDS = frozenset(
    {"text", "partial_json", "content", "thinking", "arguments", "output", "refusal", "delta"}
)


def texts(value: object) -> list[str]:
    """The strings of a JSON value held under ``TEXT_FIELDS``, in order: the parts a client
    joins (the text deltas of a stream, the blocks of a message), without the names and
    labels between them."""
    out: list[str] = []
    stack: list[tuple[object, bool]] = [(value, False)]
    while stack:
        item, wanted = stack.pop()
        if isinstance(item, str):
            if wanted:
                out.append(item)
        elif isinstance(item, dict):
            for key, inner in reversed(list(item.items())):
                stack.append((inner, key in TEXT_FIELDS or (wanted and not isinstance(inner, str))))
        elif isinstance(item, list):
            stack.extend((inner, wanted) for inner in reversed(item))
    return out


def values(value: object) -> list[str]:
    """Every string value of a JSON value (keys left out), in order."""
    return [s for s in strings(value, keys=False)]


def strings(value: object, *, keys: bool = True) -> list[str]:
    """Every string of a JSON value (keys included), in order."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            for key, inner in reversed(list(item.items())):
                stack.append(inner)
                if keys:
                    stack.append(key)
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return out


class StreamScan:
    """A secret looked for across the events of a stream: ``add`` each event's text (its raw
    bytes and the strings a client reads from it); ``leaked`` once the texts joined so far
    carry a secret; ``holding`` while the end of what was joined could be a secret's start."""

    def __init__(self, scan: SecretScan) -> None:
        self.scan = scan
        self.leaked = False
        self._keep = max((len(s) for s in scan.secrets), default=0) * 8 + 64
        self._joined = ""
        self._text = ""

    def add(self, raw: bytes, parsed: object) -> None:
        if not self.scan or self.leaked:
            return
        text = raw.decode("utf-8", "replace")
        if self.scan.found(text):
            self.leaked = True
            return
        self._joined = (self._joined + "".join(strings(parsed)))[-self._keep :]
        self._text = (self._text + "".join(texts(parsed)))[-self._keep :]
        self.leaked = self.scan.found(self._joined) or self.scan.found(self._text)

    def holding(self) -> bool:
        """Whether the text joined so far ends with the start of a secret (as it is, or JSON-
        unescaped): the event that made it must wait for the next."""
        if not self.scan:
            return False
        for view in (
            self._joined,
            _unescape_json(self._joined),
            self._text,
            _unescape_json(self._text),
        ):
            for secret in self.scan.secrets:
                for size in range(min(len(secret) - 1, len(view)), MIN_PARTIAL - 1, -1):
                    if view.endswith(secret[:size]):
                        return True
        return False
