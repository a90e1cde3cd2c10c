"""The checkpoint snapshot: one JSON file holding a whole run state.

A running night does not rewrite it on every save: ``overnight.store.run_state`` appends what
changed to a journal beside it and folds the journal into a new snapshot from time to time.
This module is the snapshot file alone.

Writing. The new checkpoint is written in full to a temporary file in the same directory,
flushed and fsynced, and only then renamed over the real name. ``os.replace`` within one
file system is atomic: the real name points either at the old complete file or at the new
complete file, never at a half-written one. A kill -9 (or a power cut, once the data and the
directory entry are fsynced) in the middle of a save therefore leaves at worst a stray
temporary file, while the checkpoint under its real name stays whole. The temporary file has
to live in the same directory because a rename across file systems is a copy, which is not
atomic. The directory is fsynced after the rename so that the rename itself survives a crash.

Reading. The body is stored as a string next to the SHA-256 of its UTF-8 bytes. The
checksum catches what happens to the bytes after they were committed: a disk or copy that
flips or drops bytes, a file truncated by hand or by a tool, an editor that saved half of
it. It cannot catch a body that was already wrong when it was serialized: a bug that saves
an empty queue saves it with a perfectly valid checksum. Checking that the content makes
sense is the job of whoever reads the body, not of this frame.

Identity. The frame also carries ``seq``, the number of the save the snapshot holds (saves
are numbered along the run), and ``replaces``, the identity (``seq`` and checksum) of the
snapshot it took the place of: a journal names the snapshot it continues by that identity.

Versions. The frame names the format of its body (``schema_version``) and the overnight that
wrote it (``written_by``). A format newer than this overnight's is refused with
``NewerFormat`` (a usage error: upgrade), checked before anything else in the frame, whose
other fields the newer format may have changed; an earlier format is read and its body lifted
to the current shape by ``overnight.store.migrations``.

Every way the file itself can be wrong is reported as ``CheckpointCorrupt`` with a detail
naming the check that failed; a missing file is not an error (there is nothing to resume).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from overnight.core.errors import CheckpointCorrupt
from overnight.store.atomic import write_atomic
from overnight.store.migrations import READABLE_VERSIONS, SCHEMA_VERSION
from overnight.store.versions import WRITTEN_BY, NewerFormat

__all__ = [
    "KIND",
    "READABLE_VERSIONS",
    "SCHEMA_VERSION",
    "Snapshot",
    "SnapshotId",
    "load_checkpoint",
    "read_snapshot",
    "save_checkpoint",
    "snapshot_id",
    "write_snapshot",
]

#: The ``kind`` field of every checkpoint frame.
KIND = "overnight-checkpoint"

_FRAME_KEYS = ("kind", "schema_version", "sha256", "body")


@dataclass(frozen=True)
class SnapshotId:
    """Which snapshot a journal continues: its save number and the checksum of its body."""

    seq: int
    sha256: str

    def as_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "sha256": self.sha256}


@dataclass(frozen=True)
class Snapshot:
    body: dict[str, Any]
    """As stored, in the format ``version``."""
    id: SnapshotId
    replaces: SnapshotId | None
    size: int
    """Bytes of the file."""
    version: int
    on_disk: tuple[int, int, int] = (0, 0, 0)
    """The file's inode, size and modification time when it was read."""


def _digest(text: str) -> str:
    # surrogatepass: a frame read from disk may carry an escaped lone surrogate; it must then
    # fail the checksum comparison rather than raise UnicodeEncodeError.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def save_checkpoint(
    path: Path, body: dict[str, Any], *, seq: int = 0, replaces: SnapshotId | None = None
) -> SnapshotId:
    """Write ``body`` to ``path`` atomically and durably, as save number ``seq``; return its
    identity.

    Raises ``DiskFull`` when the file system has no space left; any other failure propagates
    unchanged. In every case no temporary file is left behind and ``path`` still holds the
    previous checkpoint (or nothing) unless the rename completed.
    """
    return write_snapshot(path, body, seq=seq, replaces=replaces)[0]


def write_snapshot(
    path: Path, body: dict[str, Any], *, seq: int, replaces: SnapshotId | None
) -> tuple[SnapshotId, int]:
    """``save_checkpoint``, returning the bytes written as well."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False)
    identity = SnapshotId(seq, _digest(text))
    frame = {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "written_by": WRITTEN_BY,
        "sha256": identity.sha256,
        "seq": seq,
        "replaces": replaces.as_json() if replaces else None,
        "body": text,
    }
    data = json.dumps(frame, sort_keys=True, ensure_ascii=False).encode("utf-8")
    write_atomic(path, data, "checkpoint")
    return identity, len(data)


def load_checkpoint(path: Path) -> dict[str, Any] | None:
    """The body of the snapshot at ``path`` as stored (without its journal: a whole state
    only when the run was closed normally); ``None`` if there is none. Raises as
    ``read_snapshot``."""
    snapshot = read_snapshot(path)
    return None if snapshot is None else snapshot.body


#: The snapshot a ``read_snapshot(keep=True)`` read, by the file's identity on disk, for the
#: next read of the same unchanged file to take instead of parsing megabytes again (a resume
#: checks the formats, then loads). Taken once: a load replays its journal into the body.
_kept: tuple[Path, tuple[int, int, int], Snapshot] | None = None
_kept_lock = threading.Lock()


def read_snapshot(path: Path, *, keep: bool = False) -> Snapshot | None:
    """Read and verify the snapshot at ``path``; ``None`` if there is none.

    Raises ``NewerFormat`` when the frame is of a newer format than this overnight's, and
    ``CheckpointCorrupt`` when the file is unreadable or not a checkpoint frame, when the body
    fails its checksum, when the frame has another kind or a schema version this overnight
    never wrote, or when the body is not a JSON object.
    """
    global _kept
    with _kept_lock:
        kept, _kept = _kept, None
    try:
        with open(path, "rb") as file:
            st = os.fstat(file.fileno())
            identity = (st.st_ino, st.st_size, st.st_mtime_ns)
            if kept is not None and kept[0] == path.absolute() and kept[1] == identity:
                return kept[2]
            raw = file.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointCorrupt(f"checkpoint unreadable: {exc}") from exc
    snapshot = replace(_verified(path, raw), on_disk=identity)
    if keep:
        with _kept_lock:
            _kept = (path.absolute(), identity, snapshot)
    return snapshot


def _verified(path: Path, raw: bytes) -> Snapshot:
    try:
        frame = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        # ValueError covers both JSONDecodeError and UnicodeDecodeError.
        raise CheckpointCorrupt(f"checkpoint unreadable: {exc}") from exc
    if not isinstance(frame, dict):
        raise CheckpointCorrupt(
            f"checkpoint unreadable: expected a frame object, found {type(frame).__name__}"
        )
    _refuse_newer(path, frame)
    missing = [key for key in _FRAME_KEYS if key not in frame]
    if missing:
        raise CheckpointCorrupt(f"checkpoint unreadable: frame lacks {', '.join(missing)}")

    kind, version = frame["kind"], frame["schema_version"]
    # bool is an int subclass and True == 1; a frame saying ``true`` is not version 1.
    version_ok = type(version) is int and version in READABLE_VERSIONS
    if kind != KIND:
        raise CheckpointCorrupt(
            f"checkpoint kind {kind!r} is not {KIND!r}: "
            f"checkpoint schema version {version!r}, this overnight reads {SCHEMA_VERSION}"
        )
    if not version_ok:
        raise CheckpointCorrupt(
            f"checkpoint schema version {version!r}, this overnight reads {SCHEMA_VERSION}"
        )

    text, checksum = frame["body"], frame["sha256"]
    if not isinstance(text, str) or not isinstance(checksum, str):
        raise CheckpointCorrupt("checkpoint unreadable: body and sha256 must be strings")
    if _digest(text) != checksum:
        raise CheckpointCorrupt("checkpoint checksum mismatch")
    seq = frame.get("seq", 0)
    replaces = snapshot_id(frame.get("replaces"))
    if type(seq) is not int or seq < 0 or (frame.get("replaces") is not None and not replaces):
        raise CheckpointCorrupt("checkpoint unreadable: seq or replaces is not a snapshot number")

    try:
        body = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CheckpointCorrupt(f"checkpoint body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise CheckpointCorrupt(
            f"checkpoint body is not a JSON object, found {type(body).__name__}"
        )
    return Snapshot(body, SnapshotId(seq, checksum), replaces, len(raw), version)


def _refuse_newer(path: Path, frame: dict[str, Any]) -> None:
    version = frame.get("schema_version")
    # bool is an int subclass: a frame saying ``true`` is damaged, not of a newer format.
    if frame.get("kind") == KIND and type(version) is int and version > SCHEMA_VERSION:
        raise NewerFormat(str(path), "checkpoint", version, SCHEMA_VERSION, frame.get("written_by"))


def snapshot_id(value: object) -> SnapshotId | None:
    """The identity written as ``{"seq": N, "sha256": "..."}``; None for anything else."""
    if not isinstance(value, dict):
        return None
    seq, sha = value.get("seq"), value.get("sha256")
    if type(seq) is not int or not isinstance(sha, str):
        return None
    return SnapshotId(seq, sha)
