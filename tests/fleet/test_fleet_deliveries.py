"""How often the fleet delivers a night: a night that kills its worker every time is given up
after ``[fleet] max_deliveries`` (in the review queue, every delivery listed), and a night
whose progress stands still is drained and delivered again within its stall timeout."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.fleet.kit import command_night, fleet
from tests.helpers.kills import marked_pids, wait_for

pytest.importorskip("temporalio")


def with_task(spec: Path, command: str, fleet_toml: str) -> Path:
    """``spec`` (a one-task command night) with its task's command and a ``[fleet]`` table."""
    text = spec.read_text()
    old = "sleep 0.1; echo 0 > f0.txt"
    assert old in text
    spec.write_text(text.replace(old, command) + f"\n[fleet]\n{fleet_toml}\n")
    return spec


def test_a_night_that_kills_its_worker_every_time_ends_after_max_deliveries(
    tmp_path: Path,
) -> None:
    with fleet(tmp_path) as f:
        # The command ends the worker that runs it, as an out-of-memory kill would.
        spec = with_task(
            command_night(tmp_path / "specs", "oom", 1, seconds=0.1),
            "kill -9 $PPID",
            "max_deliveries = 2",
        )
        night = f.id("oom")
        f.submit(spec, "--id", night, "--heartbeat-s", "1.5")
        started = 0

        def finished() -> bool:
            nonlocal started
            if not any(w.proc.poll() is None for w in f.workers):
                started += 1
                f.worker()
            rows = f.nights()
            return bool(rows) and rows[0]["state"] == "finished"

        wait_for(finished, 150, "the fleet to give the night up")
        [row] = f.nights()
        result = row["result"]
        assert result["stop_reason"] == "UNRECOVERABLE_ERROR:fleet_retries", result
        assert result["exit_code"] == 4 and result["resumable"] is False
        assert "max_deliveries (2) reached" in result["message"]
        lost = [d for d in result["deliveries"] if d["counted"]]
        assert [d["failure"] for d in lost] == ["HeartbeatTimeout"] * 2, result["deliveries"]
        assert started == 3  # two workers lost, the third one gave the night up
        on_disk = json.loads((Path(row["run_dir"]) / "result.json").read_text())
        assert on_disk["stop_reason"] == "UNRECOVERABLE_ERROR:fleet_retries"
        assert "#2 on " in on_disk["message"]
        listed = f.cli("review", "--database", f.database, "--json")
        items = [i for i in json.loads(listed.stdout) if i["kind"] == "run not resumable"]
        assert [i["run_dir"] for i in items] == [row["run_dir"]], listed.stdout
        assert "fleet_retries" in items[0]["summary"]
        done = f.submit(spec, "--id", night, wait=True)
        assert done["_exit"] == 4 and done["stop_reason"] == "UNRECOVERABLE_ERROR:fleet_retries"


def test_a_hung_night_is_drained_and_delivered_again_within_its_stall_timeout(
    tmp_path: Path,
) -> None:
    mark = tmp_path / "hung-once"
    with fleet(tmp_path) as f:
        # Hangs the first time (no output, no end), writes its file the second.
        command = f"if [ -e {mark} ]; then echo 0 > f0.txt; else touch {mark}; exec sleep 600; fi"
        spec = with_task(
            command_night(tmp_path / "specs", "hung", 1, seconds=0.1), command, "stall_s = 3"
        )
        worker = f.worker()
        begun = time.monotonic()
        done = f.submit(spec, "--id", f.id("hung"), "--heartbeat-s", "2", wait=True, timeout=120)
        took = time.monotonic() - begun
        assert done["stop_reason"] == "GOAL_MET" and done["deliveries"] == 2, done
        assert took < 3 + 30, took
        run = Path(done["run_dir"])
        history = [json.loads(h.read_text()) for h in sorted((run / "history").glob("*.json"))]
        assert [h["stop_reason"] for h in history] == ["TIME_LIMIT:stalled"]
        trace = [json.loads(x) for x in (run / "trace.jsonl").read_text().splitlines()]
        assert [e["decision"] for e in trace if e.get("decision") == "resumed"] == ["resumed"]
        # The hung command was ended with its process group, not left behind.
        assert not [p for p in marked_pids(worker.mark) if _is_sleep(p)]


def _is_sleep(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"sleep")
    except OSError:
        return False
