"""``overnight fleet worker``: a Temporal worker that carries out nights.

On start it migrates the fleet database, then polls its task queue. Each night runs in a
thread of the worker's pool through the public ``overnight.run``/``overnight.resume``. SIGTERM
(or SIGINT) stops polling and drains every night in flight as one machine would
(``TIME_LIMIT:sigterm``, resumable); their activities fail retryably, so another worker
resumes them. The worker exits 0 once the drained nights have been handed back.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import socket
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import RestrictedWorkflowAccessError

from overnight.core.errors import ConfigError
from overnight.fleet.activities import Drains, NightActivities
from overnight.fleet.database import connect_pool, migrate
from overnight.fleet.guard import MARK_ENV
from overnight.fleet.submission import DEFAULT_TASK_QUEUE
from overnight.fleet.workflow import NightWorkflow, RecordWorkflow


async def connect(address: str, namespace: str) -> Client:
    try:
        return await Client.connect(
            address, namespace=namespace, data_converter=pydantic_data_converter
        )
    except Exception as exc:  # the SDK raises RuntimeError with the transport's reason
        raise ConfigError(
            "--temporal",
            f"cannot reach Temporal at {address}: {exc}",
            "start it (`temporal server start-dev --headless`) or pass its HOST:PORT",
        ) from None


def start_guard() -> subprocess.Popen[bytes]:
    """Mark this worker's environment (every command its nights run inherits a copy) and
    start the guard that kills the marked processes once this worker is gone, however it
    died (``overnight.fleet.guard``)."""
    mark = uuid.uuid4().hex
    os.environ[MARK_ENV] = mark
    return subprocess.Popen(
        [sys.executable, "-m", "overnight.fleet.guard", mark, str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop_guard(guard: subprocess.Popen[bytes]) -> None:
    """This worker ends: the guard ends whatever a night of it may have left behind."""
    if guard.stdin is not None:
        guard.stdin.close()
    try:
        guard.wait(timeout=30)
    except subprocess.TimeoutExpired:
        guard.kill()
        guard.wait()


async def serve(
    *,
    temporal: str,
    database: str,
    runs: Path,
    task_queue: str = DEFAULT_TASK_QUEUE,
    namespace: str = "default",
    max_nights: int = 32,
    usd_per_day: float | None = None,
    drain_timeout_s: float = 120.0,
) -> int:
    runs = runs.absolute()
    runs.mkdir(parents=True, exist_ok=True)
    identity = f"{socket.gethostname()}:{os.getpid()}"
    guard = start_guard()
    pool = connect_pool(database, max_size=max(4, min(max_nights * 2, 200)))
    try:
        migrate(pool)
        client = await connect(temporal, namespace)
        drains = Drains()
        activities = NightActivities(pool, runs, identity, usd_per_day=usd_per_day, drains=drains)
        with ThreadPoolExecutor(max_workers=max_nights, thread_name_prefix="night") as pool_x:
            worker = Worker(
                client,
                task_queue=task_queue,
                workflows=[NightWorkflow, RecordWorkflow],
                activities=[activities.register, activities.carry_out, activities.give_up],
                activity_executor=pool_x,
                max_concurrent_activities=max_nights,
                graceful_shutdown_timeout=timedelta(seconds=drain_timeout_s),
                workflow_failure_exception_types=[RestrictedWorkflowAccessError],
                identity=identity,
            )
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            running = asyncio.create_task(worker.run())
            print(
                f"overnight fleet worker {identity} ready: task queue {task_queue!r}, "
                f"up to {max_nights} nights, runs in {runs}",
                file=sys.stderr,
                flush=True,
            )
            done, _ = await asyncio.wait(
                [running, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED
            )
            if running in done:
                running.result()  # the worker failed on its own: raise its error
                return 1
            in_flight = drains.in_flight()
            print(
                f"overnight fleet worker {identity}: draining {in_flight} nights",
                file=sys.stderr,
                flush=True,
            )
            drains.drain("sigterm")
            await worker.shutdown()
            await running
    finally:
        pool.close()
        stop_guard(guard)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"overnight fleet worker {identity} stopped (peak memory {peak_mb:.0f} MB)",
        file=sys.stderr,
        flush=True,
    )
    return 0
