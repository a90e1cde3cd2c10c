"""How long ``overnight resume`` takes, after a kill -9, until its first lap starts.

A night of ``tasks`` command tasks is started and killed (SIGKILL to its whole process group)
once it has run a tenth of them; ``overnight resume`` is then started, and the time until the
trace shows its first lap (the task in flight verified, the predicate run, the next task
started) is the figure. The resumed process is killed there: what follows is a night like any
other.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.laps import make_repo, overnight, write_spec


@dataclass(frozen=True)
class ResumeFigures:
    tasks: int
    killed_after_laps: int
    seconds_to_first_lap: float
    state_files_bytes: int
    """The snapshot and its journal as the kill left them."""


def _start(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        args,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class TraceTail:
    """Reads the trace as it grows, whole lines only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.rest = b""

    def new_records(self) -> list[dict[str, object]]:
        try:
            with open(self.path, "rb") as file:
                file.seek(self.offset)
                data = file.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        *lines, self.rest = (self.rest + data).split(b"\n")
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


def _is_lap_start(record: dict[str, object]) -> bool:
    return record.get("kind") == "task" and record.get("event") == "started"


def measure(
    scratch: Path, tasks: int, env: dict[str, str], timeout_s: float = 1800
) -> ResumeFigures:
    where = scratch / f"resume-{tasks}"
    repo = make_repo(where / "repo", env)
    spec = write_spec(where / "night.toml", repo, tasks)
    run = where / "RUN"
    kill_after = max(5, tasks // 10)
    night = _start(overnight("run", spec, "--run-dir", run, "--quiet"), env, where)
    tail = TraceTail(run / "trace.jsonl")
    laps = 0
    deadline = time.monotonic() + timeout_s
    try:
        while laps < kill_after:
            if night.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the night ended before {kill_after} laps")
            laps += sum(_is_lap_start(r) for r in tail.new_records())
            time.sleep(0.005)
    finally:
        _kill(night)
    state_bytes = sum(
        p.stat().st_size
        for p in (run / "checkpoint.json", run / "checkpoint.journal")
        if p.exists()
    )
    tail.new_records()  # skip what the killed process wrote
    start = time.monotonic()
    resumed = _start(overnight("resume", run, "--quiet"), env, where)
    try:
        seen_resumed = False
        while True:
            if resumed.poll() is not None or time.monotonic() > start + timeout_s:
                raise RuntimeError("the resume ended before its first lap")
            for record in tail.new_records():
                seen_resumed = seen_resumed or record.get("decision") == "resumed"
                if seen_resumed and _is_lap_start(record):
                    return ResumeFigures(tasks, laps, time.monotonic() - start, state_bytes)
            time.sleep(0.002)
    finally:
        _kill(resumed)
