"""The run state on disk: a snapshot (``checkpoint.json``) and a journal of what changed since
(``checkpoint.journal``).

Saving. A save appends one line to the journal holding only what changed since the previous
save (``RunState.take_delta``: the one-value fields that changed, the new items of the lists
that only grow, the queue operations, the attempts counted), so its cost does not grow with
the tasks the night has finished. When the journal has grown past the snapshot, the next save
writes the whole state as a new snapshot instead and removes the journal: each byte of state
is then rewritten at most about twice, whatever the length of the night. A state smaller than
``WHOLE_BELOW`` bytes is always written whole (its rewrite costs about what the fsync costs),
and so is the state a process saves first, and the one it saves when it closes the run: after
a normal end the snapshot alone holds the whole state.

Records. Each journal line is a ``checkpoint_delta`` with ``seq``, the number of its save
(one more than the line before); the first line of a journal also names its ``base``, the
snapshot it continues (``SnapshotId``). Lines are framed by ``overnight.store.journal``: one
write each, a CRC each, fsynced before the save returns.

Crashes. A kill in the middle of an append leaves a torn last line, which is dropped: the
state is the one of the last completed save. A new snapshot is written atomically, naming in
``replaces`` the base of the journal it folds in, and only then is that journal removed; a
kill between the two leaves a journal whose base is the new snapshot's ``replaces`` and whose
lines are all older than it: it is recognised as folded in already and not replayed. Anything
else (a damaged line before the last, a gap in the numbers, a journal continuing another
snapshot, a change that does not fit the state) is ``CheckpointCorrupt``; nothing is written
while loading, so a refused run directory is left as it was.

Formats. A snapshot or a journal line of a newer format than this overnight's is refused with
``NewerFormat`` (``overnight.store.versions``), never read as damage; a snapshot of an earlier
format is read with its journal and then lifted to the current shape
(``overnight.store.migrations``).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from overnight.core.errors import CheckpointCorrupt
from overnight.core.state import RunState, StateDelta, apply_delta
from overnight.store.checkpoint import Snapshot, SnapshotId, read_snapshot, write_snapshot
from overnight.store.journal import Journal, check_line_formats, read_journal
from overnight.store.migrations import SCHEMA_VERSION, lift

#: A state whose last size was below this is written whole at every save.
WHOLE_BELOW = 32 * 1024


class JournalEntry(BaseModel):
    """One line of the checkpoint journal: the change one save made."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["checkpoint_delta"] = "checkpoint_delta"
    seq: int
    base: SnapshotId | None = None
    """The snapshot this journal continues; on its first line only."""
    delta: StateDelta


_ENTRIES = TypeAdapter(list[JournalEntry])


def journal_path(checkpoint: Path) -> Path:
    """Where the journal of the snapshot at ``checkpoint`` lives."""
    return checkpoint.with_suffix(".journal")


#: What the last read of a journal found of its base and its last save, by the file's
#: identity on disk (inode, size, modification time): the first compaction after a load
#: needs exactly that, and a resume at 10,000 tasks would otherwise read the journal twice.
_READ: dict[Path, tuple[tuple[int, int, int], SnapshotId | None, int]] = {}


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _remember(
    path: Path, identity: tuple[int, int, int] | None, entries: list[JournalEntry]
) -> None:
    if identity is None:
        _READ.pop(path.absolute(), None)
        return
    base = entries[0].base if entries else None
    _READ[path.absolute()] = (identity, base, _newest(base, entries))


def _newest(base: SnapshotId | None, entries: list[JournalEntry]) -> int:
    """The number of a journal's last save: its last line's, or the highest when it names
    no base (such a journal is removed, its numbers only keep the next save's above it)."""
    if base is not None:
        return entries[-1].seq
    return max((e.seq for e in entries), default=0)


# -- reading -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Loaded:
    """What a load meant to be continued found on disk: a store writing the same files next
    appends to the journal instead of writing the whole state again (at 10,000 tasks, a
    tenth of a resume's time to its first lap)."""

    snapshot: SnapshotId
    snapshot_bytes: int
    snapshot_on_disk: tuple[int, int, int]
    journal_on_disk: tuple[int, int, int] | None
    journal_lines: int
    seq: int


_LOADED: dict[Path, _Loaded] = {}


def load_run_state(checkpoint: Path, *, to_continue: bool = False) -> RunState | None:
    """The run state the snapshot at ``checkpoint`` and its journal hold together; ``None``
    when there is no snapshot (nothing was saved yet). Every reader of a run's state reads it
    through here. Raises ``CheckpointCorrupt`` as the module docstring says.

    A reader beside a running night may meet a snapshot that is replaced while it reads the
    journal: it then reads both again. ``to_continue``: the caller holds the run's lock and
    will save this state next (``RunStateStore.continue_loaded``): the state as loaded counts
    as saved, so that the first save writes only what changed since."""
    for _ in range(3):
        snapshot = read_snapshot(checkpoint)
        if snapshot is None:
            if _entries(journal_path(checkpoint)):
                raise CheckpointCorrupt("the checkpoint journal has no snapshot to continue")
            return None
        journal = journal_path(checkpoint)
        identity = _identity(journal)
        try:
            entries = _entries(journal)
            if _identity(journal) == identity:
                _remember(journal, identity, entries)
            body, seq = _replayed(snapshot, entries)
        except CheckpointCorrupt:
            again = read_snapshot(checkpoint)
            if again is not None and again.id != snapshot.id:
                continue  # compacted under our feet
            raise
        try:
            state = RunState.model_validate(lift(body, snapshot.version))
        except ValidationError as exc:
            raise CheckpointCorrupt(f"checkpoint body does not fit the run state: {exc}") from exc
        state.mark_loaded(seq)
        _LOADED.pop(checkpoint.absolute(), None)
        current = snapshot.version == SCHEMA_VERSION  # a lifted body is rewritten whole
        if to_continue and current and (not entries or entries[0].base == snapshot.id):
            state.mark_saved()
            _LOADED[checkpoint.absolute()] = _Loaded(
                snapshot.id, snapshot.size, snapshot.on_disk, identity, len(entries), seq
            )
        return state
    raise CheckpointCorrupt("the checkpoint kept changing while it was read")


def check_formats(checkpoint: Path, *journals: Path) -> None:
    """Raise ``NewerFormat`` when the snapshot at ``checkpoint``, its journal or one of
    ``journals`` was written in a format newer than this overnight's; any other fault is left
    to the load to report. Reads only: called before a resume takes the run's lock."""
    with contextlib.suppress(CheckpointCorrupt):
        read_snapshot(checkpoint, keep=True)  # the load that follows reads it once
    for path in (journal_path(checkpoint), *journals):
        check_line_formats(path)


def saved_at(checkpoint: Path) -> float | None:
    """When the state was last saved (the newer of the snapshot and its journal), as a
    ``time.time()``; ``None`` when neither exists."""
    times = []
    for path in (checkpoint, journal_path(checkpoint)):
        with contextlib.suppress(OSError):
            times.append(path.stat().st_mtime)
    return max(times) if times else None


def _entries(path: Path) -> list[JournalEntry]:
    records = read_journal(path)
    try:  # all lines at once: a tenth of the cost of a resume at 10,000 tasks, else
        return _ENTRIES.validate_python(records)
    except ValidationError:
        pass
    for number, record in enumerate(records, start=1):  # which line, for the message
        try:
            JournalEntry.model_validate(record)
        except ValidationError as exc:
            raise CheckpointCorrupt(
                f"checkpoint journal line {number} is not a change of the run state: {exc}"
            ) from exc
    raise CheckpointCorrupt("the checkpoint journal is not a list of changes of the run state")


def _replayed(snapshot: Snapshot, entries: list[JournalEntry]) -> tuple[dict[str, Any], int]:
    """The snapshot's body with the journal replayed on it, and the number of its last save."""
    body = snapshot.body
    if not entries:
        return body, snapshot.id.seq
    base = entries[0].base
    if base is None:
        raise CheckpointCorrupt("the checkpoint journal does not name the snapshot it continues")
    folded = base == snapshot.replaces and entries[-1].seq < snapshot.id.seq
    if base != snapshot.id and not folded:
        raise CheckpointCorrupt(
            f"the checkpoint journal continues snapshot {base.seq} ({base.sha256[:12]}), "
            f"not this one ({snapshot.id.seq}, {snapshot.id.sha256[:12]})"
        )
    expected = base.seq + 1
    for number, entry in enumerate(entries, start=1):
        if entry.seq != expected:
            raise CheckpointCorrupt(
                f"checkpoint journal line {number} is save {entry.seq}, expected {expected}"
            )
        if number > 1 and entry.base is not None:
            raise CheckpointCorrupt(f"checkpoint journal line {number} starts another journal")
        expected += 1
    if folded:  # a compaction wrote the snapshot and was killed before removing this
        return body, snapshot.id.seq
    for number, entry in enumerate(entries, start=1):
        try:
            apply_delta(body, entry.delta)
        except ValueError as exc:
            raise CheckpointCorrupt(
                f"checkpoint journal line {number} does not fit the state: {exc}"
            ) from exc
    return body, entries[-1].seq


# -- writing -------------------------------------------------------------------------------


class RunStateStore:
    """Saves one run's state, incrementally; see the module docstring."""

    def __init__(self, checkpoint: Path, *, whole_below: int | None = None) -> None:
        self.path = checkpoint
        self.journal_path = journal_path(checkpoint)
        self.whole_below = WHOLE_BELOW if whole_below is None else whole_below
        self._journal: Journal | None = None
        self._snapshot: SnapshotId | None = None
        """The snapshot on disk as this store wrote it; None: not known (write one first)."""
        self._snapshot_bytes = 0
        self._journal_bytes = 0
        self._journal_lines = 0
        self.bytes_written = 0
        """Bytes this store wrote to the snapshot and the journal, in total."""
        self.compactions = 0

    def save(self, state: RunState) -> None:
        """Make ``state`` the one a load returns, durably: on disk when this returns.

        Raises ``DiskFull`` when there is no space left; after any failure the next save
        writes the state whole."""
        whole = (
            self._snapshot is None
            or self._journal_bytes > self._snapshot_bytes
            or self._snapshot_bytes + self._journal_bytes < self.whole_below
        )
        delta = None if whole else state.take_delta()
        if delta is None:
            self.compact(state)
            return
        if delta.is_empty():
            return
        seq = state.saved_as() + 1
        base = self._snapshot if self._journal_lines == 0 else None
        record = JournalEntry(seq=seq, base=base, delta=delta).model_dump(mode="json")
        try:
            if self._journal is None:
                self._journal = Journal(self.journal_path, durable=True)
            self._journal.append(record)
            if self._journal_lines == 0:
                _fsync_dir(self.path.parent)  # a new file: its name must survive a crash too
            size = self.journal_path.stat().st_size
        except BaseException:
            self._forget_disk()
            raise
        self.bytes_written += size - self._journal_bytes
        self._journal_bytes = size
        self._journal_lines += 1
        state.note_saved_as(seq)

    def continue_loaded(self, state: RunState) -> None:
        """Go on from where ``load_run_state(to_continue=True)`` found the files, when they are
        still as it found them and ``state`` is the one it returned: the next save appends to
        the journal. Otherwise nothing: the next save writes the state whole."""
        found = _LOADED.pop(self.path.absolute(), None)
        if found is None or self._snapshot is not None or state.saved_as() != found.seq:
            return
        try:
            on_disk = _identity(self.path)
        except OSError:
            return
        if on_disk != found.snapshot_on_disk or _identity(self.journal_path) != (
            found.journal_on_disk
        ):
            return
        self._snapshot, self._snapshot_bytes = found.snapshot, found.snapshot_bytes
        self._journal_lines = found.journal_lines
        self._journal_bytes = found.journal_on_disk[1] if found.journal_on_disk else 0

    def compact(self, state: RunState) -> None:
        """Write ``state`` whole as a new snapshot and remove the journal it replaces."""
        body = state.model_dump(mode="json")
        if self._snapshot is None:
            replaces, newest = self._journal_on_disk()
        else:
            replaces = self._snapshot if self._journal_lines else None
            newest = state.saved_as()
        seq = max(state.saved_as(), newest) + 1
        self.close()
        try:
            identity, size = write_snapshot(self.path, body, seq=seq, replaces=replaces)
            self._snapshot, self._snapshot_bytes = identity, size
            self.bytes_written += size
            self._remove_journal()
        except BaseException:
            self._forget_disk()
            raise
        self._journal_bytes = self._journal_lines = 0
        self.compactions += 1
        state.mark_saved(body)
        state.note_saved_as(seq)

    def close(self) -> None:
        if self._journal is not None:
            journal, self._journal = self._journal, None
            journal.close()

    def _forget_disk(self) -> None:
        self.close()
        self._snapshot = None

    def _journal_on_disk(self) -> tuple[SnapshotId | None, int]:
        """The base of the journal on disk and the number of its last save. A journal that
        names no base, or cannot be read, continues nothing a snapshot could name: it is
        removed before the new snapshot is written. A journal unchanged since a load read it
        is not read again."""
        known = _READ.get(self.journal_path.absolute())
        if known is not None and known[0] == _identity(self.journal_path):
            base, newest = known[1], known[2]
        else:
            try:
                entries = _entries(self.journal_path)
            except CheckpointCorrupt:
                entries = []
            base = entries[0].base if entries else None
            newest = _newest(base, entries)
        if base is not None:
            return base, newest
        self._remove_journal()
        return None, newest

    def _remove_journal(self) -> None:
        try:
            os.unlink(self.journal_path)
        except FileNotFoundError:
            return
        _fsync_dir(self.path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
