"""The billing night on the fleet: its refunds, emails and ticket changes go through the
fleet's PostgreSQL ledger, whichever worker carries the night and however often one dies."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest

from tests.effects.billing import TICKET, make_workspace, posts, running_service
from tests.fleet.kit import branch_trees, fleet, query
from tests.helpers.kills import marked_pids, wait_for

pytest.importorskip("temporalio")

SEED = int(os.environ.get("OVERNIGHT_FLEET_SEED", "20261203"))
TRIALS = int(os.environ.get("OVERNIGHT_FLEET_TRIALS", "3"))

PATHS = {
    "/refunds": "refunds",
    "/emails": "emails",
    f"/tickets/{TICKET}/notes": "notes",
    f"/tickets/{TICKET}/close": "closed",
}


def whole_night(spec: dict[str, Any]) -> None:
    spec["budget"]["usd"] = 0.15  # room for all five tasks (see the example's night.toml)


def essentials(result: dict[str, Any]) -> dict[str, Any]:
    """What an interrupted night must end with, as the uninterrupted one did."""
    return {
        "stop_reason": result["stop_reason"],
        "status": result["status"],
        "done": result["plan"]["done"],
        "remaining": result["plan"]["remaining"],
        "parked": [p["id"] for p in result["plan"]["parked"]],
        "verified": [v["id"] for v in result["verified"]],
        "effects": sorted((e["tool"], e["task"], e["state"]) for e in result["effects"]),
    }


def result_of(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "result.json").read_text())
    return data


def never_twice(state: dict[str, Any], where: str) -> None:
    for path, kind in PATHS.items():
        assert len(posts(state, path)) <= 1, f"{where}: {posts(state, path)}"
        assert len(state[kind]) <= 1, f"{where}: {state[kind]}"


def test_a_worker_killed_anywhere_in_the_billing_night_never_repeats_an_effect(
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED)
    # The uninterrupted night. Task keys are the fleet's: each night below has a fleet (a
    # database) of its own, as one ticket is worked on once per fleet.
    with fleet(tmp_path / "baseline") as f:
        with running_service(f.base / "state.json", latency_ms="150") as service:
            f.env_extra["BILLING_URL"] = service.url
            f.worker()
            ws = make_workspace(f.base, edit=whole_night)
            done = f.submit(ws / "night.toml", "--id", f.id("baseline"), wait=True)
            assert done["stop_reason"] == "GOAL_MET", done
            never_twice(service.state(), "baseline")
        expected = essentials(result_of(f.runs / f.id("baseline")))
        expected_trees = branch_trees(f.runs / f.id("baseline"))

    for n in range(TRIALS):
        where = f"trial {n} (seed {SEED})"
        with fleet(tmp_path / f"t{n}") as f:
            with running_service(f.base / "state.json", latency_ms="150", seed=n) as service:
                f.env_extra["BILLING_URL"] = service.url
                first = f.worker()
                ws = make_workspace(f.base, edit=whole_night)
                night = f"trial-{n}"
                f.submit(ws / "night.toml", "--id", f.id(night), "--heartbeat-s", "2")
                run = f.runs / f.id(night)
                wait_for(lambda run=run: (run / "trace.jsonl").exists(), 60, "the night")
                time.sleep(rng.uniform(0.0, 2.5))
                first.machine_lost()
                assert not marked_pids(first.mark)
                second = f.worker()
                done = f.submit(ws / "night.toml", "--id", f.id(night), wait=True)
                state = service.state()
                assert second.stop() == 0
            never_twice(state, where)
            result = result_of(run)
            rows = [r for r in f.effects() if r["run_id"] == result["run_id"]]
            recorded = {e["key"]: e["state"] for e in result["effects"]}
            assert recorded == {r["step_key"]: r["state"] for r in rows}, where
            # Nothing reached the provider without a ledger row written first.
            keys = {r["step_key"] for r in rows}
            for kind in PATHS.values():
                for effect in state[kind]:
                    assert effect["idempotency_key"] in keys, f"{where}: {effect}"
            unsure = [r for r in rows if r["state"] in ("intended", "unknown")]
            if unsure:
                # Killed between intent and answer: never redone, and left for a person (the
                # task itself may still verify: the provider did it before the kill).
                listed = f.cli("review", "--database", f.database, "--json")
                items = {i["id"] for i in json.loads(listed.stdout)}
                for r in unsure:
                    assert f"effect:{r['step_key']}" in items, f"{where}: {r} not in review"
                continue
            if done["deliveries"] == 1:
                continue  # the kill came after the night had ended
            assert essentials(result) == expected, where
            assert [s for s, _ in branch_trees(run)] == [s for s, _ in expected_trees], where


def test_two_nights_sharing_a_task_key_on_two_workers_make_the_effect_once(
    tmp_path: Path,
) -> None:
    with fleet(tmp_path) as f:
        with running_service(tmp_path / "state.json", latency_ms="50") as service:
            f.env_extra["BILLING_URL"] = service.url
            f.worker("--max-nights", "1")
            f.worker("--max-nights", "1")
            # The example's own cap ends the first night after the refund and the email,
            # goal unmet: the second night, another delivery of the same ticket, tries them.
            one = make_workspace(tmp_path / "one")
            two = make_workspace(tmp_path / "two")
            a = f.submit(one / "night.toml", "--id", f.id("ticket-88231-a"), wait=True)
            took_a = next(w for w in f.workers if str(w.proc.pid) in f.nights()[0]["worker"])
            assert took_a.stop() == 0  # the second night is carried out by the other worker
            b = f.submit(two / "night.toml", "--id", f.id("ticket-88231-b"), wait=True)
            assert len({n["worker"] for n in f.nights()}) == 2
            state = service.state()
        never_twice(state, "two nights")
        assert a["stop_reason"] == "BUDGET_EXHAUSTED:money", a
        first, second = result_of(Path(a["run_dir"])), result_of(Path(b["run_dir"]))
        refused = [e for e in second["effects"] if e["state"] == "refused"]
        assert {e["tool"] for e in refused} >= {"issue_refund", "send_email"}, second["effects"]
        assert {e["earlier"]["run_id"] for e in refused} == {first["run_id"]}
        assert {r["run_id"] for r in f.effects()} == {first["run_id"]}
        keys = [r["task_key"] for r in f.effects() if r["task_key"]]
        assert len(keys) == len(set(keys)), keys


def test_the_review_queue_reads_every_night_of_the_fleet_database(tmp_path: Path) -> None:
    with fleet(tmp_path) as f:
        with running_service(tmp_path / "state.json") as service:
            f.env_extra["BILLING_URL"] = service.url
            f.worker()
            ws = make_workspace(tmp_path / "one")
            a = f.submit(ws / "night.toml", "--id", f.id("review"), wait=True)
        run_id = result_of(Path(a["run_dir"]))["run_id"]
        # What a worker lost between a ticket close's intent and its answer leaves behind.
        query(
            f.database,
            "INSERT INTO effects (run_id, task_id, step_key, task_key, tool, args, state,"
            " created_at, updated_at) VALUES (%s, 'close_ticket', %s, NULL, 'close_ticket',"
            " '{\"ticket_id\": \"88231\"}', 'unknown', 'now', 'now')",
            (run_id, f"{run_id}:close_ticket:1:1"),
        )
        listed = f.cli("review", "--database", f.database, "--json")
        assert listed.returncode == 0, listed.stderr
        items = {i["id"]: i for i in json.loads(listed.stdout)}
        key = f"effect:{run_id}:close_ticket:1:1"
        assert key in items and "88231" in items[key]["summary"]
        assert any("issue_refund" in done for done in items[key]["effects_done"])
        assert f.report()["unknown_effects"] == 1
        said = f.cli(
            "review", "resolve", key, "--happened", "--note", "closed by hand",
            "--database", f.database,
        )  # fmt: skip
        assert said.returncode == 0, said.stderr
        again = json.loads(f.cli("review", "--database", f.database, "--json").stdout)
        assert key not in {i["id"] for i in again}
        assert f.report()["unknown_effects"] == 0  # settled as having happened
