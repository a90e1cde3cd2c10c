"""Standard output and error that a closed reader cannot turn into a failure.

`overnight run night.toml | true`, `overnight list | head -3` or a cron wrapper that stops
reading close the pipe under the process. Python then raises ``BrokenPipeError`` at the next
write, anywhere: in the summary after the night has ended, in a progress line in the middle of
it. What the command printed is for a person; what it did (a night, its result.json, its
exit code) must not depend on whether anyone still reads. So each stream is wrapped: the first
write that finds its reader gone puts ``/dev/null`` under the stream's file descriptor (so the
interpreter's own flush at exit succeeds too) and every later write goes there.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, TextIO


class ReaderGoneSafe:
    """A text stream whose writes never raise for a reader that went away."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def _gone(self) -> None:
        self.reader_gone = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # no descriptor to replace: writes are dropped anyway
            pass

    def write(self, text: str) -> int:
        if self.reader_gone:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        if self.reader_gone:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()
            with contextlib.suppress(OSError):  # what was buffered now goes to /dev/null
                self._stream.flush()

    def isatty(self) -> bool:
        return not self.reader_gone and self._stream.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_standard_streams() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` (once) so that a closed reader is not an
    error."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, ReaderGoneSafe):
            setattr(sys, name, ReaderGoneSafe(stream))


def flush_standard_streams() -> None:
    """Flush both streams before the exit code is returned: a reader gone by then changes
    nothing."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            with contextlib.suppress(BrokenPipeError):
                stream.flush()
