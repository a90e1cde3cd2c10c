"""Every run this machine has started, wherever its directory is: ``$OVERNIGHT_HOME/runs.jsonl``.

One framed JSON line per run, appended when the run directory is created. It lets a run id
stand wherever a run directory is asked for, ``overnight list`` show them all, and
``overnight review`` see runs made with ``--run-dir`` or by the demo. A line that cannot be
read is skipped (the index is a convenience; each run directory stays its own record).

At every ending a second line, ``kind`` ``workload``, carries the run's workload facts
(``overnight.night.workload``): what ``overnight estimate`` learns a night's cost from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overnight.core.errors import ConfigError
from overnight.store.journal import Journal, read_intact_records
from overnight.store.rundir import RunDir, holder_pid, is_locked, overnight_home


@dataclass(frozen=True)
class IndexedRun:
    run_id: str
    path: Path
    workspace: str
    created_at: str


def index_path() -> Path:
    return overnight_home() / "runs.jsonl"


def register(run_id: str, path: Path, workspace: str, created_at: str) -> None:
    """Add a run to the index (best effort: a run never fails for its index)."""
    target = index_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        journal = Journal(target, durable=False)
        try:
            journal.append(
                {
                    "kind": "run",
                    "run_id": run_id,
                    "path": str(Path(path).absolute()),
                    "workspace": workspace,
                    "created_at": created_at,
                }
            )
        finally:
            journal.close()
    except OSError:
        pass


def record_workload(run_id: str, facts: dict[str, Any]) -> None:
    """Add a run's workload facts to the index (best effort, like ``register``)."""
    target = index_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        journal = Journal(target, durable=False)
        try:
            journal.append({"kind": "workload", "run_id": run_id, "facts": facts})
        finally:
            journal.close()
    except OSError:
        pass


def workload_records() -> dict[str, dict[str, Any]]:
    """Every run's latest recorded workload facts, by run id (unread and unchecked)."""
    found: dict[str, dict[str, Any]] = {}
    for r in read_intact_records(index_path()):
        if r.get("kind") == "workload" and isinstance(r.get("facts"), dict):
            found[str(r.get("run_id"))] = r["facts"]
    return found


def _records(path: Path) -> list[dict[str, Any]]:
    return [r for r in read_intact_records(path) if r.get("kind") == "run"]


def indexed_runs() -> list[IndexedRun]:
    """Every indexed run, oldest first, one entry per run id (the last line wins)."""
    runs: dict[str, IndexedRun] = {}
    for r in _records(index_path()):
        try:
            run = IndexedRun(
                str(r["run_id"]), Path(str(r["path"])), str(r["workspace"]), str(r["created_at"])
            )
        except KeyError:
            continue
        runs.pop(run.run_id, None)
        runs[run.run_id] = run
    return list(runs.values())


def running_on(workspace: Path) -> list[tuple[IndexedRun, int | None]]:
    """The indexed runs on ``workspace`` that a live process is driving now (its lock is
    held), each with that process's pid when it is known."""
    same = str(workspace.resolve())
    found: list[tuple[IndexedRun, int | None]] = []
    for run in indexed_runs():
        try:
            if str(Path(run.workspace).resolve()) != same:
                continue
            rd = RunDir(run.path)
            if rd.is_run() and is_locked(rd):
                found.append((run, holder_pid(rd)))
        except OSError:
            continue
    return found


#: What a user types for the latest run (also what a RUN argument left out stands for).
LATEST = "latest"


def latest_run() -> Path:
    """The run started last on this machine whose directory is still there: the one
    ``overnight status`` (and report, pr, audit, resume) means when no run is named. A
    ``ConfigError`` when there is none, or when several runs are being driven now (which
    one is meant is then the user's to say)."""
    runs = [r for r in indexed_runs() if RunDir(r.path).is_run()]
    if not runs:
        raise ConfigError("RUN", "no run has been started on this machine yet", "start one")
    running = [r for r in runs if is_locked(RunDir(r.path))]
    if len(running) > 1:
        ids = ", ".join(r.run_id for r in running[-5:])
        raise ConfigError(
            "RUN",
            f"{len(running)} runs are running now ({ids}): which is the latest is not clear",
            "name one: a run id from `overnight list`, or its directory",
        )
    if running:
        return running[0].path
    # created_at is to the second; the index is in the order the runs started, so of runs
    # started within one second the one indexed last is the latest
    return max(reversed(runs), key=lambda r: r.created_at).path


def resolve_run(given: str | Path) -> Path:
    """A run directory from what a user typed: a run directory, a run id (or the unique
    start of one) from the index, or ``latest``."""
    path = Path(given)
    if RunDir(path).is_run():
        return path
    text = str(given)
    if text == LATEST:
        return latest_run()
    matches = [r for r in indexed_runs() if r.run_id == text]
    if not matches and len(text) >= 4 and "/" not in text:
        matches = [r for r in indexed_runs() if r.run_id.startswith(text)]
    if len(matches) == 1:
        found = matches[0].path
        if RunDir(found).is_run():
            return found
        raise ConfigError(
            "RUN", f"run {matches[0].run_id} was at {found}, which is gone", "see `overnight list`"
        )
    if len(matches) > 1:
        ids = ", ".join(r.run_id for r in matches[:5])
        raise ConfigError("RUN", f"{text!r} names several runs ({ids})", "give more of the id")
    raise ConfigError(
        "RUN",
        f"{text} is neither an overnight run directory nor a known run id",
        "pass a run directory, or an id from `overnight list`",
    )
