"""The fleet's figures: nights in flight on one 2-core worker, and the time from a worker's
kill -9 to its night resumed on another. Figures, not timed tests.

``python3 -m bench.fleet`` needs the servers of ``scripts/fleet-services`` (it reads
``OVERNIGHT_TEST_DATABASE`` and ``OVERNIGHT_TEST_TEMPORAL``) and writes
``bench/fleet_results.json``:

- ``in_flight``: NIGHTS nights of ten fake-model tasks whose every call takes 2 s (simulated
  provider latency) submitted at once to one worker: the most nights it carried at the same
  time (goal: at least 100), the worker's peak memory, and the seconds until all ended;
- ``kill_to_resume``: a worker carrying a night is killed with SIGKILL (its commands too); the
  seconds until another worker's resume of that run directory begins (goal: at most the
  heartbeat timeout + 5 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg

from overnight.fleet.client import submission_of, submit
from overnight.fleet.worker import connect

HERE = Path(__file__).resolve().parent
#: Tasks per night of the in-flight figure: one 2 s call each, so a night lasts long enough
#: for all of them to be submitted and taken while the first are still running.
TASKS = 10
IDENT = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]

FAKES = """
import time
from overnight.seams import ExecResult
from overnight.messages.types import ModelRequest
from overnight.testing.fakes import text_answer, usage_dict


def model(request):
    time.sleep(2.0)  # a provider's latency
    return text_answer("done", usage_dict(input=1000, output=100))


class Executor:
    def execute(self, task, ctx):
        ctx.call_model(ModelRequest(model=ctx.model, purpose="execute", system="s",
                                    messages=[{"role": "user", "content": task.brief}],
                                    max_tokens=100))
        (ctx.workdir / f"{task.id}.txt").write_text(task.id)
        return ExecResult("finished", "done")
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *IDENT, *args], check=True, capture_output=True)


def model_workspace(base: Path, name: str, tasks: int) -> Path:
    ws = base / name
    ws.mkdir(parents=True)
    (ws / "bench_fakes.py").write_text(FAKES)
    lines = [
        f'goal = "Write the files of {name}."',
        'workspace = "."',
        "[budget]\nusd = 5.0\nhours = 1.0",
        f'[predicate]\ncommand = "test -f t{tasks - 1}.txt"',
        '[model]\nprovider = "python"\ntarget = "bench_fakes:model"\nname = "fake"',
        "[prices.fake]\ninput = 5.0\noutput = 25.0",
        '[executor]\ntarget = "bench_fakes:Executor"',
        '[sandbox]\nmode = "off"',
        "[run]\nreplan = false\ndrift_every = 1000",
    ]
    for i in range(tasks):
        lines.append(
            f'[[tasks]]\nid = "t{i}"\ntitle = "t{i}"\nbrief = "write t{i}.txt"\n'
            f'verify = "test -f t{i}.txt"\nvalue = {tasks - i}'
        )
    (ws / "night.toml").write_text("\n".join(lines) + "\n")
    git(ws, "init", "-q", "-b", "main")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "initial")
    return ws / "night.toml"


def command_spec(base: Path, name: str, tasks: int, seconds: float) -> Path:
    ws = base / name
    ws.mkdir(parents=True)
    git(ws, "init", "-q", "-b", "main")
    git(ws, "commit", "-q", "--allow-empty", "-m", "initial")
    lines = [
        f'goal = "Write the files of {name}."',
        f'workspace = "{ws}"',
        "[budget]\nusd = 1.0\nhours = 1.0",
        f'[predicate]\ncommand = "test -f f{tasks - 1}.txt"',
        '[sandbox]\nmode = "off"',
    ]
    for i in range(tasks):
        lines.append(
            f'[[tasks]]\nid = "f{i}"\ntitle = "f{i}"\n'
            f'command = "sleep {seconds}; echo {i} > f{i}.txt"\nverify = "test -f f{i}.txt"'
        )
    path = base / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


class Worker:
    def __init__(self, base: Path, db: str, temporal: str, queue: str, *extra: str) -> None:
        self.log = base / f"worker-{uuid.uuid4().hex[:6]}.log"
        env = dict(os.environ, OVERNIGHT_HOME=str(base / "home"))
        args = [
            sys.executable,
            "-m",
            "overnight",
            "fleet",
            "worker",
            "--temporal",
            temporal,
            "--database",
            db,
            "--runs",
            str(base / "runs"),
            "--task-queue",
            queue,
            *extra,
        ]
        with open(self.log, "wb") as sink:
            self.proc = subprocess.Popen(
                args, env=env, stdout=sink, stderr=sink, start_new_session=True
            )
        end = time.monotonic() + 60
        while " ready: " not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > end:
                raise SystemExit(f"the worker did not start:\n{self.log.read_text()}")
            time.sleep(0.05)

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
        return 0.0

    def kill(self) -> None:
        """SIGKILL the worker's session: the worker and every command it started."""
        for pid in _pids_of_session(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.kill()


def _pids_of_session(sid: int) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    found.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                pass
    return found


def running_nights(db: str) -> int:
    with psycopg.connect(db, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM nights WHERE state = 'running'").fetchone()
    return int(row[0]) if row else 0


def drop_database(admin: str, url: str) -> None:
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def fresh_database(admin: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    info = psycopg.conninfo.conninfo_to_dict(admin)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items() if v})


async def submit_all(temporal: str, queue: str, specs: list[Path], **kw: Any) -> list[str]:
    client = await connect(temporal, "default")
    subs = [submission_of(spec, f"{spec.parent.name}-{queue}", **kw) for spec in specs]
    await asyncio.gather(*(submit(client, sub, task_queue=queue) for sub in subs))
    return [sub.night_id for sub in subs]


def in_flight(base: Path, admin: str, temporal: str, nights: int) -> dict[str, Any]:
    db = fresh_database(admin)
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    specs = [model_workspace(base / "ws", f"n{i:03d}", TASKS) for i in range(nights)]
    worker = Worker(base, db, temporal, queue, "--max-nights", str(nights + 8))
    try:
        started = time.monotonic()
        asyncio.run(submit_all(temporal, queue, specs, heartbeat_s=30.0))
        most, finished_at = 0, None
        while time.monotonic() - started < 900:
            now = running_nights(db)
            most = max(most, now)
            with psycopg.connect(db, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM nights WHERE state = 'finished'"
                ).fetchone()
            if row and int(row[0]) == nights:
                finished_at = time.monotonic()
                break
            time.sleep(0.25)
        rss = worker.peak_rss_mb()
    finally:
        worker.stop()
        drop_database(admin, db)
    return {
        "nights": nights,
        "tasks_per_night": TASKS,
        "call_latency_s": 2.0,
        "most_in_flight": most,
        "worker_peak_rss_mb": rss,
        "seconds_to_finish_all": None if finished_at is None else round(finished_at - started, 1),
        "goal": 100,
        "met": most >= 100,
    }


def kill_to_resume(base: Path, admin: str, temporal: str, heartbeat_s: float) -> dict[str, Any]:
    db = fresh_database(admin)
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    spec = command_spec(base / "ws", "long", 40, 0.5)
    first = Worker(base, db, temporal, queue)
    [night] = asyncio.run(submit_all(temporal, queue, [spec], heartbeat_s=heartbeat_s))
    trace = base / "runs" / night / "trace.jsonl"
    while not trace.exists():
        time.sleep(0.05)
    time.sleep(3.0)
    second = Worker(base, db, temporal, queue)
    try:
        first.kill()
        killed = time.monotonic()
        resumed = None
        while time.monotonic() - killed < 120:
            if '"decision":"resumed"' in trace.read_text().replace(" ", ""):
                resumed = time.monotonic() - killed
                break
            time.sleep(0.05)
    finally:
        second.stop()
        drop_database(admin, db)
    return {
        "heartbeat_timeout_s": heartbeat_s,
        "seconds_kill_to_resume": None if resumed is None else round(resumed, 2),
        "goal_s": heartbeat_s + 5,
        "met": resumed is not None and resumed <= heartbeat_s + 5,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m bench.fleet", description=__doc__)
    p.add_argument("--nights", type=int, default=120, help="nights submitted at once")
    p.add_argument("--heartbeat-s", type=float, default=5.0)
    args = p.parse_args(argv)
    admin, temporal = (
        os.environ.get("OVERNIGHT_TEST_DATABASE"),
        os.environ.get("OVERNIGHT_TEST_TEMPORAL"),
    )
    if not admin or not temporal:
        print("start the servers first: scripts/fleet-services start DIR; source DIR/env")
        return 64
    with tempfile.TemporaryDirectory(prefix="overnight-fleet-bench-") as tmp:
        base = Path(tmp)
        os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
        os.environ["GIT_CONFIG_GLOBAL"] = os.devnull
        print(f"in flight: {args.nights} nights on one worker ...", flush=True)
        flight = in_flight(base / "flight", admin, temporal, args.nights)
        print(f"  {flight}", flush=True)
        print("kill -9 to resume ...", flush=True)
        resume = kill_to_resume(base / "kill", admin, temporal, args.heartbeat_s)
        print(f"  {resume}", flush=True)
    out = {
        "kind": "overnight-fleet-bench",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "in_flight": flight,
        "kill_to_resume": resume,
    }
    (HERE / "fleet_results.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {HERE / 'fleet_results.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
