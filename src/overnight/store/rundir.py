"""The run directory: its layout, its lock, and atomic JSON files.

RUN_DIR/run.json         what the run is (write-once): id, goal hash, branch, workspace
RUN_DIR/spec.json        the validated spec, as the run uses it (budgets may be raised)
RUN_DIR/checkpoint.json  the framed, checksummed state
RUN_DIR/spend.jsonl      the money journal (fsync'd before every call)
RUN_DIR/trace.jsonl      one line per model call, tool call and decision
RUN_DIR/result.json      the terminal result, once the run has ended
RUN_DIR/artifacts/       command logs, patches of parked tasks
RUN_DIR/worktree/        the git worktree on branch overnight/<run-id>
RUN_DIR/checkout/        a clean checkout of the commit being verified (verify, predicate)
RUN_DIR/command.pgid     the process group of the command running now (gone between commands)
RUN_DIR/outage.json      the model outage going on now (gone once a call gets through)
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from overnight.core.errors import RunBusy
from overnight.core.text import json_text
from overnight.store.atomic import open_private, write_atomic

#: Freed when a write fails for lack of space, so that result.json can still be written.
DISK_RESERVE_BYTES = 1 << 20

#: What a run directory holds, in the order a person reads it: ``(name, what it is)``, a
#: directory's name ending in ``/``. The reference's run-directory page is written from it,
#: and a test holds it to the paths ``RunDir`` names.
LAYOUT: tuple[tuple[str, str], ...] = (
    (
        "run.json",
        "what the run is: its id, the goal's hash, the branch, the workspace, the "
        "provider and where the model came from, and the overnight that created it (written once)",
    ),
    ("spec.json", "the validated spec the run uses (a resume may raise its budgets)"),
    (
        "checkpoint.json",
        "the state, framed with a SHA-256 and a schema version, replaced "
        "atomically at every checkpoint",
    ),
    (
        "checkpoint.journal",
        "the lines written between two checkpoints, each framed and checksummed",
    ),
    (
        "spend.jsonl",
        "the money journal: every reservation (fsync'd before its call) and what "
        "each attempt was booked at",
    ),
    ("trace.jsonl", "one line per model call, tool call and decision"),
    (
        "answers.jsonl",
        "every model answer in full, with the request it answered: what "
        "`overnight replay` answers from",
    ),
    (
        "outage.json",
        "the model outage going on now, while a call is being retried (removed "
        "once a call gets through)",
    ),
    (
        "gates.json",
        "the findings of the spec's [[gates]] on the base commit and on each landed commit "
        "(only when the spec has gates)",
    ),
    ("result.json", "the terminal result, once the run has ended"),
    ("history/", "the results of earlier endings of a resumed run (`result-1.json`, ...)"),
    ("report.html", "the morning report, once `overnight report RUN --html` has run"),
    ("pull-request.md", "the pull request's body, once `overnight pr RUN` has run"),
    ("effects.sqlite", "the effects ledger, unless `[effects] database` names a shared one"),
    (
        "artifacts/",
        "command and verify logs, long outputs, patches of parked tasks (referenced by path)",
    ),
    (
        "worktree/",
        "the git worktree on `overnight/<run-id>` (removed once the night has ended "
        "and cannot be resumed; the branch stays)",
    ),
    (
        "checkout/",
        "the clean checkout of the commit being judged, where verify and the goal predicate run",
    ),
    (
        "lock",
        "held by the process driving the run; the kernel releases it when that process "
        "dies, kill -9 included",
    ),
    ("command.pgid", "the process group of the command running now (gone between commands)"),
    (
        ".disk-reserve",
        "one megabyte set aside at the start and freed if the disk fills, so "
        "that result.json can still be written",
    ),
)


def overnight_home() -> Path:
    """``$OVERNIGHT_HOME``, default ``~/.overnight``: where runs and the review queue live."""
    home = os.environ.get("OVERNIGHT_HOME")
    return Path(home).expanduser().absolute() if home else Path.home() / ".overnight"


def default_runs_root() -> Path:
    """Where a run's directory is made when none is named: ``$OVERNIGHT_HOME/runs``."""
    return overnight_home() / "runs"


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = path

        self.manifest = path / "run.json"
        self.spec = path / "spec.json"
        self.checkpoint = path / "checkpoint.json"
        self.spend = path / "spend.jsonl"
        self.trace = path / "trace.jsonl"
        self.result = path / "result.json"
        self.artifacts = path / "artifacts"
        self.worktree = path / "worktree"
        self.checkout = path / "checkout"
        self.history = path / "history"
        self.lockfile = path / "lock"
        self.disk_reserve = path / ".disk-reserve"
        self.command_group = path / "command.pgid"
        self.outage = path / "outage.json"
        self.gates = path / "gates.json"

    def is_run(self) -> bool:
        return self.manifest.exists() and self.spec.exists()

    def write_disk_reserve(self) -> None:
        with open_private(self.disk_reserve, "wb") as f:
            f.write(b"\0" * DISK_RESERVE_BYTES)
            f.flush()
            os.fsync(f.fileno())

    def free_disk_reserve(self) -> bool:
        try:
            self.disk_reserve.unlink()
            return True
        except FileNotFoundError:
            return False


def write_json_atomic(path: Path, data: Any) -> None:
    """``data`` as indented JSON, written whole or not at all (see ``write_atomic``); bidi
    controls in its strings are written as escapes (``json_text``)."""
    body = json_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)) + "\n"
    write_atomic(path, body.encode("utf-8"), path.name)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


class RunLock:
    """An exclusive lock on a run directory held for the life of the process that drives it.

    The kernel drops it when the process dies, kill -9 included, so a stale lock never blocks
    a resume.
    """

    def __init__(self, run_dir: RunDir) -> None:
        self.run_dir = run_dir
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.run_dir.lockfile, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = holder_pid(self.run_dir)
            raise RunBusy(
                "RUN_DIR",
                f"{self.run_dir.path} is being driven by another process (pid {pid})",
                "wait for it to end, or stop it with SIGTERM and resume",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def holder_pid(run_dir: RunDir) -> int | None:
    try:
        return int(run_dir.lockfile.read_text().strip() or "0") or None
    except (OSError, ValueError):
        return None


def is_locked(run_dir: RunDir) -> bool:
    """Is a live process driving this run? (Probes the lock without taking it for long.)"""
    if not run_dir.lockfile.exists():
        return False
    fd = os.open(run_dir.lockfile, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
