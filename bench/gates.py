"""The gates benchmark: the time the repository's own checks (``[[gates]]``) add to a night on
a real package, in runs of the gates alone.

``python3 -m bench.gates`` plays, for each package of the corpus that configures a linter
(cachetools: flake8; python-multipart: ruff, ruff format and mypy), the same CLI night twice,
the correct fix landing each time: once without gates and once with the gates ``overnight
init`` finds. It also runs those gates once, by themselves, on a plain copy of the base
commit. From each pair it reads:

- ``gate_runs``: how many times the night ran each gate (the trace's gate calls): the base's
  findings are recorded once per night, so a one-task night runs each gate twice, once on
  the base commit and once on the candidate;
- ``alone_seconds``: one run of all the gates, by themselves, on the base;
- ``gates_in_night_seconds``: the seconds of the night's gate calls (the trace's);
- ``ratio``: ``gates_in_night_seconds / alone_seconds``: about 2 (the base and the
  candidate); the goal is at most 3;
- ``added_seconds``: the gated night's wall time less the ungated one's, for a look at what
  the gates' clean checkouts add too (it is noisy: two nights' suites vary by more than a
  quick linter takes, so no goal reads it).

It prints a table and writes ``bench/gates_results.json``. Figures, not a timed test.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.suite_runs import trace_events
from tests.realrepos.corpus import PACKAGES, PYTHON_MULTIPART, Package
from tests.realrepos.night import RealRepoNight

from bench.realrepos import corpus_ready
from overnight.gates.discovery import discover_gates

HERE = Path(__file__).resolve().parent
GATED = (next(p for p in PACKAGES if p.name == "cachetools"), PYTHON_MULTIPART)
#: The ratio a gated night's added time may reach, in runs of the gates alone.
RATIO_GOAL = 3.0


def night_seconds(package: Package, scratch: Path, gated: bool) -> tuple[float, RealRepoNight]:
    night = RealRepoNight(package, scratch)
    if gated:
        night.gates = [
            {"name": g.name, "command": g.command, "kind": g.kind}
            for g in discover_gates(night.repo)
        ]
    started = time.monotonic()
    outcome = night.play(night.steps(fix=package.good))
    wall = time.monotonic() - started
    if outcome.result.get("stop_reason") != "GOAL_MET":
        raise RuntimeError(f"{package.id}: the night ended {outcome.result.get('stop_reason')}")
    return wall, night


def gates_alone(night: RealRepoNight) -> float:
    """One run of each gate on a plain copy of the base commit, outside any night."""
    seconds = 0.0
    with tempfile.TemporaryDirectory(prefix="overnight-bench-gates-") as tmp:
        for gate in night.gates:
            copy = Path(tmp) / gate["name"]
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(night.repo),
                    "worktree",
                    "add",
                    "-q",
                    "--detach",
                    str(copy),
                    night.base,
                ],
                check=True,
                capture_output=True,
            )
            started = time.monotonic()
            subprocess.run(shlex.split(gate["command"]), cwd=copy, capture_output=True, check=False)
            seconds += time.monotonic() - started
            subprocess.run(
                ["git", "-C", str(night.repo), "worktree", "remove", "--force", str(copy)],
                check=True,
                capture_output=True,
            )
    return seconds


def measure(package: Package, scratch: Path) -> dict[str, Any]:
    plain, _ = night_seconds(package, scratch / "plain", gated=False)
    wall, night = night_seconds(package, scratch / "gated", gated=True)
    events = [e for e in trace_events(night.run_dir) if e.get("tool") == "gate"]
    alone = gates_alone(night)
    added = wall - plain
    in_night = sum(float(e.get("seconds", 0.0)) for e in events)
    return {
        "package": package.id,
        "gates": [g["name"] for g in night.gates],
        "gate_runs": dict(Counter(str(e["gate"]) for e in events)),
        "alone_seconds": round(alone, 3),
        "gates_in_night_seconds": round(in_night, 3),
        "plain_night_seconds": round(plain, 3),
        "gated_night_seconds": round(wall, 3),
        "added_seconds": round(added, 3),
        "ratio": round(in_night / alone, 2) if alone else None,
    }


def main() -> int:
    if not corpus_ready():
        return 1
    rows = []
    for package in GATED:
        with tempfile.TemporaryDirectory(prefix="overnight-bench-") as tmp:
            row = measure(package, Path(tmp))
        rows.append(row)
        print(
            f"  {row['package']:<20} gates {', '.join(row['gates'])}: alone "
            f"{row['alone_seconds']:.2f} s, in the night {row['gates_in_night_seconds']:.2f} s "
            f"(ratio {row['ratio']}; the night's wall time {row['added_seconds']:+.2f} s), "
            f"runs {row['gate_runs']}",
            flush=True,
        )
    goals = {
        "once_per_night": "each gate runs once on the base and once per candidate (2 here)",
        "ratio": f"the time gates add to a night is at most {RATIO_GOAL:g} runs of the gates",
    }
    met = {
        "once_per_night": all(set(r["gate_runs"].values()) == {2} for r in rows),
        "ratio": all(r["ratio"] is not None and 0 < r["ratio"] <= RATIO_GOAL for r in rows),
    }
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "goals": goals,
        "met": met,
        "rows": rows,
    }
    (HERE / "gates_results.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"goals met: {met}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
