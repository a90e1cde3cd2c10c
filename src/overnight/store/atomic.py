"""One durable, atomic file write for everything the run keeps whole (the checkpoint,
result.json, spec.json): a temporary file in the same directory, fsync, rename over the real
name, fsync of the directory. A kill at any instant leaves the old file or the new one, whole,
and at worst a stray temporary file."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, cast

from overnight.core.errors import DiskFull


def write_atomic(path: Path, data: bytes, what: str = "file") -> None:
    """Replace ``path`` with ``data``. A full disk raises ``DiskFull`` (naming ``what``);
    any other failure propagates unchanged. No temporary file is left behind."""
    directory = path.parent
    try:
        fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        _raise_translated(exc, path, what)
        raise
    try:
        with open(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException as exc:
        # After a successful replace the temporary name no longer exists; nothing to remove.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        if isinstance(exc, OSError):
            _raise_translated(exc, path, what)
        raise


def _raise_translated(exc: OSError, path: Path, what: str) -> None:
    if exc.errno == errno.ENOSPC:
        raise DiskFull(f"cannot write {what} {path}: no space left on device") from exc


_FLAGS = {
    "ab": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "w+b": os.O_RDWR | os.O_CREAT | os.O_TRUNC,
}


def open_private(path: Path, mode: str, buffering: int = -1) -> BinaryIO:
    """Open ``path`` for binary writing (``ab``, ``wb`` or ``w+b``); a file this creates is
    readable by its owner only (0600): run files hold prompts, outputs and spend."""
    fd = os.open(path, _FLAGS[mode], 0o600)
    return cast(BinaryIO, os.fdopen(fd, mode, buffering=buffering))


def private_dir(path: Path) -> Path:
    """Create ``path`` (and its missing parents) if needed; a directory this creates is the
    owner's only (0700)."""
    if not path.is_dir():
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path, 0o700)
    return path
