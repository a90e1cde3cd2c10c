"""The benchmark suite: figures, not timed tests.

``python3 -m bench`` (or ``python3 bench/run.py``) measures, each as a ratio within one run:

- the harness's overhead per lap at 100, 1,000 and 10,000 command tasks: a night's seconds per
  lap less a plain loop's seconds per iteration of the same processes and one git commit, and
  the overhead at the largest size against the smallest (goal: at most 1.5);
- a checkpoint save against the fsync floor of the same bytes (goal: at most 3);
- the time from ``overnight resume`` after a kill -9 to its first lap;
- the peak resident memory of the night of the largest size.

It prints a table and writes ``bench/results.json``. ``--quick`` takes smaller sizes for a
fast look (its figures are not the goal's). The full run takes several minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import laps, resume, saves

HERE = Path(__file__).resolve().parent
LAP_GOAL = 1.5
SAVE_GOAL = 3.0


@dataclass(frozen=True)
class Plan:
    sizes: tuple[int, ...]
    save_tasks: int
    save_laps: int


FULL = Plan(sizes=(100, 1_000, 10_000), save_tasks=10_000, save_laps=300)
QUICK = Plan(sizes=(50, 200, 800), save_tasks=2_000, save_laps=100)


def lap_figures(scratch: Path, sizes: tuple[int, ...], env: dict[str, str]) -> dict[str, Any]:
    rows = []
    for n in sizes:
        plain = laps.plain_loop(scratch, n, env)
        night = laps.night(scratch, n, env)
        print(
            f"  {n} tasks: night {night.laps.mean_s * 1e3:.1f} ms/lap, "
            f"plain {plain.mean_s * 1e3:.1f} ms/iteration",
            flush=True,
        )
        rows.append(
            {
                "tasks": n,
                "night_ms_per_lap": round(night.laps.mean_s * 1e3, 3),
                "night_median_ms": round(night.laps.median_s * 1e3, 3),
                "plain_ms_per_iteration": round(plain.mean_s * 1e3, 3),
                "plain_median_ms": round(plain.median_s * 1e3, 3),
                "overhead_ms_per_lap": round((night.laps.mean_s - plain.mean_s) * 1e3, 3),
                "overhead_median_ms": round((night.laps.median_s - plain.median_s) * 1e3, 3),
                "peak_rss_mb": laps.max_rss_mb(night.max_rss_bytes),
                "checkpoint_bytes_at_end": night.checkpoint_bytes,
                "exit_code": night.exit_code,
            }
        )
    first, last = rows[0], rows[-1]
    ratio = last["overhead_ms_per_lap"] / first["overhead_ms_per_lap"]
    median_ratio = last["overhead_median_ms"] / first["overhead_median_ms"]
    return {
        "rows": rows,
        "ratio": round(ratio, 3),
        "median_ratio": round(median_ratio, 3),
        "of": f"{last['tasks']} vs {first['tasks']} tasks",
        "goal": LAP_GOAL,
        "met": ratio <= LAP_GOAL,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, a fast look")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    sizes = plan.sizes
    scratch = Path(tempfile.mkdtemp(prefix="overnight-bench-"))
    env = laps.env_for(scratch)
    started = time.monotonic()
    load_before = os.getloadavg()
    try:
        print("checkpoint saves ...", flush=True)
        save = saves.measure(scratch, plan.save_tasks, plan.save_laps).as_json()
        print("resume after kill -9 ...", flush=True)
        resumes = [resume.measure(scratch, n, env) for n in (sizes[0], sizes[-1])]
        print("laps ...", flush=True)
        lap = lap_figures(scratch, sizes, env)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    results = {
        "kind": "overnight-bench",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
        "seconds": round(time.monotonic() - started, 1),
        "lap_overhead": lap,
        "checkpoint_save": {**save, "goal": SAVE_GOAL, "met": save["amortised_ratio"] <= SAVE_GOAL},
        "resume_to_first_lap": [
            {
                "tasks": r.tasks,
                "killed_after_laps": r.killed_after_laps,
                "state_files_bytes": r.state_files_bytes,
                "seconds": round(r.seconds_to_first_lap, 3),
            }
            for r in resumes
        ],
        "peak_rss_mb": {str(row["tasks"]): row["peak_rss_mb"] for row in lap["rows"]},
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    print(f"written to {args.out}")
    return 0


def table(r: dict[str, Any]) -> str:
    lap, save = r["lap_overhead"], r["checkpoint_save"]
    lines = [
        "",
        f"{'tasks':>7} {'night ms/lap':>13} {'plain ms/it':>12} {'overhead ms':>12} "
        f"{'median ovh':>11} {'peak RSS MB':>12}",
    ]
    for row in lap["rows"]:
        lines.append(
            f"{row['tasks']:>7} {row['night_ms_per_lap']:>13.2f} "
            f"{row['plain_ms_per_iteration']:>12.2f} {row['overhead_ms_per_lap']:>12.2f} "
            f"{row['overhead_median_ms']:>11.2f} {row['peak_rss_mb']:>12.1f}"
        )
    mark = "met" if lap["met"] else "NOT met"
    lines += [
        f"lap overhead {lap['of']}: x{lap['ratio']} (median x{lap['median_ratio']}), "
        f"goal <= {lap['goal']}: {mark}",
        f"checkpoint save at {save['tasks']} tasks: {save['ms_per_save']:.3f} ms for "
        f"{save['bytes_per_save']:.0f} bytes vs fsync floor {save['fsync_floor_ms']:.3f} ms "
        f"(x{save['ratio']}; amortised with compaction x{save['amortised_ratio']}, "
        f"goal <= {save['goal']}: {'met' if save['met'] else 'NOT met'})",
        f"  the whole rewrite it replaces: {save['whole_rewrite_ms']:.2f} ms vs floor "
        f"{save['whole_rewrite_floor_ms']:.2f} ms (x{save['whole_rewrite_ratio']})",
    ]
    for res in r["resume_to_first_lap"]:
        lines.append(
            f"resume after kill -9 to first lap, {res['tasks']} tasks: {res['seconds']:.2f} s"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
