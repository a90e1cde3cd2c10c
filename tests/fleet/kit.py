"""The fleet in tests: the PostgreSQL and Temporal servers CI starts (scripts/fleet-services),
a fresh database and task queue per test, real worker processes, real submissions; and, for a
test that stops the fleet database, a PostgreSQL server of its own."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.kills import (
    kill_everything,
    kill_marked,
    marked_env,
    marked_pids,
    overnight,
    start_cli,
)
from tests.helpers.nights import git
from tests.helpers.toml import dumps

psycopg = pytest.importorskip("psycopg")

DATABASE_ENV, TEMPORAL_ENV = "OVERNIGHT_TEST_DATABASE", "OVERNIGHT_TEST_TEMPORAL"


@dataclass(frozen=True)
class Services:
    admin_url: str
    temporal: str


def services() -> Services:
    """The servers the fleet tests need; skipped when absent outside CI, failed under CI."""
    url, temporal = os.environ.get(DATABASE_ENV), os.environ.get(TEMPORAL_ENV)
    if not url or not temporal:
        why = (
            f"{DATABASE_ENV} and {TEMPORAL_ENV} are not set: start the servers with "
            "`scripts/fleet-services start DIR` and source DIR/env"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why)
        pytest.skip(why)
    return Services(url, temporal)


@contextlib.contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """A database of its own for one test, dropped after it."""
    name = f"fleet_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    info = psycopg.conninfo.conninfo_to_dict(admin_url)
    info["dbname"] = name
    url = psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items() if v})
    try:
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def query(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    from psycopg.rows import dict_row

    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        cursor = conn.execute(sql, params)  # type: ignore[arg-type]
        return list(cursor.fetchall()) if cursor.description is not None else []


@dataclass
class Worker:
    proc: subprocess.Popen[bytes]
    mark: str
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_ready(self, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while " ready: " not in self.text():
            if self.proc.poll() is not None:
                raise AssertionError(f"the worker exited {self.proc.returncode}:\n{self.text()}")
            if time.monotonic() > end:
                raise AssertionError(f"the worker never got ready:\n{self.text()}")
            time.sleep(0.05)

    def worker_pid(self) -> int:
        """The worker's own process (seen from here), not the shell of its machine."""
        for pid in marked_pids(self.mark):
            with contextlib.suppress(OSError):
                words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                wanted = b"worker" in words and b"fleet" in words
                if wanted and words[0] != b"unshare" and b"-c" not in words:
                    return pid
        raise AssertionError(f"no worker process carries mark {self.mark}")

    def machine_lost(self) -> None:
        """kill -9 of the worker and of everything it started, at one instant."""
        kill_everything(self.proc, self.mark)

    def freeze(self) -> set[int]:
        """SIGSTOP the whole machine, as a paused VM: the process group of the worker (and of
        its machine's shell) and the group of every process it started (each command, the
        guard: sessions of their own), until no group of it is left running. Returns the
        groups, for ``thaw``. Nothing a frozen process would do (heartbeat, renew its lease,
        hear that it was cancelled) happens until then."""
        groups = {self.proc.pid}
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGSTOP)
        while True:
            found = set()
            for pid in marked_pids(self.mark):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    found.add(os.getpgid(pid))
            if found <= groups:
                return groups
            for pgid in found - groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGSTOP)
            groups |= found

    @staticmethod
    def thaw(groups: set[int]) -> None:
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGCONT)

    def stop(self) -> int:
        """SIGTERM; the exit code (killed after 60 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.machine_lost()
        return self.proc.returncode

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.machine_lost()
        kill_marked(self.mark)


@dataclass
class Fleet:
    """One test's fleet: its database, task queue, shared runs directory and workers."""

    services: Services
    database: str
    base: Path
    task_queue: str = field(default_factory=lambda: f"q-{uuid.uuid4().hex[:10]}")
    workers: list[Worker] = field(default_factory=list)
    env_extra: dict[str, str] = field(default_factory=dict)

    def id(self, name: str) -> str:
        """A night id of this test's own: the Temporal server outlives the test."""
        return f"{name}-{self.task_queue}"

    @property
    def runs(self) -> Path:
        return self.base / "runs"

    def env(self) -> tuple[dict[str, str], str]:
        env, mark = marked_env()
        env.update(self.env_extra)
        env.pop("OVERNIGHT_DATABASE", None)
        env.pop("OVERNIGHT_TEMPORAL", None)
        env["OVERNIGHT_HOME"] = str(self.base / "home")
        return env, mark

    def worker(
        self,
        *extra: str,
        ready: bool = True,
        machine: str | None = None,
        temporal: str | None = None,
        database: str | None = None,
    ) -> Worker:
        """A worker process; ``machine``: in PID, mount and UTS namespaces of its own, with
        that hostname (a machine of its own, sharing only the filesystem), under a shell
        that outlives it as the namespace's first process (what else runs on that machine
        lives on when the worker dies). ``temporal`` and ``database``: other addresses of
        the servers (through a ``Link``)."""
        env, mark = self.env()
        log = self.base / f"worker-{len(self.workers) + 1}.log"
        args = overnight(
            "fleet",
            "worker",
            "--temporal",
            temporal or self.services.temporal,
            "--database",
            database or self.database,
            "--runs",
            self.runs,
            "--task-queue",
            self.task_queue,
            *extra,
        )
        if machine is not None:
            boot = f'hostname {machine} && "$@" & wait $!; exec sleep 600'
            namespaces = ["unshare", "--pid", "--fork", "--mount-proc", "--uts", "--"]
            args = [*namespaces, "/bin/sh", "-c", boot, machine, *args]
        w = Worker(start_cli(args, env, self.base, log), mark, log)
        self.workers.append(w)
        if ready:
            w.wait_ready()
        return w

    def cli(self, *args: str | Path, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        env, mark = self.env()
        try:
            return subprocess.run(
                overnight(*args),
                env=env,
                cwd=self.base,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        finally:
            kill_marked(mark)

    def submit(
        self, spec: Path, *extra: str, wait: bool = False, timeout: float = 180.0
    ) -> dict[str, Any]:
        args: list[str | Path] = [
            "fleet",
            "submit",
            spec,
            "--temporal",
            self.services.temporal,
            "--task-queue",
            self.task_queue,
            *extra,
        ]
        if wait:
            args.append("--wait")
        done = self.cli(*args, timeout=timeout)
        assert done.stdout.strip(), f"submit said nothing (exit {done.returncode}): {done.stderr}"
        answer: dict[str, Any] = json.loads(done.stdout)
        answer["_exit"] = done.returncode
        return answer

    def report(self, *extra: str) -> dict[str, Any]:
        done = self.cli("fleet", "report", "--database", self.database, "--json", *extra)
        assert done.returncode == 0, done.stderr
        data: dict[str, Any] = json.loads(done.stdout)
        return data

    def nights(self) -> list[dict[str, Any]]:
        return query(self.database, "SELECT * FROM nights ORDER BY night_id")

    def effects(self) -> list[dict[str, Any]]:
        return query(self.database, "SELECT * FROM effects ORDER BY id")

    def close(self) -> None:
        for w in self.workers:
            w.cleanup()


@contextlib.contextmanager
def fleet(base: Path, database: str | None = None) -> Iterator[Fleet]:
    """A fleet of this test's own; ``database``: its database (by default a fresh one on the
    shared server)."""
    svc = services()
    base.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        url = database or stack.enter_context(fresh_database(svc.admin_url))
        f = Fleet(svc, url, base)
        try:
            yield f
        finally:
            f.close()


def address(url: str) -> tuple[str, int]:
    """(host, port) of a database URL."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    return str(info.get("host") or "127.0.0.1"), int(info.get("port") or 5432)


def workflow_of(f: Fleet, workflow_id: str) -> dict[str, Any]:
    """How Temporal describes a workflow: its status, its execution timeout (seconds, None
    when it has none) and, once it completed, its result."""
    from temporalio.client import Client, WorkflowExecutionStatus
    from temporalio.contrib.pydantic import pydantic_data_converter

    async def describe() -> dict[str, Any]:
        client = await Client.connect(f.services.temporal, data_converter=pydantic_data_converter)
        handle = client.get_workflow_handle(workflow_id)
        desc = await handle.describe()
        config = desc.raw_description.execution_config
        timeout = config.workflow_execution_timeout
        answer: dict[str, Any] = {
            "status": desc.status.name if desc.status is not None else None,
            "execution_timeout_s": (
                timeout.ToTimedelta().total_seconds()
                if config.HasField("workflow_execution_timeout")
                else None
            ),
        }
        if desc.status == WorkflowExecutionStatus.COMPLETED:
            answer["result"] = await handle.result()
        return answer

    return asyncio.run(describe())


# -- a PostgreSQL server of a test's own ----------------------------------------------------


def _pg_bin() -> Path | None:
    """Where the PostgreSQL server programs are: the newest Debian version, else on PATH."""
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if versions:
        return versions[-1]
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


@dataclass
class Postgres:
    """A PostgreSQL server of one test's own (its data directory, its port), which the test
    may stop and start again: the fleet database lost and back, at the same address."""

    bin: Path
    home: Path
    port: int = 0

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, program: str, *args: str) -> subprocess.CompletedProcess[str]:
        # Run as the postgres user when root: the server refuses to run as root.
        as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        return subprocess.run(
            [*as_user, str(self.bin / program), *args], capture_output=True, text=True
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.home} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c max_connections=100"
        )
        data, log = str(self.home / "data"), str(self.home / "server.log")
        done = self._run("pg_ctl", "-D", data, "-l", log, "-w", "-o", options, "start")
        if done.returncode != 0:
            raise AssertionError(f"PostgreSQL did not start: {done.stderr}\n{_tail(log)}")

    def stop(self) -> None:
        done = self._run("pg_ctl", "-D", str(self.home / "data"), "-m", "fast", "-w", "stop")
        if done.returncode != 0:
            raise AssertionError(f"PostgreSQL did not stop: {done.stderr}")

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.home / "data"), "status").returncode == 0


def _tail(path: str) -> str:
    with contextlib.suppress(OSError):
        return Path(path).read_text(errors="replace")[-2000:]
    return ""


@contextlib.contextmanager
def private_postgres() -> Iterator[Postgres]:
    """A PostgreSQL server of this test's own on a free local port, removed after it."""
    services()  # the fleet's servers are needed all the same: skipped (or failed) as they are
    pg_bin = _pg_bin()
    if pg_bin is None:
        pytest.fail("no PostgreSQL server programs (scripts/fleet-services installs them)")
    # Not under pytest's own temporary folder: the postgres user must reach its data.
    home = Path(tempfile.mkdtemp(prefix="overnight-fleet-pg-"))
    try:
        if os.geteuid() == 0:
            shutil.chown(home, "postgres")
        pg = Postgres(pg_bin, home)
        made = pg._run(
            "initdb", "-D", str(home / "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8"
        )
        assert made.returncode == 0, made.stderr
        for attempt in range(3):  # a port taken between the pick and the bind: another
            pg.port = _free_port()
            try:
                pg.start()
                break
            except AssertionError:
                if attempt == 2:
                    raise
        try:
            yield pg
        finally:
            if pg.running():
                pg.stop()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _free_port() -> int:
    """A free port below the kernel's ephemeral range (see scripts/fleet-services)."""
    for _ in range(200):
        port = random.randint(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise AssertionError("no free port between 20000 and 32000")


class Link:
    """A TCP link from a worker to a server that a test can cut: a network partition. New
    connections are refused after the cut, and those open are torn down."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.cut_off = False
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            try:
                far = socket.create_connection(self.target)
            except OSError:
                near.close()
                continue
            with self._lock:
                if self.cut_off:
                    near.close()
                    far.close()
                    continue
                self._open += [near, far]
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                b.shutdown(socket.SHUT_WR)

    def cut(self) -> None:
        with self._lock:
            self.cut_off = True
            self.listener.close()
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def url(self, database_url: str) -> str:
        """``database_url`` through this link."""
        info = psycopg.conninfo.conninfo_to_dict(database_url)
        info.update(host="127.0.0.1", port=str(self.port))
        return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items() if v})


# -- nights ---------------------------------------------------------------------------------

FAKES = '''"""Fakes for fleet nights: a model that bills a fixed usage per call, an executor that
calls it and writes its task's file. The request is at least 1,000 bytes, so the 1,000 input
tokens billed lie within the reservation (a byte-level tokenizer never bills more tokens than
bytes): an honest provider, whose bills the fleet cap can bound."""
import os
import time

from overnight.seams import ExecResult
from overnight.messages.types import ModelRequest
from overnight.testing.fakes import text_answer, usage_dict

LATENCY_S = float(os.environ.get("FLEET_FAKE_LATENCY_S", "0"))
SYSTEM = "You carry out one task: write the file its brief names, nothing else.\\n" * 14


def model(request):
    time.sleep(LATENCY_S)
    return text_answer("done", usage_dict(input=1000, output=100))


class Executor:
    def execute(self, task, ctx):
        ctx.call_model(
            ModelRequest(
                model=ctx.model,
                purpose="execute",
                system=SYSTEM,
                messages=[{"role": "user", "content": task.brief}],
                max_tokens=200,
            )
        )
        (ctx.workdir / f"{task.id}.txt").write_text(task.id)
        return ExecResult("finished", "wrote the file")
'''

#: $5 / $25 per million: one fake call (1,000 in, 100 out) costs $0.0075.
CALL_USD = 0.0075


def model_night(
    base: Path, name: str, tasks: int, *, usd: float = 1.0, fleet_usd: float | None = None
) -> Path:
    """A workspace whose night has ``tasks`` agent tasks, one fake model call each."""
    ws = base / name
    ws.mkdir(parents=True)
    (ws / "fleet_fakes.py").write_text(FAKES)
    git(ws, "init", "-q", "-b", "main")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "initial")
    spec: dict[str, Any] = {
        "goal": f"Write the {tasks} files of {name}.",
        "workspace": ".",
        "budget": {"usd": usd, "hours": 1.0},
        "predicate": {"command": f"test -f t{tasks - 1}.txt", "timeout_s": 30},
        "model": {"provider": "python", "target": "fleet_fakes:model", "name": "fake-opus"},
        "prices": {"fake-opus": {"input": 5.0, "output": 25.0}},
        "executor": {"target": "fleet_fakes:Executor"},
        "sandbox": {"mode": "off"},
        "run": {"replan": False, "drift_every": 1000},
        "tasks": [
            {
                "id": f"t{i}",
                "title": f"file {i}",
                "brief": f"write t{i}.txt",
                "verify": f"test -f t{i}.txt",
                "value": tasks - i,
            }
            for i in range(tasks)
        ],
    }
    if fleet_usd is not None:
        spec["fleet"] = {"usd_per_day": fleet_usd}
    (ws / "night.toml").write_text(dumps(spec))
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "night")
    return ws / "night.toml"


def command_night(
    base: Path,
    name: str,
    tasks: int,
    *,
    seconds: float = 0.3,
    predicate: str | None = None,
    **budget: Any,
) -> Path:
    """A workspace whose night has ``tasks`` command tasks, each sleeping ``seconds``."""
    ws = base / name
    ws.mkdir(parents=True)
    git(ws, "init", "-q", "-b", "main")
    git(ws, "commit", "-q", "--allow-empty", "-m", "initial")
    spec: dict[str, Any] = {
        "goal": f"Write the {tasks} files of {name}.",
        "workspace": str(ws),
        "budget": {"usd": 1.0, "hours": 1.0, **budget},
        "predicate": {"command": predicate or f"test -f f{tasks - 1}.txt", "timeout_s": 30},
        "sandbox": {"mode": "off"},
        "tasks": [
            {
                "id": f"f{i}",
                "title": f"file {i}",
                "command": f"sleep {seconds}; echo {i} > f{i}.txt",
                "verify": f"test -f f{i}.txt",
                "value": tasks - i,
            }
            for i in range(tasks)
        ],
    }
    path = base / f"{name}.toml"
    path.write_text(dumps(spec))
    return path


def branch_trees(run_dir: Path) -> list[tuple[str, str]]:
    """(subject, tree) of each commit of the run's branch after its base."""
    manifest = json.loads((run_dir / "run.json").read_text())
    workspace = Path(manifest["workspace"])
    base = json.loads((run_dir / "result.json").read_text())["branch"]["base_commit"]
    out = git(workspace, "log", "--reverse", "--format=%s%x00%T", f"{base}..{manifest['branch']}")
    return [tuple(line.split("\0")) for line in out.splitlines() if line]  # type: ignore[misc]


def copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)
