"""What starting the command line costs: figures, not a timed test.

``python3 -m bench.startup`` runs each command below as a process of its own, several times,
interleaved (one of each, then again), and takes the CPU time each run cost (user + system,
from ``getrusage(RUSAGE_CHILDREN)`` before and after it):

- ``python -c pass``: the interpreter alone, the floor under every other figure;
- ``overnight --version`` and ``overnight --help`` (goal: under 150 ms each);
- ``overnight list`` and ``overnight status RUN`` of a finished run (goal: under 300 ms each),
  on a night of command tasks this benchmark runs first, in a scratch repository with an
  ``OVERNIGHT_HOME`` of its own.

Every command runs as ``python -m overnight``, its output to a pipe (not a terminal), as a
script or a cron job runs it. For each it records the median, the least and the most, and
the heaviest imports ``python -X importtime`` reports for one more run of it (cumulative wall
time, so the figures are the import's share, not CPU time); a command over its goal names
the first of them in ``held_back_by``. The results go to ``bench/startup_results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/startup.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import laps

HERE = Path(__file__).resolve().parent

#: The modules every command imports on the way to its own: not what holds one back.
ENTRY = {"site", "runpy", "encodings", "overnight", "overnight.cli", "overnight.cli.main"}


@dataclass(frozen=True)
class Command:
    name: str
    argv: list[str]
    goal_ms: float | None


def commands(run: Path) -> list[Command]:
    python = [sys.executable]
    return [
        Command("python -c pass", [*python, "-c", "pass"], None),
        Command("overnight --version", laps.overnight("--version"), 150.0),
        Command("overnight --help", laps.overnight("--help"), 150.0),
        Command("overnight list", laps.overnight("list"), 300.0),
        Command("overnight status RUN", laps.overnight("status", run), 300.0),
    ]


def cpu_ms(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """The CPU time (user + system) one run of ``argv`` cost, in milliseconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        argv,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    spent = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return spent * 1e3


def heaviest_imports(
    argv: list[str], env: dict[str, str], cwd: Path, top: int = 5
) -> list[dict[str, Any]]:
    """The imports of one run of ``argv`` that took longest, their nested imports included
    (``-X importtime``'s cumulative microseconds), the entry modules left out."""
    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    found: dict[str, int] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        name = name.strip()
        if cumulative.strip().isdigit() and name not in ENTRY:
            found[name] = max(found.get(name, 0), int(cumulative))
    heaviest = sorted(found.items(), key=lambda kv: kv[1], reverse=True)[:top]
    return [{"module": m, "cumulative_ms": round(us / 1e3, 1)} for m, us in heaviest]


def finished_run(scratch: Path, env: dict[str, str]) -> Path:
    """A night of three command tasks, run to its end."""
    repo = laps.make_repo(scratch / "repo", env)
    spec = laps.write_spec(scratch / "night.toml", repo, 3)
    run = scratch / "RUN"
    done = laps.run_to_end(laps.overnight("run", spec, "--run-dir", run, "--quiet"), env, scratch)
    if not (run / "result.json").exists():
        raise RuntimeError(f"the night did not finish (exit {done.exit_code})")
    return run


def measure(scratch: Path, runs: int) -> dict[str, Any]:
    env = laps.env_for(scratch)
    run = finished_run(scratch, env)
    cmds = commands(run)
    samples: dict[str, list[float]] = {c.name: [] for c in cmds}
    for c in cmds:  # warm-up: compiled bytecode written, files in the page cache
        cpu_ms(c.argv, env, scratch)
    for _ in range(runs):
        for c in cmds:
            samples[c.name].append(cpu_ms(c.argv, env, scratch))
    floor = median(samples["python -c pass"])
    figures: dict[str, Any] = {}
    for c in cmds:
        got = samples[c.name]
        row: dict[str, Any] = {
            "argv": ["python", *c.argv[1:]],
            "median_ms": round(median(got), 1),
            "min_ms": round(min(got), 1),
            "max_ms": round(max(got), 1),
            "above_python_ms": round(median(got) - floor, 1),
            "samples_ms": [round(x, 1) for x in got],
        }
        if c.goal_ms is not None:
            heaviest = heaviest_imports(c.argv, env, scratch)
            row |= {
                "goal_ms_under": c.goal_ms,
                "met": median(got) < c.goal_ms,
                "heaviest_imports": heaviest,
            }
            if not row["met"]:
                row["held_back_by"] = heaviest[0]["module"] if heaviest else None
        figures[c.name] = row
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.startup")
    parser.add_argument("--runs", type=int, default=15, help="measured runs of each command")
    parser.add_argument("--out", type=Path, default=HERE / "startup_results.json")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="overnight-startup-"))
    try:
        figures = measure(scratch, args.runs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    goals = {name: row for name, row in figures.items() if "met" in row}
    results = {
        "kind": "overnight-startup-bench",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
        "seconds": round(time.monotonic() - started, 1),
        "runs": args.runs,
        "what": (
            "CPU time (user + system) of one process per run, the median of the runs; "
            "heaviest_imports are -X importtime's cumulative wall times of one more run"
        ),
        "commands": figures,
        "met": all(row["met"] for row in goals.values()),
        "held_back": {name: row["held_back_by"] for name, row in goals.items() if not row["met"]},
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    for name, row in figures.items():
        goal = (
            f"  goal < {row['goal_ms_under']:.0f} ms: {'met' if row['met'] else 'NOT met'}"
            if "met" in row
            else ""
        )
        print(
            f"{name:>22}: {row['median_ms']:6.1f} ms median "
            f"({row['min_ms']:.1f}-{row['max_ms']:.1f}){goal}"
        )
    for name, module in results["held_back"].items():
        print(f"{name} is held back by {module}")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
