"""Where a run lives, written so that what a model is sent does not depend on it.

A run's own directories have absolute paths that differ from one machine, user or run to the
next: the run directory, the worktree, the clean checkout a check runs in, the user's
workspace. Text the harness hands a model (a command's output, a check's output, a tool's
error) names them as they are here; cut to a length afterwards, a longer path moves where the
cut falls, and a recorded night replayed elsewhere is asked something else.

``Places`` writes them before any cut: a tree of the repository (the worktree, a checkout of
it) as ``.``, so that ``/home/me/.overnight/runs/x/worktree/src/a.py`` reads ``./src/a.py``,
the path the agent's tools take; any other place by a placeholder (``<run-dir>``,
``<workspace>``). A place is recognised only whole: followed by a character that continues
its last name (``/srv/app-old`` after ``/srv/app``), it is another path and stays.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

#: What a tree of the repository is written as.
TREE = "."
#: The placeholders of the other places.
RUN_DIR = "<run-dir>"
WORKSPACE = "<workspace>"
ARTIFACTS = "<artifacts>"

#: What continues a path's last name: a name's character, or a dot before one (a dot that
#: ends a sentence does not).
_NAME_GOES_ON = r"(?![\w~+@%-]|\.[\w~+@%-])"


@dataclass(frozen=True)
class Places:
    """Paths and what each is written as, longest first (a place inside another is matched
    before it)."""

    pairs: tuple[tuple[str, str], ...] = field(default=())

    @classmethod
    def of(cls, trees: Iterable[str] = (), named: Iterable[tuple[str, str]] = ()) -> Places:
        """``trees`` written as ``.``, each ``(path, placeholder)`` of ``named`` as its
        placeholder. A path is given as text, absolute; ``/`` and empty ones are left out
        (they would match everything, or nothing)."""
        found: dict[str, str] = {}
        for path, written in [*((t, TREE) for t in trees), *named]:
            path = path.rstrip("/")
            if path.startswith("/") and path not in found:
                found[path] = written
        return cls(tuple(sorted(found.items(), key=lambda p: (-len(p[0]), p[0]))))

    @cached_property
    def _pattern(self) -> re.Pattern[str] | None:
        if not self.pairs:
            return None
        alternatives = "|".join(re.escape(path) for path, _ in self.pairs)
        return re.compile(f"({alternatives}){_NAME_GOES_ON}")

    @cached_property
    def _written(self) -> dict[str, str]:
        return dict(self.pairs)

    def __call__(self, text: str) -> str:
        """``text`` with every place written as it is to be shown."""
        pattern = self._pattern
        if pattern is None or not text:
            return text
        return pattern.sub(lambda m: self._written[m[1]], text)
