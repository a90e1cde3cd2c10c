"""One owner at a time, across machines. Each worker runs in PID, mount and UTS namespaces of
its own (a machine sharing only the filesystem); the night's one task is a command that
appends to a file outside the worktree and to one inside it. However the first machine is
lost (its worker killed while the rest of the machine runs on, cut off from the fleet's servers
while it runs, or frozen whole and thawed after its lease expired), the line is appended once
and the branch commits it once."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.fleet.kit import Fleet, Link, address, command_night, fleet, query
from tests.helpers.kills import wait_for

pytest.importorskip("temporalio")

if os.geteuid() != 0:
    pytest.skip("separate machines are made with unshare, as root", allow_module_level=True)


def appending_night(f: Fleet, name: str, log: Path, seconds: float) -> Path:
    """One command task: note its start, wait ``seconds``, then append the line (to the
    worktree's lines.txt and to ``log``)."""
    spec = command_night(f.base / "specs", name, 1, seconds=0.1)
    text = spec.read_text()
    command = f"echo started >> {log}; sleep {seconds}; echo line >> lines.txt; echo line >> {log}"
    text = text.replace("sleep 0.1; echo 0 > f0.txt", command)
    # Exit 1 (not done) until lines.txt holds the line exactly once.
    text = text.replace("test -f f0.txt", 'test \\"$(cat lines.txt 2>/dev/null)\\" = line')
    spec.write_text(text)
    return spec


def lines_of(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def committed(run_dir: Path) -> list[str]:
    """lines.txt as the night's branch holds it, and how many commits touched it."""
    manifest = json.loads((run_dir / "run.json").read_text())
    from tests.helpers.nights import git

    ws = Path(manifest["workspace"])
    text = git(ws, "show", f"{manifest['branch']}:lines.txt")
    touched = git(ws, "log", "--format=%H", manifest["branch"], "--", "lines.txt").split()
    return [*text.split(), f"commits={len(touched)}"]


def test_a_worker_killed_while_its_machine_runs_on_leaves_no_command_behind(
    tmp_path: Path,
) -> None:
    log = tmp_path / "appended.log"
    with fleet(tmp_path) as f:
        first = f.worker(machine="m1")
        # Long enough that the command is still running on m1 when m2 takes the night over.
        spec = appending_night(f, "killed", log, seconds=8)
        night = f.id("killed")
        f.submit(spec, "--id", night, "--heartbeat-s", "2")
        wait_for(lambda: lines_of(log) == ["started"], 60, "the command to start on m1")
        os.kill(first.worker_pid(), signal.SIGKILL)  # the worker only: m1 runs on
        f.worker(machine="m2")
        done = f.submit(spec, "--id", night, wait=True)
        assert done["stop_reason"] == "GOAL_MET" and done["deliveries"] == 2, done
        time.sleep(1)  # a command left running on m1 would have appended by now
        assert lines_of(log) == ["started", "started", "line"], lines_of(log)
        assert committed(Path(done["run_dir"])) == ["line", "commits=1"]
        [row] = f.nights()
        assert row["worker"].startswith("m2:")


def test_a_worker_cut_off_from_the_fleet_stops_its_night_before_another_takes_it(
    tmp_path: Path,
) -> None:
    log = tmp_path / "appended.log"
    with fleet(tmp_path) as f:
        host, _, port = f.services.temporal.rpartition(":")
        to_temporal = Link(host, int(port))
        to_database = Link(*address(f.database))
        first = f.worker(
            machine="m1",
            temporal=f"127.0.0.1:{to_temporal.port}",
            database=to_database.url(f.database),
        )
        spec = appending_night(f, "partitioned", log, seconds=4)
        night = f.id("partitioned")
        f.submit(spec, "--id", night, "--heartbeat-s", "3")
        wait_for(lambda: lines_of(log) == ["started"], 60, "the command to start on m1")
        to_temporal.cut()
        to_database.cut()
        cut_at = time.monotonic()
        f.worker(machine="m2")
        done = f.submit(spec, "--id", night, wait=True)
        assert done["stop_reason"] == "GOAL_MET" and done["deliveries"] == 2, done
        time.sleep(max(0.0, cut_at + 5 - time.monotonic()))  # past m1's command's own end
        assert lines_of(log) == ["started", "started", "line"], lines_of(log)
        run = Path(done["run_dir"])
        assert committed(run) == ["line", "commits=1"]
        # m1 landed nothing once cut off: the task was verified, then done, by m2's resume.
        trace = [json.loads(x) for x in (run / "trace.jsonl").read_text().splitlines()]
        order = [
            e.get("decision") for e in trace if e.get("decision") in ("resumed", "task_finished")
        ]
        assert order == ["resumed", "task_finished"], order
        assert first.proc.poll() is None  # m1 itself runs on, cut off


def test_a_frozen_machine_thawed_after_its_lease_expired_lands_nothing(tmp_path: Path) -> None:
    log = tmp_path / "appended.log"
    with fleet(tmp_path) as f:
        first = f.worker(machine="m1")
        spec = appending_night(f, "frozen", log, seconds=3)
        night = f.id("frozen")
        f.submit(spec, "--id", night, "--heartbeat-s", "2")
        wait_for(lambda: lines_of(log) == ["started"], 60, "the command to start on m1")
        # The whole of m1 stopped at once (its worker's process group and its command's): no
        # cancellation of its delivery, no drain, reaches it while its lease expires.
        frozen = first.freeze()
        f.worker(machine="m2")
        time.sleep(6)  # m1's lease and heartbeat long expired; m2 waits for the night's lock
        # Thawed, m1 learns from its worker (the delivery timed out: it drains the night) and
        # from its lease (not renewed) that the night is no longer its own: whichever comes
        # first, it must write nothing more.
        first.thaw(frozen)
        done = f.submit(spec, "--id", night, wait=True)
        assert done["stop_reason"] == "GOAL_MET", done
        assert lines_of(log).count("line") == 1, lines_of(log)
        run = Path(done["run_dir"])
        assert committed(run) == ["line", "commits=1"]
        # Thawed, m1's delivery found its fence down and wrote nothing: no result (the resume
        # after it would have kept it in history/), no commit. The task was verified first
        # (and done, if m1's command had not finished) by a resume holding a lease of its own
        # (m2's delivery, or m1's own next one).
        assert sorted(p.name for p in (run / "history").glob("*.json")) == []
        trace = [json.loads(x) for x in (run / "trace.jsonl").read_text().splitlines()]
        order = [
            e.get("decision") for e in trace if e.get("decision") in ("resumed", "task_finished")
        ]
        assert order[:1] == ["resumed"], order
        [lease] = query(f.database, "SELECT token FROM night_leases")
        assert lease["token"] >= 2, lease
