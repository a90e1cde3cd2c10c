"""The activities a fleet worker carries nights out with: all the I/O of a night's workflow.

``carry_out_night`` calls the public ``overnight.run`` (a new night) or ``overnight.resume``
(a run directory a dead or drained worker left behind) on ``RUNS/<night id>``, with the fleet's
effects ledger and daily money cap, heartbeating all the while. A night that ended before a
redelivery reached it is not run again: its result is the answer.

An activity that cannot reach the fleet database fails with the type ``DatabaseUnreachable``
(``DATABASE_UNREACHABLE``), after waiting for a connection no longer than the night's lease
lasts: the workflow tries again later, for a bounded time, rather than counting it as a lost
delivery.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from overnight import api
from overnight.config.spec import Spec, load_spec
from overnight.core.endings import Ending, Stop, describe
from overnight.core.errors import ConfigError, RunBusy
from overnight.fleet.database import DatabaseUnreachable, Pool
from overnight.fleet.effects import PostgresEffectStore
from overnight.fleet.lease import Lease
from overnight.fleet.money import FleetMoney
from overnight.fleet.nights import Nights
from overnight.fleet.progress import LEASE_LOST, STALLED, Heartbeat
from overnight.fleet.submission import (
    DATABASE_UNREACHABLE,
    GiveUp,
    NightOutcome,
    Submission,
    refusal_details,
)
from overnight.fleet.workflow import CARRY_OUT, GIVE_UP, REGISTER
from overnight.night.compose import FleetShared
from overnight.night.runs import end_run
from overnight.night.signals import Signals
from overnight.seams import FenceLost
from overnight.store.result import TerminalResult
from overnight.store.rundir import RunDir

#: Stop reasons a worker's own shutdown, or its watchdogs, give a night: another delivery
#: resumes it.
DRAINED = frozenset(
    {
        "TIME_LIMIT:sigterm",
        "TIME_LIMIT:sigint",
        f"TIME_LIMIT:{STALLED}",
        f"TIME_LIMIT:{LEASE_LOST}",
    }
)


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
    def register(self, submission: Submission) -> str:
        """The night's row, queued; the answer is its run directory."""
        run_dir = str(self.run_dir(submission))
        try:
            with _reaching_database():
                self.nights.queued(
                    submission.night_id,
                    submission.spec_path,
                    run_dir,
                    submission.spec_sha256,
                    retry_of=submission.retry_of,
                    schedule=submission.schedule,
                    timeout=_database_wait(submission),
                )
        except ConfigError as exc:
            raise _refused(exc) from None
        return run_dir

    # A cancellation (the heartbeat timed out: Temporal took this worker for dead) must not
    # be thrown into the night at a random line: it drains the night instead (see _Heartbeat).
    @activity.defn(name=CARRY_OUT, no_thread_cancel_exception=True)
    def carry_out(self, submission: Submission) -> NightOutcome:
        run_dir = self.run_dir(submission)
        with _night_lock(self.runs, submission.night_id):
            return self._carry_out(submission, run_dir)

    def _carry_out(self, submission: Submission, run_dir: Path) -> NightOutcome:
        signals = Signals()
        self.drains.add(signals)
        beating = Heartbeat(
            submission.heartbeat_s / 3,
            signals,
            stall_s=submission.stall_s,
            artifacts=RunDir(run_dir).artifacts,
        )
        wait_s = _database_wait(submission)
        try:
            # Heartbeating from the first statement on: a database slow to answer is not
            # taken for a lost worker.
            with beating, _reaching_database():
                deliveries = self.nights.running(
                    submission.night_id,
                    submission.spec_path,
                    str(run_dir),
                    self.worker,
                    timeout=wait_s,
                )
                lease = beating.lease = self._lease(submission, deliveries)
                # A previous owner may still be running the night's command: its lease is
                # waited out (heartbeating meanwhile), then the resume verifies first.
                lease.take(wait=time.sleep)
                beating.moved()
                with lease:
                    result = self._night(submission, run_dir, signals, beating, lease)
                if result.stop_reason == f"TIME_LIMIT:{LEASE_LOST}":
                    # Drained when its lease could not be renewed (a database blip), its
                    # result written once the lease held again: another delivery resumes it.
                    raise FenceLost(f"night drained ({result.stop_reason})")
                self._handed_back(submission, result, beating)
                data = json.loads(result.model_dump_json())
                self.nights.finished(submission.night_id, data, timeout=wait_s)
        except FenceLost as exc:
            raise ApplicationError(
                f"worker {self.worker} lost its lease on the night and stopped it: {exc}",
                type="LeaseLost",
            ) from None
        except RunBusy as exc:  # a worker taken for dead is still at it: later
            raise ApplicationError(str(exc), type="RunBusy") from None
        except ConfigError as exc:
            self.nights.refused(submission.night_id, str(exc))
            raise _refused(exc) from None
        finally:
            self.drains.discard(signals)
        return NightOutcome(
            night_id=submission.night_id,
            run_dir=str(run_dir),
            stop_reason=result.stop_reason,
            status=result.status,
            exit_code=result.exit_code,
            deliveries=deliveries,
            result=data,
        )

    def _handed_back(self, submission: Submission, result: TerminalResult, beat: Heartbeat) -> None:
        """Raise when the night was handed back rather than ended: stalled, or drained by this
        worker's shutdown or a cancellation. Another delivery resumes it."""
        if result.stop_reason == f"TIME_LIMIT:{STALLED}" and beat.stalled:
            raise ApplicationError(
                f"night stalled on worker {self.worker}: no progress for "
                f"{submission.stall_s:g} s (last event {beat.last_event or 'none'} at "
                f"{beat.last_event_at or '-'}); drained, it is delivered again",
                type="NightStalled",
            )
        if result.stop_reason in DRAINED and (
            self.drains.draining is not None or activity.is_cancelled()
        ):
            raise ApplicationError(
                f"night drained by the shutdown of worker {self.worker} "
                f"({result.stop_reason}); another worker resumes it",
                type="NightDrained",
            )

    def _lease(self, submission: Submission, delivery: int) -> Lease:
        """This delivery's lease, as long as the heartbeat timeout: a worker that cannot renew
        it for half that stops the night before another worker may take it over."""
        owner = f"{self.worker}#{delivery}"
        return Lease(self.pool, submission.night_id, owner, submission.heartbeat_s)

    def _night(
        self,
        submission: Submission,
        run_dir: Path,
        signals: Signals,
        beat: Heartbeat,
        lease: Lease,
    ) -> TerminalResult:
        rd = RunDir(run_dir)
        ended = _ended(rd)
        if ended is not None:
            return ended  # it ended: a redelivery answers with how
        shared = FleetShared(
            effects=PostgresEffectStore(self.pool, lease),
            cap=self._cap(submission, lease),
            fence=lease,
        )

        observe = beat.saw
        if rd.is_run():
            return api.resume(run_dir, signals=signals, shared=shared, on_event=observe)
        if run_dir.exists():
            # Killed while the run directory was being created: it never became a run
            # (that is one rename), so nothing of the night happened yet.
            shutil.rmtree(run_dir)
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        return api.run(
            self._spec(submission),
            run_dir=run_dir,
            signals=signals,
            shared=shared,
            on_event=observe,
        )

    @activity.defn(name=GIVE_UP)
    def give_up(self, give: GiveUp) -> NightOutcome:
        """End a night the fleet will not deliver again: ``UNRECOVERABLE_ERROR:<cause>``
        (``fleet_retries``, ``fleet_database_unreachable``) in its result, with every delivery
        listed, and so in the review queue. A night that had ended on its own already (its
        result written, not yet its row) keeps its ending."""
        submission = give.submission
        run_dir = self.run_dir(submission)
        message = give.message()
        stop = Stop(Ending.UNRECOVERABLE_ERROR, give.cause, message)
        with _night_lock(self.runs, submission.night_id), _reaching_database():
            lease = self._lease(submission, 0)
            lease.take(wait=_heartbeating)
            with lease:
                ended = _ended(RunDir(run_dir))
                if ended is not None:
                    data = json.loads(ended.model_dump_json())
                elif RunDir(run_dir).is_run():
                    shared = FleetShared(effects=PostgresEffectStore(self.pool, lease), fence=lease)
                    data = json.loads(end_run(run_dir, stop, shared=shared).model_dump_json())
                else:  # lost before it had a run directory: nothing of it happened
                    verdict = describe(stop)
                    data = {
                        "stop_reason": stop.reason,
                        "status": verdict.outcome.value,
                        "exit_code": verdict.exit_code,
                        "resumable": False,
                        "message": message,
                    }
            if ended is None:
                data["deliveries"] = [d.model_dump(mode="json") for d in give.deliveries]
            wait_s = _database_wait(submission)
            if self.nights.get(submission.night_id, timeout=wait_s) is None:
                # Given up before it could be registered: the fleet lists it all the same.
                self.nights.queued(
                    submission.night_id,
                    submission.spec_path,
                    str(run_dir),
                    submission.spec_sha256,
                    retry_of=submission.retry_of,
                    schedule=submission.schedule,
                    timeout=wait_s,
                )
            self.nights.finished(submission.night_id, data, timeout=wait_s)
        return NightOutcome(
            night_id=submission.night_id,
            run_dir=str(run_dir),
            stop_reason=str(data["stop_reason"]),
            status=str(data["status"]),
            exit_code=int(data["exit_code"]),
            deliveries=len(give.deliveries),
            result=data,
        )

    def _spec(self, submission: Submission) -> Spec:
        """The spec the night was submitted with: never the submitter's file, which may have
        moved or changed since."""
        if submission.spec is None:  # submitted by an earlier overnight: by its path
            return load_spec(Path(submission.spec_path))
        try:
            return Spec.model_validate(submission.spec)
        except ValidationError as exc:
            raise ConfigError("spec", f"the submitted spec is not valid: {exc}") from None

    def _cap(self, submission: Submission, lease: Lease) -> FleetMoney | None:
        spec_cap = self._spec(submission).fleet.usd_per_day
        caps = [c for c in (spec_cap, self.usd_per_day) if c is not None]
        if not caps:
            return None
        return FleetMoney(
            self.pool, submission.night_id, min(caps), lease, wait_s=_database_wait(submission)
        )


def _ended(rd: RunDir) -> TerminalResult | None:
    """How the night ended, when it did (a night handed back to be resumed has not)."""
    if rd.is_run() and rd.result.exists():
        prior = TerminalResult.model_validate_json(rd.result.read_text())
        if prior.stop_reason not in DRAINED:
            return prior
    return None


def _database_wait(submission: Submission) -> float:
    """How long a statement of the fleet's bookkeeping waits for a connection: as long as
    the night's lease lasts, and then the database counts as unreachable."""
    return max(submission.heartbeat_s, 1.0)


@contextlib.contextmanager
def _reaching_database() -> Iterator[None]:
    """An unreachable fleet database as the activity's failure of that type: the workflow
    tries again later rather than counting a lost delivery."""
    try:
        yield
    except DatabaseUnreachable as exc:
        raise ApplicationError(str(exc), type=DATABASE_UNREACHABLE) from None


def _heartbeating(seconds: float) -> None:
    activity.heartbeat()
    time.sleep(seconds)


def _refused(exc: ConfigError) -> ApplicationError:
    """A refusal no retry fixes, carrying the field, the problem and the fix."""
    return ApplicationError(str(exc), *refusal_details(exc), type="ConfigError", non_retryable=True)


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
