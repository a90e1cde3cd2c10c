"""The real-package benchmark: how many times a night runs the suite, what recording the base
commit costs it, and the harness's own time above the commands it runs, per package of the
corpus (``tests/realrepos``).

``python3 -m bench.realrepos`` plays, for each package, a CLI night whose scripted agent
commits the correct fix, and reads from the run:

- ``suite_runs``: how many times the harness ran the suite itself (the start check, base
  records, verifies, predicates; a predicate judged from the verify that landed its tree is
  not a run), the agent's own runs aside; the goal is at most 2 for these one-task nights;
- ``overhead_seconds``: the night's wall time (the CLI process, start to exit) less the
  seconds of every command it ran (its checks and the agent's ``run_command``s): what the
  harness itself costs; the goal is a median under 1 s;

- ``base_runs``: how many times the suite ran on the base commit (the start check's run,
  which is the base record and the predicate's first verdict, plus each ``base-tests`` log: a
  record a verify could not share); the goal is 1;
- ``base_seconds``: their seconds, and ``suite_seconds``: one run of the suite on the
  candidate (the night's last predicate run);
- ``ratio``: ``base_seconds / suite_seconds``, the base record's cost in runs of the suite.

It prints a table and writes ``bench/realrepos_results.json``. Figures, not a timed test.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.suite_runs import command_seconds, suite_runs, trace_events
from tests.realrepos.corpus import PACKAGES, Package, fetch
from tests.realrepos.night import RealRepoNight

HERE = Path(__file__).resolve().parent


def measure(package: Package, scratch: Path) -> dict[str, Any]:
    night = RealRepoNight(package, scratch)
    started = time.monotonic()
    outcome = night.play(night.steps(fix=package.good))
    wall = time.monotonic() - started
    if not (night.run_dir / "trace.jsonl").is_file():  # refused before the night began
        return {
            "package": package.id,
            "predicate": package.tests,
            "stop_reason": f"refused (exit {outcome.exit_code})",
            "exit_code": outcome.exit_code,
            "detail": (outcome.stdout + outcome.stderr)[-600:],
        }
    events = trace_events(night.run_dir)
    runs = suite_runs(events)
    commands = command_seconds(events)
    predicates = [e for e in events if e.get("tool") == "predicate"]
    at_start = [e for e in predicates if e.get("from_start_check")]
    records = [e for e in events if e.get("decision") == "base_tests"]
    base_seconds = sum(float(e.get("seconds", 0.0)) for e in at_start + records)
    candidate = [e for e in predicates if not e.get("from_start_check")]
    suite_seconds = float(candidate[-1]["seconds"]) if candidate else 0.0
    return {
        "package": package.id,
        "predicate": package.tests,
        "stop_reason": outcome.result.get("stop_reason"),
        "exit_code": outcome.exit_code,
        "base_runs": len(at_start) + len(records),
        "shared_by_verifies": sum(1 for e in events if e.get("decision") == "base_tests_shared"),
        "base_seconds": round(base_seconds, 3),
        "suite_seconds": round(suite_seconds, 3),
        "ratio": round(base_seconds / suite_seconds, 2) if suite_seconds else None,
        "suite_runs": len(runs),
        "suite_runs_by": runs,
        "wall_seconds": round(wall, 3),
        "command_seconds": round(commands, 3),
        "overhead_seconds": round(wall - commands, 3),
    }


def corpus_ready() -> bool:
    """The corpus fetched, and this interpreter first on PATH: the nights' `python` is this
    one (its plugins, its tools, its pytest), as in the tests. False, said, when the corpus
    could not be fetched."""
    here = str(Path(sys.executable).parent)
    os.environ["PATH"] = os.pathsep.join([here, os.environ.get("PATH", os.defpath)])
    error = fetch()
    if error:
        print(f"the corpus could not be fetched: {error}", file=sys.stderr)
    return not error


def main() -> int:
    if not corpus_ready():
        return 1
    rows = []
    for package in PACKAGES:
        with tempfile.TemporaryDirectory(prefix="overnight-bench-") as tmp:
            row = measure(package, Path(tmp))
        rows.append(row)
        if "suite_runs" not in row:
            print(f"  {row['package']:<24} {row['stop_reason']}: {row['detail']}", flush=True)
            continue
        print(
            f"  {row['package']:<24} {row['stop_reason']:<10} base runs {row['base_runs']}, "
            f"suite runs {row['suite_runs']}, overhead {row['overhead_seconds']:.2f} s "
            f"({row['wall_seconds']:.2f} s, commands {row['command_seconds']:.2f} s)",
            flush=True,
        )
    ran = [r for r in rows if "suite_runs" in r]
    ratios = [r["ratio"] for r in ran if r["ratio"] is not None]
    overheads = [r["overhead_seconds"] for r in ran]
    median_overhead = statistics.median(overheads) if overheads else None
    goals = {
        "base_runs": "each night runs the base's suite once (base_runs == 1)",
        "suite_runs": "a one-task night runs the suite at most twice itself (suite_runs <= 2)",
        "overhead": "the median overhead above the commands a night runs is under 1 s",
    }
    met = {
        "every_night_ran": len(ran) == len(rows),
        "base_runs": all(r["base_runs"] == 1 for r in ran),
        "suite_runs": all(r["suite_runs"] <= 2 for r in ran),
        "overhead": median_overhead is not None and median_overhead < 1.0,
    }
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "goals": goals,
        "met": met,
        "median_ratio": statistics.median(ratios) if ratios else None,
        "median_overhead_seconds": median_overhead,
        "max_overhead_seconds": max(overheads) if overheads else None,
        "rows": rows,
    }
    (HERE / "realrepos_results.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"goals met: {met}; median overhead {median_overhead} s, "
        f"median base ratio {result['median_ratio']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
