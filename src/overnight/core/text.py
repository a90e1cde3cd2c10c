"""Text from a model on its way to a terminal or a Markdown file: without the characters that
would let it redraw a line, ring a bell or restyle the screen."""

from __future__ import annotations

import re

#: C0 controls except tab and newline, DEL, and the C1 block (which holds the CSI of ANSI
#: escape sequences in their 8-bit form).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")


def printable(text: str) -> str:
    """``text`` with escape sequences removed and every other control character (a carriage
    return too: it redraws the line) shown as U+FFFD."""
    return _CONTROL.sub("\N{REPLACEMENT CHARACTER}", _ANSI.sub("", text))


def control_characters(text: str, *, newlines: bool) -> list[str]:
    """The control characters in ``text`` (tab always allowed; newline when ``newlines``)."""
    found = [c for c in text if _CONTROL.match(c)]
    if not newlines and "\n" in text:
        found.append("\n")
    return found
