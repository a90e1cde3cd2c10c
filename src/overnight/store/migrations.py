"""The checkpoint body's formats: the current one, and how each earlier one still read is
lifted to it.

A body is read in the format its frame names (``schema_version``), its journal replayed on it
in that same format (a process writes its first save whole, so a journal is never in another
format than the snapshot it continues), and only then lifted, one format at a time, to the
current shape. The next save writes it in the current format.

Any change of the body's shape takes a new format, a field added with a default included: an
earlier overnight refuses a field it does not know (the state's models forbid extra fields),
and it must refuse it as a newer format, not as damage. ``SCHEMA_VERSION`` then goes up by
one and ``LIFTS`` gains the function from the format before it (for a field added with a
default, one that returns the body as it is: the field reads as its default).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Body = dict[str, Any]

#: The format of the checkpoint bodies (and frames) this overnight writes.
SCHEMA_VERSION: int = 2


def _from_1(body: Body) -> Body:
    # Format 2 changed the frame alone (a save number, the snapshot it replaces, a journal
    # beside it); the frame reader supplies their defaults for a format 1 frame.
    return body


#: Each earlier format still read, with the function lifting its body to the next format.
LIFTS: dict[int, Callable[[Body], Body]] = {1: _from_1}

#: The formats this overnight reads.
READABLE_VERSIONS: tuple[int, ...] = (*sorted(LIFTS), SCHEMA_VERSION)


def lift(body: Body, version: int) -> Body:
    """``body``, read in format ``version`` (one of ``READABLE_VERSIONS``), in the current
    format."""
    while version < SCHEMA_VERSION:
        body = LIFTS[version](body)
        version += 1
    return body
