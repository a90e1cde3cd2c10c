"""How well ``overnight estimate`` learns a night's bill from recorded nights.

``python3 -m bench.estimates`` generates simulated nights of several kinds (the task count,
the agent calls of each task, their input, growth, output and cache use drawn from each
kind's ranges) and runs them through the real harness with a fake model that bills exactly
what was drawn. For each trial it records three nights of a kind in one workspace, estimates
a fourth from them (its task count known, as a spec's ``[[tasks]]`` make it), runs the fourth
and compares: its bill within the median +/- 10%, and under the 90th percentile. The figures
go into ``bench/results.json`` under ``estimate_accuracy`` (other keys are kept).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/estimates.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from overnight import api
from overnight.config.spec import parse_spec
from overnight.core.budget import Price
from overnight.estimate.learned import NightPrices, Settings, learn
from overnight.messages.types import ModelRequest
from overnight.night.workload_record import facts_of_run
from overnight.testing import FunctionModel, text_answer, tool_answer
from overnight.testing.fakes import usage_dict

HERE = Path(__file__).resolve().parent
PRICE = Price(input=3.0, output=15.0, cache_read=0.3, cache_write_5m=3.75, cache_write_1h=6.0)
MODEL = "bench-model"


@dataclass(frozen=True)
class Kind:
    """A kind of night: ranges every night of it is drawn from."""

    tasks: tuple[int, int]
    calls: tuple[int, int]
    first_call: tuple[int, int]
    growth: tuple[int, int]
    output: tuple[int, int]
    cache: bool


KINDS: dict[str, Kind] = {
    "short_uncached": Kind((6, 10), (1, 4), (2_000, 4_000), (800, 2_000), (150, 500), False),
    "long_cached": Kind((8, 14), (3, 8), (4_000, 8_000), (1_500, 3_500), (300, 900), True),
    "mixed_cached": Kind((5, 15), (1, 10), (2_000, 9_000), (500, 4_000), (100, 1_200), True),
}


def _repo(path: Path) -> Path:
    import subprocess

    path.mkdir(parents=True)
    (path / "README.md").write_text("bench\n")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    for cmd in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "init"],
    ):
        subprocess.run(cmd, cwd=path, check=True, env=env, capture_output=True)
    return path


def _model(kind: Kind, rng: random.Random, tasks: list[str]) -> FunctionModel:
    """A model whose every task makes its drawn number of calls, each billing its drawn
    tokens; the harness's own calls bill small drawn amounts."""
    plan = {
        t: {
            "calls": rng.randint(*kind.calls),
            "first": rng.randint(*kind.first_call),
            "growth": rng.randint(*kind.growth),
            "outputs": [rng.randint(*kind.output) for _ in range(kind.calls[1])],
        }
        for t in tasks
    }

    def usage(task: str, k: int) -> dict[str, Any]:
        p = plan[task]
        total = p["first"] + k * p["growth"]
        out = p["outputs"][k]
        if not kind.cache:
            return usage_dict(input=total, output=out)
        read = p["first"] + (k - 1) * p["growth"] if k else 0
        return usage_dict(input=50, output=out, cache_read=read, cache_write_5m=total - read - 50)

    def answer(request: ModelRequest) -> dict[str, Any]:
        if request.purpose == "execute":
            first = request.messages[0]["content"]
            text = first if isinstance(first, str) else json.dumps(first)
            task = next(t for t in tasks if f"do {t}." in text)
            k = sum(1 for m in request.messages if m["role"] == "assistant")
            if k + 1 < plan[task]["calls"]:
                return tool_answer("list_files", {"path": "."}, usage(task, k))
            return text_answer("done", usage(task, k))
        small = usage_dict(input=rng.randint(800, 1_600), output=rng.randint(60, 200))
        if request.purpose == "replan":
            return tool_answer("submit_replan", {"reasoning": "fine", "add": []}, small)
        if request.purpose == "drift":
            verdict = {"reasoning": "ok", "off_goal_task_ids": [], "drift_score": 0.0}
            return tool_answer("submit_drift_verdict", verdict, small)
        return text_answer("summary", small)

    return FunctionModel(answer)


def night(root: Path, repo: Path, kind: Kind, rng: random.Random, n: int) -> tuple[Path, float]:
    count = rng.randint(*kind.tasks)
    tasks = [f"t{i}" for i in range(count)]
    spec = parse_spec(
        {
            "goal": "bench",
            "workspace": str(repo),
            "budget": {"usd": 100.0, "hours": 1.0},
            "predicate": {"command": "false"},
            "model": {"provider": "python", "target": "bench:unused", "name": MODEL},
            "prices": {MODEL: {"input": 3.0, "output": 15.0}},
            "tools": {"allow": ["list_files"]},
            "agent": {"max_calls": kind.calls[1] + 1},
            "sandbox": {"mode": "off"},
            "tasks": [{"id": t, "brief": f"do {t}.", "verify": "true"} for t in tasks],
        },
        base_dir=root,
    )
    run_dir = root / f"run{n}"
    result = api.run(spec, run_dir=run_dir, model=_model(kind, rng, tasks))
    return run_dir, result.spend.total_usd


def trial(scratch: Path, name: str, kind: Kind, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    root = scratch / f"{name}-{seed}"
    repo = _repo(root / "repo")
    recorded = [night(root, repo, kind, rng, i)[0] for i in range(3)]
    facts = [f for f in (facts_of_run(p) for p in recorded) if f is not None]
    # the fourth night's tasks are drawn first, so its count is known to the estimate
    state = rng.getstate()
    count = rng.randint(*kind.tasks)
    rng.setstate(state)
    estimate = learn(
        facts,
        "bench",
        NightPrices(price_of=lambda _: PRICE, model=MODEL),
        Settings(tasks=count, tasks_from="the spec", budget_usd=None),
    )
    _, bill = night(root, repo, kind, rng, 3)
    return {
        "bill": round(bill, 6),
        "median": estimate.median_usd,
        "p90": estimate.p90_usd,
        "within_10pct": abs(bill - estimate.median_usd) <= 0.10 * estimate.median_usd,
        "under_p90": bill <= estimate.p90_usd,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.estimates")
    parser.add_argument("--trials", type=int, default=12, help="trials per kind (default 12)")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("OVERNIGHT_HOME", tempfile.mkdtemp(prefix="overnight-bench-home-"))
    scratch = Path(tempfile.mkdtemp(prefix="overnight-bench-est-"))
    kinds: dict[str, Any] = {}
    for name, kind in KINDS.items():
        rows = [trial(scratch, name, kind, seed) for seed in range(args.trials)]
        within = sum(r["within_10pct"] for r in rows) / len(rows)
        under = sum(r["under_p90"] for r in rows) / len(rows)
        print(f"{name}: within median +/-10% {within:.0%}, under p90 {under:.0%}", flush=True)
        kinds[name] = {
            "kind": asdict(kind),
            "trials": len(rows),
            "within_median_10pct": round(within, 3),
            "under_p90": round(under, 3),
            "rows": rows,
        }
    all_rows = [r for k in kinds.values() for r in k["rows"]]
    within = sum(r["within_10pct"] for r in all_rows) / len(all_rows)
    under = sum(r["under_p90"] for r in all_rows) / len(all_rows)
    figures = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "what": "the 4th night's bill against the estimate learned from 3 recorded nights",
        "trials": len(all_rows),
        "within_median_10pct": round(within, 3),
        "under_p90": round(under, 3),
        "goal": {"within_median_10pct": "most (> 0.5)", "under_p90": 0.9},
        "met": within > 0.5 and under >= 0.9,
        "kinds": kinds,
    }
    data = json.loads(args.out.read_text()) if args.out.exists() else {}
    data["estimate_accuracy"] = figures
    args.out.write_text(json.dumps(data, indent=2) + "\n")  # the other keys as they were
    print(f"all: within +/-10% {within:.0%}, under p90 {under:.0%}; written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
