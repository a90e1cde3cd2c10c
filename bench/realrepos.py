"""The real-package benchmark: what recording the base commit costs a night, per package of
the corpus (``tests/realrepos``), as a ratio to one run of the suite.

``python3 -m bench.realrepos`` plays, for each package, a CLI night whose scripted agent
commits the correct fix, and reads from the run:

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
import platform
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.realrepos.corpus import PACKAGES, Package, fetch
from tests.realrepos.night import RealRepoNight

HERE = Path(__file__).resolve().parent


def trace_events(run_dir: Path) -> list[dict[str, Any]]:
    events = []
    for line in (run_dir / "trace.jsonl").read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def measure(package: Package, scratch: Path) -> dict[str, Any]:
    night = RealRepoNight(package, scratch)
    outcome = night.play(night.steps(fix=package.good))
    events = trace_events(night.run_dir)
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
    }


def main() -> int:
    error = fetch()
    if error:
        print(f"the corpus could not be fetched: {error}", file=sys.stderr)
        return 1
    rows = []
    for package in PACKAGES:
        with tempfile.TemporaryDirectory(prefix="overnight-bench-") as tmp:
            row = measure(package, Path(tmp))
        rows.append(row)
        print(
            f"  {row['package']:<24} {row['stop_reason']:<24} base runs {row['base_runs']}, "
            f"{row['base_seconds']:.2f} s against {row['suite_seconds']:.2f} s a suite run "
            f"(x{row['ratio']})",
            flush=True,
        )
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "goal": "each night runs the base's suite once (base_runs == 1)",
        "met": all(r["base_runs"] == 1 for r in rows),
        "median_ratio": statistics.median(ratios) if ratios else None,
        "rows": rows,
    }
    (HERE / "realrepos_results.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"goal met: {result['met']}; median ratio {result['median_ratio']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
