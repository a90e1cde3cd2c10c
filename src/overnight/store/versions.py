"""Which overnight wrote a run's files, and the refusal of a file in a format this one does not
know.

Every file a run keeps says the format it is in: the checkpoint frame its ``schema_version``,
each journal line its ``fmt`` (``overnight.store.journal``); and beside it the version of the
overnight that wrote it (``written_by`` in the frame and in ``run.json``, ``by`` on a line).
A format newer than this overnight's is not damage: the night is whole, this overnight cannot
read it. It is refused as a usage error, before anything in the run directory is written,
so that the overnight that wrote it can still resume the night.
"""

from __future__ import annotations

import re

from overnight.core.errors import ConfigError
from overnight.version import __version__

#: The version of this overnight, as it is recorded in the files it writes.
WRITTEN_BY: str = __version__

# What a file says wrote it is shown on the terminal: only a version's characters are.
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}")


class NewerFormat(ConfigError):
    """A run file in a format newer than this overnight's: upgrade to read it."""

    def __init__(self, where: str, what: str, found: int, ours: int, by: object) -> None:
        self.where = where
        self.found = found
        self.written_by = by if isinstance(by, str) and _VERSION.fullmatch(by) else None
        writer = f"overnight {self.written_by}" if self.written_by else "a newer overnight"
        upgrade = f"overnight {self.written_by} or later" if self.written_by else "that overnight"
        super().__init__(
            "RUN_DIR",
            f"{where} was written by {writer} ({what} format {found}); "
            f"this is overnight {WRITTEN_BY} (format {ours}): upgrade to resume",
            f"resume it with {upgrade}; nothing in the run directory was changed",
        )
