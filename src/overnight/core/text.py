"""Text from a model on its way to a person: one function per kind of sink.

A model (or code it wrote) chooses task titles, briefs, lessons, the closing summary, command
output and file names. Wherever that text is shown it must stay text: on a terminal it cannot
redraw a line, ring a bell, restyle the screen or reorder what is shown (``printable``,
``one_line``); in Markdown it cannot become a heading, a verdict line, a table, a link or
HTML (``md_code``, ``md_fence``, ``md_escape``); in JSON files it carries no raw bidi control
(``json_text``). The HTML report escapes it and strips bidi controls the same way
(``overnight.report.charts.esc``).
"""

from __future__ import annotations

import re

#: C0 controls except tab and newline, DEL, and the C1 block (which holds the CSI of ANSI
#: escape sequences in their 8-bit form).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: Terminated CSI and OSC sequences are dropped whole; an unterminated one keeps its text
#: (its ESC becomes U+FFFD), so it cannot swallow what follows it.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)")
#: Bidirectional controls: embeddings, overrides, isolates, marks. They reorder what a reader
#: sees without changing what the bytes say.
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")
_BIDI_TABLE = {ord(c): f"\\u{ord(c):04x}" for c in BIDI_CONTROLS}
_WHITESPACE = re.compile(r"\s+")


def strip_bidi(text: str) -> str:
    """``text`` without bidirectional control characters."""
    return _BIDI.sub("", text)


def printable(text: str) -> str:
    """``text`` for a terminal: escape sequences and bidi controls removed, every other
    control character (a carriage return too: it redraws the line) shown as U+FFFD; newlines
    and tabs kept."""
    return _CONTROL.sub("\N{REPLACEMENT CHARACTER}", _ANSI.sub("", strip_bidi(text)))


def one_line(text: str) -> str:
    """``text`` as one terminal line: ``printable``, every run of whitespace (newlines
    included) folded to one space."""
    return _WHITESPACE.sub(" ", printable(text)).strip()


def json_text(body: str) -> str:
    """A JSON document with its bidi controls written as ``\\uXXXX`` escapes: the same data
    for a parser, nothing that reorders a line for someone reading the file. (JSON puts
    non-ASCII characters only inside strings, where the escape means the character.)"""
    return body.translate(_BIDI_TABLE)


ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"
#: Where a first sentence ends: a full stop, question or exclamation mark before a space, a
#: semicolon between the items of a list, or the end of a line.
_SENTENCE_END = re.compile(r"[.!?;](?=\s)|\n")


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (the reason, when the text gives one), whole."""
    text = text.strip()
    end = _SENTENCE_END.search(text)
    return text if end is None else text[: end.end()].rstrip()


def _tail_from_boundary(text: str) -> str:
    """``text`` from its first line, sentence or word boundary on: never from mid-word."""
    half = len(text) // 2
    for boundary in (r"\n", r"(?<=[.!?;])\s", r"\s"):
        found = re.search(boundary, text)
        if found is not None and (found.start() <= half or boundary == r"\s"):
            return text[found.end() :].strip()
    return ""


def clip(text: str, limit: int, more: str = "") -> str:
    """``text`` shortened to about ``limit`` characters for display: its first sentence
    always whole, then an ellipsis and as much of its end as fits, cut at a line, sentence or
    word boundary, then ``more`` (where the whole text is) in parentheses. Text that fits is
    returned as it is."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = first_sentence(text)
    room = limit - len(head) - 3
    tail = _tail_from_boundary(text[len(head) :][-room:]) if room > 0 else ""
    where = f" ({more})" if more else ""
    return f"{head} {ELLIPSIS}{' ' + tail if tail else ''}{where}"


def control_characters(text: str, *, newlines: bool) -> list[str]:
    """The control characters in ``text`` (tab always allowed; newline when ``newlines``)."""
    found = [c for c in text if _CONTROL.match(c)]
    if not newlines and "\n" in text:
        found.append("\n")
    return found


# -- Markdown ----------------------------------------------------------------------------------

_BACKTICKS = re.compile(r"`+")
#: The characters that start inline markup mid-line: escapes, code, emphasis, links and
#: images, HTML and autolinks, entities, strikethrough, table cells, email autolinks.
_MD_ACTIVE = re.compile(r"([\\`*_\[\]<>&!~|@])")
#: Bare URLs that GFM renderers turn into links without any markup.
_BARE_LINK = re.compile(r"(?i)(://|\bwww\.)")


def _longest_backticks(text: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(text)), default=0)


def md_code(text: str) -> str:
    """Text from the run as one inline code span: one line, nothing inside it is markup (no
    link, autolink, HTML, entity or emphasis is recognised in a code span), delimited by a
    backtick run longer than any inside it. Empty text gives an empty string."""
    body = one_line(text)
    if not body:
        return ""
    fence = "`" * (_longest_backticks(body) + 1)
    if body.startswith("`") or body.endswith("`") or (body[0] == " " and body[-1] == " "):
        body = f" {body} "
    return f"{fence}{body}{fence}"


def md_fence(text: str, info: str = "text") -> str:
    """Text from the run as a fenced code block: its lines kept, nothing inside it markup,
    the fence longer than any backtick run inside so no line of it can close the block."""
    body = printable(text).rstrip("\n")
    fence = "`" * max(3, _longest_backticks(body) + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def md_escape(text: str) -> str:
    """Harness prose that may quote text from the run, for use inside a Markdown line (after
    a prefix of the caller's, so it never starts a block): one line, every inline markup
    character backslash-escaped and bare URLs broken so no renderer links them."""
    escaped = _MD_ACTIVE.sub(r"\\\1", one_line(text))
    return _BARE_LINK.sub(lambda m: m.group(1).replace("/", "\\/").replace(".", "\\."), escaped)
