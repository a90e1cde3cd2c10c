"""The activities a fleet worker carries nights out with: all the I/O of a night's workflow.

``carry_out_night`` calls the public ``overnight.run`` (a new night) or ``overnight.resume``
(a run directory a dead or drained worker left behind) on ``RUNS/<night id>``, with the fleet's
effects ledger and daily money cap, heartbeating all the while. A night that ended before a
redelivery reached it is not run again: its result is the answer.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from overnight import api
from overnight.config.spec import load_spec
from overnight.core.errors import ConfigError, RunBusy
from overnight.fleet.database import Pool
from overnight.fleet.effects import PostgresEffectStore
from overnight.fleet.money import FleetMoney
from overnight.fleet.nights import Nights
from overnight.fleet.submission import NightOutcome, Submission
from overnight.fleet.workflow import CARRY_OUT, REGISTER
from overnight.night.compose import Shared
from overnight.night.signals import Signals
from overnight.report.result import TerminalResult
from overnight.store.rundir import RunDir

#: Stop reasons a worker's own shutdown gives a night: another worker resumes it.
DRAINED = frozenset({"TIME_LIMIT:sigterm", "TIME_LIMIT:sigint"})


class Drains:
    """The nights in flight on this worker, so that a shutdown can drain them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._signals: dict[int, Signals] = {}
        self.draining: str | None = None

    def add(self, signals: Signals) -> None:
        with self._lock:
            self._signals[id(signals)] = signals
            if self.draining is not None:
                signals.request(self.draining)

    def discard(self, signals: Signals) -> None:
        with self._lock:
            self._signals.pop(id(signals), None)

    def drain(self, why: str) -> None:
        with self._lock:
            self.draining = why
            for signals in self._signals.values():
                signals.request(why)

    def in_flight(self) -> int:
        with self._lock:
            return len(self._signals)


class NightActivities:
    def __init__(
        self,
        pool: Pool,
        runs: Path,
        worker: str,
        *,
        usd_per_day: float | None = None,
        drains: Drains | None = None,
    ) -> None:
        self.pool = pool
        self.runs = runs
        self.worker = worker
        self.usd_per_day = usd_per_day
        self.drains = drains or Drains()
        self.nights = Nights(pool)
        self.effects = PostgresEffectStore(pool)

    def run_dir(self, submission: Submission) -> Path:
        return self.runs / submission.night_id

    @activity.defn(name=REGISTER)
    def register(self, submission: Submission) -> None:
        self.nights.queued(submission.night_id, submission.spec_path, str(self.run_dir(submission)))

    # A cancellation (the heartbeat timed out: Temporal took this worker for dead) must not
    # be thrown into the night at a random line: it drains the night instead (see _Heartbeat).
    @activity.defn(name=CARRY_OUT, no_thread_cancel_exception=True)
    def carry_out(self, submission: Submission) -> NightOutcome:
        run_dir = self.run_dir(submission)
        with _night_lock(self.runs, submission.night_id):
            return self._carry_out(submission, run_dir)

    def _carry_out(self, submission: Submission, run_dir: Path) -> NightOutcome:
        deliveries = self.nights.running(
            submission.night_id, submission.spec_path, str(run_dir), self.worker
        )
        signals = Signals()
        self.drains.add(signals)
        beating = _Heartbeat(submission.heartbeat_s / 3, signals)
        try:
            with beating:
                result = self._night(submission, run_dir, signals, beating)
        except RunBusy as exc:  # a worker taken for dead is still at it: later
            raise ApplicationError(str(exc), type="RunBusy") from None
        except ConfigError as exc:
            self.nights.refused(submission.night_id, str(exc))
            raise ApplicationError(str(exc), type="ConfigError", non_retryable=True) from None
        finally:
            self.drains.discard(signals)
        if result.stop_reason in DRAINED and (
            self.drains.draining is not None or activity.is_cancelled()
        ):
            raise ApplicationError(
                f"night drained by the shutdown of worker {self.worker} "
                f"({result.stop_reason}); another worker resumes it",
                type="NightDrained",
            )
        data = json.loads(result.model_dump_json())
        self.nights.finished(submission.night_id, data)
        return NightOutcome(
            night_id=submission.night_id,
            run_dir=str(run_dir),
            stop_reason=result.stop_reason,
            status=result.status,
            exit_code=result.exit_code,
            deliveries=deliveries,
            result=data,
        )

    def _night(
        self, submission: Submission, run_dir: Path, signals: Signals, beat: _Heartbeat
    ) -> TerminalResult:
        rd = RunDir(run_dir)
        if rd.is_run() and rd.result.exists():
            prior = TerminalResult.model_validate_json(rd.result.read_text())
            if prior.stop_reason not in DRAINED:
                return prior  # it ended: a redelivery answers with how
        shared = Shared(effects=self.effects, cap=self._cap(submission))

        def observe(event: Any) -> None:
            beat.details = {"last": getattr(event, "kind", ""), "t": getattr(event, "t", 0)}

        if rd.is_run():
            return api.resume(run_dir, signals=signals, shared=shared, on_event=observe)
        if run_dir.exists():
            # Killed while the run directory was being created: it never became a run
            # (that is one rename), so nothing of the night happened yet.
            shutil.rmtree(run_dir)
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        return api.run(
            submission.spec_path,
            run_dir=run_dir,
            signals=signals,
            shared=shared,
            on_event=observe,
        )

    def _cap(self, submission: Submission) -> FleetMoney | None:
        spec_cap = load_spec(Path(submission.spec_path)).fleet.usd_per_day
        caps = [c for c in (spec_cap, self.usd_per_day) if c is not None]
        if not caps:
            return None
        return FleetMoney(self.pool, submission.night_id, min(caps))


@contextlib.contextmanager
def _night_lock(runs: Path, night_id: str) -> Iterator[None]:
    """One delivery of a night at a time, whatever the process: a delivery Temporal retried
    while the first is still at it (on this worker or another) waits its turn. The run
    directory's own lock only exists once the directory does."""
    locks = runs / ".deliveries"
    locks.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(locks / f"{night_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ApplicationError(
                f"night {night_id} is being carried out by another delivery", type="RunBusy"
            ) from None
        yield
    finally:
        os.close(fd)


class _Heartbeat:
    """Heartbeats from a thread of its own, so that a long model call or tool call never looks
    like a dead worker. The activity's context is carried into the thread."""

    def __init__(self, every_s: float, signals: Signals) -> None:
        self.every_s = max(every_s, 0.2)
        self.signals = signals
        self.details: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _Heartbeat:
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._beat,), name="night-heartbeat", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _beat(self) -> None:
        while not self._stop.is_set():
            if activity.is_cancelled():
                # Another worker may be resuming this night already; its lock keeps the two
                # apart, and this one stops at its next safe point.
                self.signals.request("sigterm")
            activity.heartbeat(self.details)
            self._stop.wait(self.every_s)
