"""What a checkpoint save costs against the fsync floor of the same bytes.

A state of ``tasks`` tasks, half finished, goes through laps as a night makes them (three
saves a lap: IN_PROGRESS, the task's outcome, the predicate's); each save is timed, and so is
the floor: appending as many bytes to a file and fsyncing it. The journal's append is what a
lap pays; the snapshot it is folded into now and then is amortised over the saves between two
of them (about the snapshot's size divided by a save's). The whole rewrite every save made
before is measured the same way, for comparison.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overnight.core.state import RunState
from overnight.core.tasks import CommandRun, Task
from overnight.store.checkpoint import save_checkpoint
from overnight.store.run_state import RunStateStore


def state_of(tasks: int) -> RunState:
    """A run state of ``tasks`` tasks, half of them finished."""
    state = RunState(
        run_id="bench",
        goal_text="Append one line per task.",
        goal_sha="0" * 64,
        branch="overnight/bench",
        base_commit="b" * 40,
        queue=[
            Task(id=f"t{n}", title=f"task {n}", command=f"echo {n} >> f.txt", verify="true")
            for n in range(tasks)
        ],
    )
    for _ in range(tasks // 2):
        finish_one(state)
    return state


def finish_one(state: RunState) -> None:
    task = state.start_lap()
    attempt = state.start_task(task)
    run = CommandRun(exit_code=0, seconds=0.002, log=f"artifacts/{task.id}.{attempt}.log")
    state.finish_done(task, "c" * 40, attempt, "exit 0: ", command=run)


def fsync_floor(path: Path, sizes: list[int]) -> float:
    """Seconds to append and fsync ``sizes`` bytes, one write each, to a file kept open."""
    total = 0.0
    with open(path, "ab", buffering=0) as file:
        for size in sizes:
            data = b"x" * size
            start = time.perf_counter()
            file.write(data)
            os.fsync(file.fileno())
            total += time.perf_counter() - start
    return total


def whole_floor(path: Path, size: int, times: int) -> float:
    """Seconds to write and fsync a new file of ``size`` bytes, ``times`` times."""
    total = 0.0
    data = b"x" * size
    for _ in range(times):
        start = time.perf_counter()
        with open(path, "wb", buffering=0) as file:
            file.write(data)
            os.fsync(file.fileno())
        total += time.perf_counter() - start
    return total


@dataclass(frozen=True)
class SaveFigures:
    tasks: int
    saves: int
    bytes_per_save: float
    seconds_per_save: float
    floor_per_save: float
    snapshot_bytes: int
    compaction_seconds: float
    compaction_floor: float
    whole_rewrite_seconds: float
    whole_rewrite_floor: float

    @property
    def amortised_seconds(self) -> float:
        every = self.snapshot_bytes / self.bytes_per_save
        return self.seconds_per_save + self.compaction_seconds / every

    @property
    def amortised_floor(self) -> float:
        every = self.snapshot_bytes / self.bytes_per_save
        return self.floor_per_save + self.compaction_floor / every

    def as_json(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks,
            "saves": self.saves,
            "bytes_per_save": round(self.bytes_per_save, 1),
            "ms_per_save": round(self.seconds_per_save * 1e3, 4),
            "fsync_floor_ms": round(self.floor_per_save * 1e3, 4),
            "ratio": round(self.seconds_per_save / self.floor_per_save, 2),
            "snapshot_bytes": self.snapshot_bytes,
            "compaction_ms": round(self.compaction_seconds * 1e3, 3),
            "compaction_floor_ms": round(self.compaction_floor * 1e3, 3),
            "amortised_ms_per_save": round(self.amortised_seconds * 1e3, 4),
            "amortised_floor_ms": round(self.amortised_floor * 1e3, 4),
            "amortised_ratio": round(self.amortised_seconds / self.amortised_floor, 2),
            "whole_rewrite_ms": round(self.whole_rewrite_seconds * 1e3, 3),
            "whole_rewrite_floor_ms": round(self.whole_rewrite_floor * 1e3, 3),
            "whole_rewrite_ratio": round(self.whole_rewrite_seconds / self.whole_rewrite_floor, 2),
        }


def measure(scratch: Path, tasks: int, laps: int) -> SaveFigures:
    where = scratch / f"saves-{tasks}"
    where.mkdir(parents=True)
    checkpoint = where / "checkpoint.json"
    state = state_of(tasks)
    store = RunStateStore(checkpoint, whole_below=0)
    store.save(state)  # a process's first save: whole
    sizes: list[int] = []
    spent = 0.0

    def save() -> None:
        nonlocal spent
        before = store.bytes_written, store.compactions
        start = time.perf_counter()
        store.save(state)
        spent += time.perf_counter() - start
        if store.compactions != before[1]:
            raise RuntimeError("a compaction came during the measured saves: take fewer laps")
        sizes.append(store.bytes_written - before[0])

    for _ in range(laps):
        task = state.start_lap()
        attempt = state.start_task(task)
        state.seconds_used += 0.01
        save()
        run = CommandRun(exit_code=0, seconds=0.002, log=f"artifacts/{task.id}.{attempt}.log")
        state.finish_done(task, "c" * 40, attempt, "exit 0: ", command=run)
        state.seconds_used += 0.01
        save()
        state.goal_met = False
        state.seconds_used += 0.01
        save()
    floor = fsync_floor(where / "floor.bin", sizes)

    start = time.perf_counter()
    store.compact(state)
    compaction = time.perf_counter() - start
    snapshot_bytes = checkpoint.stat().st_size
    compaction_floor = whole_floor(where / "floor-whole.bin", snapshot_bytes, 1)

    rewrites = 5
    start = time.perf_counter()
    for _ in range(rewrites):
        save_checkpoint(where / "whole.json", state.model_dump(mode="json"))
    whole = (time.perf_counter() - start) / rewrites
    whole_size = (where / "whole.json").stat().st_size
    whole_fl = whole_floor(where / "floor-whole.bin", whole_size, rewrites) / rewrites
    return SaveFigures(
        tasks=tasks,
        saves=len(sizes),
        bytes_per_save=sum(sizes) / len(sizes),
        seconds_per_save=spent / len(sizes),
        floor_per_save=floor / len(sizes),
        snapshot_bytes=snapshot_bytes,
        compaction_seconds=compaction,
        compaction_floor=compaction_floor,
        whole_rewrite_seconds=whole,
        whole_rewrite_floor=whole_fl,
    )
