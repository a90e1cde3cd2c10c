"""kill -9 at random points of the billing night, then resume until a verdict: the provider
never sees a second refund or email, nothing happens at the provider without a ledger row
written first, and every effect whose outcome the ledger does not know is in the review
queue, naming what it was about.

The service waits a random few milliseconds before and after each change, so a kill often
lands in the window the ledger cannot close by itself: after the row says ``intended`` and
before the answer is written down (the request may or may not have been carried out). Most
trials aim there (they watch the ledger for the n-th ``intended`` row and kill a moment
later); the rest kill at a random time. Some resumes are killed again.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.effects.billing import (
    CUSTOMER,
    ORDER,
    TICKET,
    effect_rows,
    make_workspace,
    night_env,
    posts,
    running_service,
)
from tests.helpers.kills import RUN_EXIT_CODES, kill_everything, kill_marked, overnight, start_cli

pytestmark = pytest.mark.chaos

# Another seed or more trials, to hunt: OVERNIGHT_CHAOS_SEED=7 OVERNIGHT_CHAOS_TRIALS=200
SEED = int(os.environ.get("OVERNIGHT_CHAOS_SEED", "20261202"))
TRIALS = int(os.environ.get("OVERNIGHT_CHAOS_TRIALS", "12"))
WORKERS = 2

#: What an effect of each tool must name in the review queue.
NAMES = {
    "issue_refund": ORDER,
    "send_email": CUSTOMER,
    "write_ticket_note": TICKET,
    "close_ticket": TICKET,
}
KINDS = {
    "issue_refund": "refunds",
    "send_email": "emails",
    "write_ticket_note": "notes",
    "close_ticket": "closed",
}
PATHS = {
    "/refunds": "refunds",
    "/emails": "emails",
    f"/tickets/{TICKET}/notes": "notes",
    f"/tickets/{TICKET}/close": "closed",
}


def whole_night(spec: dict[str, Any]) -> None:
    """Money enough for the whole night: only the kills end it early."""
    spec["budget"] = {"usd": 1.0, "hours": 0.25}


@dataclass
class Trial:
    n: int
    kills: int = 0
    processes: int = 0
    verdict: str = ""
    unsettled: list[str] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)
    """Unsettled effects the provider did carry out: the case only a person can close."""


def intended_count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)
        try:
            return int(con.execute("SELECT COUNT(*) FROM effects").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def wait_until(check: Any, proc: subprocess.Popen[bytes], timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None and not check():
        time.sleep(0.003)


def run_trial(n: int, base: Path) -> Trial:
    rng = random.Random(SEED * 1000 + n)
    trial = Trial(n)
    base.mkdir()
    workspace = make_workspace(base, whole_night)
    db, run = base / "billing-effects.sqlite", base / "run"
    with running_service(base / "state.json", latency_ms="5,60", seed=n) as service:
        env, mark = night_env(service.url)
        try:
            for attempt in range(8):
                if (run / "result.json").exists():
                    break
                if (run / "run.json").exists():
                    args = overnight("resume", run, "--quiet")
                else:
                    args = overnight("run", workspace / "night.toml", "--run-dir", run, "--quiet")
                proc = start_cli(args, env, base)
                trial.processes += 1
                if attempt == 0 and rng.random() < 0.7:
                    nth = rng.randint(1, 4)  # the n-th effect of the night: watch for its row
                    wait_until(lambda nth=nth: intended_count(db) >= nth, proc, 30.0)
                    time.sleep(rng.uniform(0.0, 0.07))
                elif attempt < 2:
                    wait_until(lambda: False, proc, rng.uniform(0.1, 2.0))
                else:
                    proc.wait(timeout=60)
                if proc.poll() is None:
                    kill_everything(proc, mark)
                    trial.kills += 1
                    continue
                assert proc.returncode in RUN_EXIT_CODES, f"trial {n}: exit {proc.returncode}"
            else:
                raise AssertionError(f"trial {n}: no verdict after {trial.processes} processes")
        finally:
            kill_marked(mark)
        state = service.state()

    result = json.loads((run / "result.json").read_text())
    trial.verdict = result["stop_reason"]
    rows = effect_rows(db)
    where = f"trial {n} (seed {SEED}, {trial.kills} kill(s), ended {trial.verdict})"

    # Never a duplicate: at most one request reached the provider per effect.
    for path, kind in PATHS.items():
        assert len(posts(state, path)) <= 1, f"{where}: {posts(state, path)}"
        assert len(state[kind]) <= 1, f"{where}: {state[kind]}"
    assert [r for r in state["refunds"] if r["order_id"] == ORDER] == state["refunds"]

    # Intent first: whatever the provider did, the ledger wrote down before asking.
    keys = {r.step_key: r for r in rows}
    for kind in PATHS.values():
        for done in state[kind]:
            row = keys.get(done["idempotency_key"])
            assert row is not None, f"{where}: {kind} {done} has no ledger row"
            if row.state == "confirmed" and "id" in done:
                assert row.result["id"] == done["id"], where
            if row.state in ("intended", "unknown"):
                trial.ambiguous.append(row.tool)
    for row in rows:
        assert row.run_id == result["run_id"], where
        if row.state == "confirmed":  # a confirmed row is an effect the provider has
            carried_out = state[KINDS[row.tool]]
            assert any(d["idempotency_key"] == row.step_key for d in carried_out), where

    # Every effect of unknown outcome is in the human queue, naming what it was about.
    listed = subprocess.run(
        overnight("review", "--runs", run, "--json"),
        env=env,
        cwd=base,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    items = {i["id"]: i for i in json.loads(listed.stdout)}
    for row in rows:
        if row.state in ("intended", "unknown"):
            trial.unsettled.append(row.tool)
            item = items.get(f"effect:{row.step_key}")
            assert item is not None, f"{where}: {row} is not in the review queue {list(items)}"
            assert NAMES[row.tool] in item["summary"], f"{where}: {item}"
            assert item["kind"] == "effect of unknown outcome"
    recorded = {e["key"]: e["state"] for e in result["effects"]}
    assert recorded == {r.step_key: r.state for r in rows}, f"{where}: result.json vs ledger"
    return trial


def test_kill_anywhere_never_duplicates_an_effect(tmp_path: Path) -> None:
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = [pool.submit(run_trial, n, tmp_path / f"t{n:02d}") for n in range(TRIALS)]
        trials = [f.result() for f in futures]
    took = time.monotonic() - started
    print(
        f"\n{TRIALS} trials in {took:.1f} s: "
        f"{sum(t.kills for t in trials)} kills, "
        f"{sum(1 for t in trials if t.unsettled)} trials left effects of unknown outcome "
        f"({sum(1 for t in trials if t.ambiguous)} of them carried out by the provider); "
        f"verdicts {sorted({t.verdict for t in trials})}"
    )
    assert sum(1 for t in trials if t.kills) >= TRIALS * 3 // 4  # most nights were cut short
    # The trials reached the window they are about: after intended, before the answer; in
    # some, the provider carried the request out and only a person can tell.
    assert any(t.unsettled for t in trials) and any(t.ambiguous for t in trials)
