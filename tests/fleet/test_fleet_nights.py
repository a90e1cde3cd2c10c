"""Nights on the fleet end to end: a real Temporal dev server, a real PostgreSQL, real worker
processes killed and stopped the ways machines are."""

from __future__ import annotations

import concurrent.futures
import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.kit import CALL_USD, command_night, fleet, model_night, query
from tests.helpers.kills import marked_pids, wait_for

pytest.importorskip("temporalio")


def result_of(run_dir: str | Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(run_dir) / "result.json").read_text())
    return data


def verified_in(run_dir: Path) -> int:
    """How many tasks the night's trace says were verified done so far."""
    trace = run_dir / "trace.jsonl"
    if not trace.exists():
        return 0
    count = 0
    for line in trace.read_text().splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue  # a line being written
        if e.get("kind") == "task" and e.get("event") == "verified" and e.get("outcome") == "done":
            count += 1
    return count


def test_one_submission_delivered_twice_is_one_night(tmp_path: Path) -> None:
    with fleet(tmp_path) as f:
        f.worker()
        # The default id comes from the goal and the workspace path: a path of its own.
        spec = command_night(tmp_path / f.task_queue, "twice", 3, seconds=0.5)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda _: f.submit(spec), range(2)))
        ids = {a["night_id"] for a in answers}
        runs = {a["workflow_run_id"] for a in answers}
        assert len(ids) == 1 and len(runs) == 1, answers
        done = f.submit(spec, wait=True)
        assert done["night_id"] in ids and done["workflow_run_id"] in runs
        assert done["submitted"] == "existing" and done["stop_reason"] == "GOAL_MET"
        later = f.submit(spec)  # after it ended: the first night's status, not a new night
        assert later["workflow_run_id"] in runs and later["stop_reason"] == "GOAL_MET"
        [night] = f.nights()
        assert night["state"] == "finished" and night["attempts"] == 1
        assert len([p for p in f.runs.iterdir() if not p.name.startswith(".")]) == 1
        # An explicit id is its own night.
        other = f.submit(spec, "--id", f.id("tuesday-twice"), wait=True)
        assert other["night_id"] == f.id("tuesday-twice") and other["workflow_run_id"] not in runs
        assert len(f.nights()) == 2


def test_a_bad_spec_is_refused_before_anything_is_submitted(tmp_path: Path) -> None:
    with fleet(tmp_path) as f:
        bad = tmp_path / "bad.toml"
        bad.write_text('goal = "x"\nworkspace = "."\n[budget]\nusd = -1\n')
        done = f.cli("fleet", "submit", bad, "--temporal", f.services.temporal)
        assert done.returncode == 64 and "budget" in done.stderr
        bad_id = f.cli(
            "fleet",
            "submit",
            command_night(tmp_path, "ok", 1),
            "--id",
            f.id("../etc"),
            "--temporal",
            f.services.temporal,
        )
        assert bad_id.returncode == 64 and "--id" in bad_id.stderr
        assert f.nights() == [] if _has_schema(f.database) else True


def _has_schema(url: str) -> bool:
    return bool(query(url, "SELECT 1 FROM pg_tables WHERE tablename = 'nights'"))


def test_twenty_concurrent_nights_never_spend_past_the_fleet_cap(tmp_path: Path) -> None:
    cap = 0.12  # 16 calls at $0.0075; the nights would make 60
    with fleet(tmp_path) as f:
        f.env_extra["FLEET_FAKE_LATENCY_S"] = "0.2"
        f.worker("--max-nights", "10")
        f.worker("--max-nights", "10")
        specs = [model_night(tmp_path, f"n{i:02d}", 3, fleet_usd=cap) for i in range(20)]
        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            answers = list(
                pool.map(
                    lambda s: f.submit(s, "--id", f.id(s.parent.name), wait=True, timeout=300),
                    specs,
                )
            )
        results = [result_of(a["run_dir"]) for a in answers]
        total = sum(r["spend"]["total_usd"] for r in results)
        # The fakes bill within every reservation: the cap is the only bound being tested.
        assert not [w for r in results for w in r["warnings"] if w["kind"] == "over_reservation"]
        assert total <= cap + 1e-9, total
        [day] = query(f.database, "SELECT * FROM fleet_money_days")
        assert day["held_nanos"] == 0 and day["spent_nanos"] <= round(cap * 1e9)
        assert day["spent_nanos"] == round(total * 1e9)
        refused = [r for r in results if r["stop_reason"] == "BUDGET_EXHAUSTED:fleet_money"]
        assert refused, [r["stop_reason"] for r in results]
        for r in refused:
            block = r["budgets"]["fleet_money"]
            assert r["resumable"] is True and r["exit_code"] == 2
            assert block["limit"] == cap
            # Refused a call that would cross the cap, or saw the fleet at the cap already.
            assert (block["refused_at"] or 0) > cap or block["at_stop"] >= cap, block
        others = {r["stop_reason"] for r in results} - {"BUDGET_EXHAUSTED:fleet_money"}
        assert others <= {"GOAL_MET"}, others
        verified = sum(len(r["verified"]) for r in results)
        assert verified * CALL_USD <= total + 1e-9  # every verified task paid for its call
        report = f.report()
        assert report["by_ending"].get("BUDGET_EXHAUSTED:fleet_money") == len(refused)
        assert report["by_class"]["PARTIAL"] == len(refused)
        assert report["spent_usd"] == pytest.approx(total)


def test_a_worker_killed_mid_night_is_resumed_on_another_without_redoing(
    tmp_path: Path,
) -> None:
    spec_base = tmp_path / "specs"
    with fleet(tmp_path) as f:
        first = f.worker()
        spec = command_night(spec_base, "long", 8, seconds=0.4)
        answer = f.submit(spec, "--id", f.id("long"), "--heartbeat-s", "2")
        run = f.runs / answer["night_id"]
        # Lost once a task is done and verified: a slow machine may take long to get there.
        wait_for(lambda: verified_in(run) > 0, 120, "a first task verified")
        first.machine_lost()
        killed_at = time.monotonic()
        second = f.worker()
        done = f.submit(spec, "--id", f.id("long"), wait=True)
        assert done["stop_reason"] == "GOAL_MET" and done["deliveries"] == 2
        r = result_of(run)
        assert r["plan"]["done"] == [f"f{i}" for i in range(8)]
        trace = [json.loads(x) for x in (run / "trace.jsonl").read_text().splitlines()]
        resumed = [i for i, e in enumerate(trace) if e.get("decision") == "resumed"]
        assert len(resumed) == 1
        before, after = trace[: resumed[0]], trace[resumed[0] :]

        def tasks(events: list[dict[str, Any]], event: str, **extra: str) -> list[str]:
            return [
                e["task"]
                for e in events
                if e["kind"] == "task"
                and e.get("event") == event
                and all(e.get(k) == v for k, v in extra.items())
            ]

        verified = tasks(before, "verified", outcome="done")
        assert verified, "the worker was lost before any task was done: nothing to redo"
        assert not set(verified) & set(tasks(after, "started")), "a done task was started again"
        # Every task was started, and none twice but the one cut off in flight.
        started = tasks(trace, "started")
        assert set(started) == {f"f{i}" for i in range(8)}
        assert len(started) - len(set(started)) <= 1
        assert time.monotonic() - killed_at < 60
        assert not marked_pids(first.mark)
        assert second.stop() == 0


def test_sigterm_drains_the_nights_in_flight_and_another_worker_resumes_them(
    tmp_path: Path,
) -> None:
    with fleet(tmp_path) as f:
        first = f.worker()
        spec = command_night(tmp_path / "specs", "drained", 6, seconds=0.5)
        answer = f.submit(spec, "--id", f.id("drained"))
        run = f.runs / answer["night_id"]
        wait_for(lambda: (run / "trace.jsonl").exists(), 60, "the night to start")
        time.sleep(1.0)
        sent = time.monotonic()
        assert first.stop() == 0
        assert time.monotonic() - sent < 30
        drained = result_of(run)
        assert drained["stop_reason"] == "TIME_LIMIT:sigterm" and drained["resumable"]
        assert "draining 1 nights" in first.text()
        [night] = f.nights()
        assert night["state"] == "running"  # handed back, not finished, not missing
        f.worker()
        done = f.submit(spec, "--id", f.id("drained"), wait=True)
        assert done["stop_reason"] == "GOAL_MET" and done["deliveries"] == 2
        history = sorted((run / "history").glob("result-*.json"))
        assert [json.loads(h.read_text())["stop_reason"] for h in history] == ["TIME_LIMIT:sigterm"]
        assert result_of(run)["plan"]["done"] == [f"f{i}" for i in range(6)]


def test_the_fleet_report_counts_every_night_once_by_class_and_ending(tmp_path: Path) -> None:
    base = tmp_path / "specs"
    with fleet(tmp_path) as f:
        f.worker("--max-nights", "8")
        nights = {
            "met": command_night(base, "met", 2, seconds=0.1),
            "unmet": command_night(base, "unmet", 2, seconds=0.1, predicate="false"),
            "steps": command_night(base, "steps", 4, seconds=0.1, steps=2),
            "failing": command_night(base, "failing", 1, seconds=0.1),
        }
        failing = nights["failing"].read_text().replace("test -f f0.txt", "false", 1)
        nights["failing"].write_text(failing)
        running = command_night(base, "running", 3, seconds=30)
        for name, spec in nights.items():
            f.submit(spec, "--id", f.id(name), wait=True)
        f.submit(running, "--id", f.id("running"))
        wait_for(lambda: any(n["state"] == "running" for n in f.nights()), 60, "the long night")
        report = f.report("--since", "all")
        rows = {n["night_id"]: n for n in f.nights()}
        finished = [r for r in rows.values() if r["state"] == "finished"]
        assert report["nights"] == 5 and report["by_state"]["running"] == 1
        assert report["by_state"]["finished"] == 4 == len(finished)
        expect_class: dict[str, int] = {"SUCCESS": 0, "PARTIAL": 0, "FAILURE": 0}
        expect_ending: dict[str, int] = {}
        for r in finished:
            expect_class[r["result"]["status"]] += 1
            reason = r["result"]["stop_reason"]
            expect_ending[reason] = expect_ending.get(reason, 0) + 1
        assert report["by_class"] == expect_class
        assert report["by_ending"] == expect_ending
        assert expect_class["SUCCESS"] == 1 and expect_class["PARTIAL"] == 1
        assert expect_class["FAILURE"] == 2
        lines = {n["night_id"]: n for n in report["lines"]}
        long = lines[f.id("running")]
        assert long["state"] == "running" and long["status"] is None
        assert report["verified_tasks"] == sum(len(r["result"]["verified"]) for r in finished)
        text = f.cli("fleet", "report", "--database", f.database, "--since", "all")
        assert "SUCCESS 1, PARTIAL 1, FAILURE 2" in text.stdout
        page = f.cli(
            "fleet", "report", "--database", f.database, "--html", "--out", tmp_path / "fleet.html"
        )
        assert (
            page.returncode == 0
            and "QUEUE_EMPTY_GOAL_UNMET" in (tmp_path / "fleet.html").read_text()
        )
        status = f.cli("fleet", "status", "--database", f.database)
        assert status.returncode == 0 and "running" in status.stdout
