"""The embedding API: run a night, resume one, read a spec.

``run`` and ``resume`` do everything ``overnight run`` and ``overnight resume`` do (the checks
before anything is written, the run directory, the worktree, the lock, draining on SIGTERM and
SIGINT, result.json) and return the terminal result. Events arrive typed through ``on_event``
as the night goes. A bad spec raises ``ConfigError`` (naming the field and the fix) before
anything is written; every other failure ends the night in one of its seven endings, with
result.json written and returned.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from overnight.config.spec import Spec
from overnight.config.spec import load_spec as _parse_spec_file
from overnight.night.compose import FleetShared
from overnight.night.events import Event, RunCreated, event_of
from overnight.night.resolve import ResolvedNight, resolve
from overnight.night.runs import resume_run, start_run
from overnight.night.signals import Signals, drained_on_signals
from overnight.seams import Clock, ModelClient, TaskExecutor
from overnight.store.index import resolve_run
from overnight.store.result import TerminalResult
from overnight.store.rundir import RunDir, read_json

Result = TerminalResult
"""What a night ends with: the model of result.json."""

EventHandler = Callable[[Event], None]


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read and validate ``night.toml``; every problem is listed in one ``ConfigError``."""
    return _parse_spec_file(Path(path))


def run(
    spec: ResolvedNight | Spec | str | os.PathLike[str],
    *,
    run_dir: str | os.PathLike[str] | None = None,
    on_event: EventHandler | None = None,
    model: ModelClient | None = None,
    executor: TaskExecutor | None = None,
    clock: Clock | None = None,
    signals: Signals | None = None,
    shared: FleetShared | None = None,
) -> Result:
    """Run one night of ``spec`` (a ``Spec``, the path of its night.toml, or a spec resolved
    already by ``overnight.night.resolve.resolve``, which then carries the run directory,
    model and executor it was resolved with).

    ``run_dir`` defaults to ``$OVERNIGHT_HOME/runs/<run id>``. ``model`` and ``executor``
    replace the spec's (a scripted model from ``overnight.testing``, your own client).
    An exception raised by ``on_event`` is ignored.
    ``signals`` lets the caller drain the night from another thread
    (``signals.request("sigterm")``); when called from the main thread, SIGTERM and SIGINT
    drain it too. ``shared`` is what a fleet shares between nights (``FleetShared``: an effects
    store, a money cap). Before anything is written the spec is resolved once (``resolve``:
    checked, its sandbox built, its MCP servers started and listed) and, unless ``model`` is
    given, its model asked once whether it can be reached (``check_model_reach``)."""
    if isinstance(spec, ResolvedNight):
        if run_dir is not None or model is not None or executor is not None:
            raise ValueError(
                "run_dir, model and executor belong to resolve() when the spec is resolved"
            )
        night = spec
    else:
        if not isinstance(spec, Spec):
            spec = load_spec(spec)
        where = Path(run_dir) if run_dir is not None else None
        night = resolve(spec, where, model=model, executor=executor)
    signals = signals or Signals()
    with _draining(signals):
        _, result = start_run(
            night,
            clock=clock,
            signals=signals,
            on_created=_announcer(on_event),
            listener=_listener(on_event),
            shared=shared,
        )
    return result


def resume(
    run_dir: str | os.PathLike[str],
    *,
    usd: float | None = None,
    hours: float | None = None,
    steps: int | None = None,
    tokens: int | None = None,
    on_event: EventHandler | None = None,
    model: ModelClient | None = None,
    executor: TaskExecutor | None = None,
    clock: Clock | None = None,
    signals: Signals | None = None,
    shared: FleetShared | None = None,
) -> Result:
    """Continue a run (its directory, or its id from ``overnight list``) after a crash, a kill
    or a stop: the task left in flight is verified, never executed again. ``usd``, ``hours``,
    ``steps`` and ``tokens`` raise the run's budgets (recorded in the run before it goes
    on)."""
    path = run_path(run_dir)
    given = {"usd": usd, "hours": hours, "steps": steps, "tokens": tokens}
    raises = {k: float(v) for k, v in given.items() if v is not None}
    signals = signals or Signals()
    with _draining(signals):
        _, result = resume_run(
            path,
            raises,
            clock=clock,
            signals=signals,
            listener=_listener(on_event),
            model=model,
            executor=executor,
            shared=shared,
        )
    return result


def run_path(run: str | os.PathLike[str]) -> Path:
    """A run's directory from its path or its indexed id."""
    given = Path(run)
    if given.exists() or os.sep in str(run):
        return given
    return resolve_run(str(run))


@contextlib.contextmanager
def _draining(signals: Signals) -> Iterator[None]:
    """SIGTERM and SIGINT drain the night, when they can be handled here (the main thread)."""
    if threading.current_thread() is threading.main_thread():
        with drained_on_signals(signals):
            yield
    else:
        yield


def _listener(on_event: EventHandler | None) -> Callable[[dict[str, Any]], None] | None:
    if on_event is None:
        return None
    handler = on_event

    def listen(record: dict[str, Any]) -> None:
        # The night does not depend on its observer: a failing handler is not the run's error.
        with contextlib.suppress(Exception):
            handler(event_of(record))

    return listen


def _announcer(on_event: EventHandler | None) -> Callable[[RunDir], None] | None:
    if on_event is None:
        return None
    handler = on_event

    def announce(rd: RunDir) -> None:
        manifest = read_json(rd.manifest)
        event = RunCreated(
            run_id=str(manifest["run_id"]), run_dir=rd.path, branch=str(manifest["branch"])
        )
        with contextlib.suppress(Exception):  # as for every event: the observer is not the run
            handler(event)

    return announce
