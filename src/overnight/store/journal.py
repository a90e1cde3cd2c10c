"""Append-only JSON-lines files: the money journal and the run trace.

Each record is one line of canonical JSON ending in a newline, written with a single write
to a file opened for appending. A process killed in the middle of an append can therefore
leave at most one damaged line, and only at the end of the file. Readers drop that final
line when it is incomplete; anywhere else a damaged line means the file was harmed after the
fact, which is reported as ``CheckpointCorrupt``.

Each record carries ``crc``, the CRC-32 of its canonical JSON without that field, so that a
line that is damaged yet still parses as JSON is recognised as damaged rather than trusted.
Each line also says its format, ``fmt`` (a line without it is format 1), and the version of
the overnight that wrote it, ``by``. A line of a newer format is not damage: ``read_journal``
refuses it with ``NewerFormat`` (``overnight.store.versions``) before judging its checksum,
which the newer format may compute otherwise, and a writer never cuts it off.

A writer that opens an existing journal first cuts off a damaged final line, exactly the one
``read_journal`` would ignore: otherwise the next record would be glued onto the fragment
and the fragment would become an unreadable line in the middle of the file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from overnight.core.errors import CheckpointCorrupt, DiskFull
from overnight.store.atomic import open_private
from overnight.store.versions import WRITTEN_BY, NewerFormat

#: The reserved field holding each record's checksum.
CRC_FIELD = "crc"
#: The reserved fields holding each line's format and the version of the overnight that wrote it.
FORMAT_FIELD = "fmt"
WRITER_FIELD = "by"
RESERVED = (CRC_FIELD, FORMAT_FIELD, WRITER_FIELD)

#: The format of the lines this overnight writes. 1: no ``fmt`` or ``by``; 2: both.
LINE_FORMAT = 2

_CHUNK = 64 * 1024


def _canonical(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), default=str)


def _crc(record: dict[str, Any]) -> int:
    return zlib.crc32(_canonical(record).encode("utf-8"))


def _encode_line(record: dict[str, Any]) -> bytes:
    taken = [name for name in RESERVED if name in record]
    if taken:
        raise ValueError(f"journal records may not carry the reserved field {taken[0]!r}")
    # One round trip through JSON gives the record exactly as a reader will see it (string
    # keys, default=str applied), so the checksum is computed over what will be verified.
    plain: dict[str, Any] = json.loads(_canonical(record))
    plain[FORMAT_FIELD] = LINE_FORMAT
    plain[WRITER_FIELD] = WRITTEN_BY
    plain[CRC_FIELD] = _crc(plain)
    return (_canonical(plain) + "\n").encode("utf-8")


@dataclass(frozen=True)
class _Newer:
    """A line of a format newer than ``LINE_FORMAT``: whole for all this overnight knows."""

    fmt: int
    by: object


def _decode_line(line: bytes) -> dict[str, Any] | _Newer | None:
    """The record on one line (newline excluded), ``_Newer`` for a line of a newer format, or
    ``None`` if the line is damaged."""
    try:
        record = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict):
        return None
    fmt = record.get(FORMAT_FIELD, 1)
    if type(fmt) is not int or fmt < 1:
        return None
    if fmt > LINE_FORMAT:
        return _Newer(fmt, record.get(WRITER_FIELD))
    crc = record.pop(CRC_FIELD, None)
    if type(crc) is not int or crc != _crc(record):
        return None
    record.pop(FORMAT_FIELD, None)
    record.pop(WRITER_FIELD, None)
    return record


class Journal:
    """An append-only JSON-lines file; the handle stays open between appends."""

    def __init__(self, path: Path, *, durable: bool) -> None:
        self.path = path
        self.durable = durable
        self._file: IO[bytes] | None = None
        # The metering proxy books from its own thread while the night writes from its own.
        self._lock = threading.RLock()

    def append(self, record: dict[str, Any]) -> None:
        """Append one record as one line; with ``durable`` it is on disk when this returns.

        Raises ``DiskFull`` when the file system has no space left and ``ValueError`` when
        the record uses the reserved ``crc`` field.
        """
        line = _encode_line(record)
        with self._lock:
            self._append_line(line)

    def _append_line(self, line: bytes) -> None:
        try:
            if self._file is None:
                _cut_damaged_tail(self.path)
                # Unbuffered: a failed write leaves no buffered remainder to be flushed later.
                # Kept open across appends on purpose; close() or the context manager ends it.
                self._file = open_private(self.path, "ab", buffering=0)
            view = memoryview(line)
            while view:
                written = self._file.write(view)
                view = view[written:]
            self._file.flush()
            if self.durable:
                os.fsync(self._file.fileno())
        except OSError as exc:
            # The file may now end in a fragment; reopening on the next append cuts it off.
            self.close()
            if exc.errno == errno.ENOSPC:
                raise DiskFull(f"cannot append to {self.path}: no space left on device") from exc
            raise

    def close(self) -> None:
        """Close the handle; a later append opens it again."""
        with self._lock:
            if self._file is not None:
                file, self._file = self._file, None
                file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _line_start(file: IO[bytes], end: int) -> int:
    """The offset just after the last newline before ``end``, or 0 if there is none."""
    pos = end
    while pos > 0:
        step = min(_CHUNK, pos)
        pos -= step
        file.seek(pos)
        found = file.read(step).rfind(b"\n")
        if found >= 0:
            return pos + found + 1
    return 0


def _cut_damaged_tail(path: Path) -> None:
    """Truncate the final line that ``read_journal`` would ignore, if there is one."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return
    except FileNotFoundError:
        return
    with open(path, "r+b") as file:
        size = file.seek(0, os.SEEK_END)
        keep = _line_start(file, size)
        if keep == size and size > 0:
            # The file ends in a newline: check the last complete line instead.
            start = _line_start(file, size - 1)
            file.seek(start)
            if _decode_line(file.read(size - 1 - start)) is not None:
                return  # whole, or of a newer format: not this writer's to judge
            keep = start
        if keep < size:
            file.truncate(keep)


def read_intact_records(path: Path) -> list[dict[str, Any]]:
    """Every record of ``path`` whose line is intact, skipping damaged ones wherever they are,
    and those of a newer format (for files that are a convenience, not a ledger); ``[]`` if
    it cannot be read."""
    try:
        raw = path.read_bytes()
    except OSError:
        return []
    return [r for r in map(_decode_line, raw.splitlines()) if isinstance(r, dict)]


#: A line's format as its canonical JSON writes it (spaces allowed, for a writer that adds them).
_FORMAT_OF_LINE = re.compile(rb'"' + FORMAT_FIELD.encode() + rb'"\s*:\s*(\d+)')


def check_line_formats(path: Path) -> None:
    """Raise ``NewerFormat`` when a line of ``path`` is of a format newer than this
    overnight's, without checking every line's checksum (``read_journal`` does): only a file
    that names a newer format anywhere is read whole, which then says which line. Reads only;
    a file that is missing or unreadable is left to its reader to report."""
    try:
        data = path.read_bytes()
    except OSError:
        return
    if any(int(found.group(1)) > LINE_FORMAT for found in _FORMAT_OF_LINE.finditer(data)):
        with contextlib.suppress(CheckpointCorrupt):
            read_journal(path)


def read_journal(path: Path) -> list[dict[str, Any]]:
    """Every complete record in ``path``, in order; ``[]`` if the file does not exist.

    A damaged final line (no trailing newline, not JSON, or a wrong ``crc``) is what a kill
    in the middle of an append leaves and is ignored. A damaged line anywhere else raises
    ``CheckpointCorrupt`` naming the line; a line of a newer format, ``NewerFormat``.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise CheckpointCorrupt(f"journal {path} unreadable: {exc}") from exc
    # The element after the last newline is b"" for a clean file, else a torn fragment.
    *lines, tail = data.split(b"\n")
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        record = _decode_line(line)
        if isinstance(record, _Newer):
            raise NewerFormat(
                f"{path} line {number}", "journal", record.fmt, LINE_FORMAT, record.by
            )
        if record is None:
            if number == len(lines) and not tail:
                break
            raise CheckpointCorrupt(f"journal {path} line {number} unreadable")
        records.append(record)
    return records
