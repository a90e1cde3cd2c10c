"""Nights of command tasks, and the plain loop of the same processes they are measured
against.

Every task appends a line to a file of a scratch repository (``echo N >> f.txt``) and its
verify is ``true``; the goal predicate is ``false``, so the night runs every task. The plain
loop runs, per iteration, the same three commands (task, verify, predicate) and one
``git add -A`` + ``git commit`` in a repository of its own: what a night of N tasks cannot do
with less. What a lap costs beyond that is the harness's overhead.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

IDENT = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]


def env_for(scratch: Path) -> dict[str, str]:
    """The environment of every process the benchmark starts: no user config, no real home."""
    env = dict(os.environ)
    env["OVERNIGHT_HOME"] = str(scratch / "home")
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    return env


def git(repo: Path, *args: str, env: dict[str, str]) -> None:
    subprocess.run(
        ["git", "-C", str(repo), *IDENT, *args],
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def make_repo(path: Path, env: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main", env=env)
    (path / "f.txt").write_text("start\n")
    git(path, "add", "-A", env=env)
    git(path, "commit", "-q", "-m", "initial", env=env)
    return path


def command(n: int) -> str:
    return f"echo {n} >> f.txt"


VERIFY = "true"
PREDICATE = "false"


def toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string


def write_spec(path: Path, repo: Path, tasks: int, *, sleep_s: float = 0.0) -> Path:
    """A night of ``tasks`` command tasks on ``repo``; ``sleep_s`` makes each take longer."""
    lines = [
        f"goal = {toml_string('Append one line per task.')}",
        f"workspace = {toml_string(str(repo))}",
        "",
        "[budget]",
        "usd = 1.0",
        "hours = 100.0",
        "",
        "[predicate]",
        f"command = {toml_string(PREDICATE)}",
        "timeout_s = 60",
    ]
    for n in range(tasks):
        body = command(n) if not sleep_s else f"sleep {sleep_s}; {command(n)}"
        lines += [
            "",
            "[[tasks]]",
            f'id = "t{n}"',
            f'title = "task {n}"',
            f"command = {toml_string(body)}",
            f"verify = {toml_string(VERIFY)}",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def overnight(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "overnight", *(str(a) for a in args)]


@dataclass(frozen=True)
class Finished:
    exit_code: int
    seconds: float
    max_rss_bytes: int


def run_to_end(args: list[str], env: dict[str, str], cwd: Path) -> Finished:
    """Run a process to its end; its own peak resident memory from ``wait4``."""
    start = time.monotonic()
    proc = subprocess.Popen(
        args,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    # ru_maxrss is in kilobytes on Linux.
    return Finished(proc.returncode, time.monotonic() - start, usage.ru_maxrss * 1024)


def trace_records(run: Path) -> list[dict[str, Any]]:
    out = []
    for line in (run / "trace.jsonl").read_bytes().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def lap_starts(records: list[dict[str, Any]]) -> list[float]:
    """The night's clock at the start of each lap (a task's first attempt)."""
    return [
        float(r["t"])
        for r in records
        if r.get("kind") == "task" and r.get("event") == "started" and r.get("attempt") == 1
    ]


@dataclass(frozen=True)
class PerLap:
    mean_s: float
    median_s: float
    laps: int


def per_lap(starts: list[float]) -> PerLap:
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    return PerLap((starts[-1] - starts[0]) / len(gaps), median(gaps), len(gaps) + 1)


@dataclass(frozen=True)
class NightRun:
    laps: PerLap
    max_rss_bytes: int
    exit_code: int
    checkpoint_bytes: int


def night(scratch: Path, tasks: int, env: dict[str, str]) -> NightRun:
    """Run a night of ``tasks`` command tasks to its end."""
    where = scratch / f"night-{tasks}"
    repo = make_repo(where / "repo", env)
    spec = write_spec(where / "night.toml", repo, tasks)
    run = where / "RUN"
    done = run_to_end(overnight("run", spec, "--run-dir", run, "--quiet"), env, where)
    starts = lap_starts(trace_records(run))
    if len(starts) != tasks:
        raise RuntimeError(f"the night of {tasks} tasks ran {len(starts)} (exit {done.exit_code})")
    return NightRun(
        per_lap(starts),
        done.max_rss_bytes,
        done.exit_code,
        (run / "checkpoint.json").stat().st_size,
    )


def plain_loop(scratch: Path, iterations: int, env: dict[str, str]) -> PerLap:
    """The same commands with ``subprocess`` and one commit per iteration, nothing else."""
    repo = make_repo(scratch / f"plain-{iterations}", env)

    def sh(text: str) -> None:
        subprocess.run(
            ["/bin/sh", "-c", text],
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )

    starts = []
    for n in range(iterations):
        starts.append(time.monotonic())
        sh(command(n))
        sh(VERIFY)
        sh(PREDICATE)
        git(repo, "add", "-A", env=env)
        git(repo, "commit", "-q", "-m", f"task {n}", env=env)
    starts.append(time.monotonic())
    return per_lap(starts)


def max_rss_mb(value: int) -> float:
    return round(value / (1 << 20), 1)


def own_peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
