"""The harness's own pytest reporter: what a test run under the harness reports, per test.

Not imported by the harness. ``overnight.night.testrun`` copies this file, under a name of
its own for each run, into a private directory, puts that directory on ``PYTHONPATH`` and
loads it with ``-p``. It writes one JSON line per event to the file descriptor named by
``$OVERNIGHT_EVIDENCE_FD``, a file the harness opened outside the sandbox and reads once
the command has ended:

* ``started``: a test session began, with the installed plugins that did not load
  (``plugins_off``: autoload is off);
* ``collected``: a test of the session (after deselection), with the skip or xfail mark
  that applies to it when collection ended (``mark``), if any;
* ``deselected`` and ``collect_error``: a test deselected, a module that failed to import;
* ``call``: what a test's phase raised, read before any other plugin's hook could see it;
* ``report``: a phase's report, as the outermost ``makereport`` wrapper saw it (``seen:
  first``) and as it was logged (``logged``);
* ``tampered``: a function of the runner that decides what a test reports was replaced
  after this module was imported (by code under test at import, say);
* ``finished``: the session ended, with the exit status pytest computed.

The module is self-contained (it runs in the project's Python, which may lack everything
the harness needs) and keeps to the standard library and pytest's hooks.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Generator
from typing import Any

import pytest

_FD_VARIABLE = "OVERNIGHT_EVIDENCE_FD"
_PATH_VARIABLE = "OVERNIGHT_EVIDENCE_PATH"


def _take_fd() -> int | None:
    value = os.environ.pop(_FD_VARIABLE, "")
    try:
        return int(value) if value else None
    except ValueError:
        return None


def _add_layout() -> None:
    """The checkout's ``src/`` and root, first on ``sys.path`` from here on: after the
    interpreter started (so no ``sitecustomize`` of the checkout runs, and ``pytest`` itself
    is the installed one) and before any conftest or test module is imported."""
    entries = [e for e in os.environ.pop(_PATH_VARIABLE, "").split(os.pathsep) if e]
    for entry in reversed(entries):
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)


_FD = _take_fd()
_add_layout()


def _write(event: dict[str, Any]) -> None:
    if _FD is None:
        return
    data = (json.dumps(event, separators=(",", ":")) + "\n").encode("utf-8", "replace")
    try:
        while data:
            data = data[os.write(_FD, data) :]
    except OSError:
        pass


def _active(config: pytest.Config) -> bool:
    # An xdist worker's reports reach the controller, which records them.
    return _FD is not None and not hasattr(config, "workerinput")


def _mark(item: pytest.Item) -> str | None:
    """The skip or xfail mark that applies to ``item`` as collected, evaluated as pytest
    evaluates it at set-up."""
    try:
        from _pytest.skipping import evaluate_skip_marks, evaluate_xfail_marks

        skip = evaluate_skip_marks(item)
        if skip is not None:
            return f"skip: {skip.reason}"
        xfail = evaluate_xfail_marks(item)
        if xfail is not None:
            return f"xfail: {xfail.reason}"
    except Exception:
        return None
    return None


def _runner_parts() -> list[tuple[Any, str, Any]]:
    """``(owner, name, object)`` of the runner's own functions that decide what a test run
    reports, as they are when this module is imported (before any conftest or test module)."""
    parts: list[tuple[Any, str, Any]] = []
    try:
        import _pytest.python as python
        import _pytest.reports as reports
        import _pytest.runner as runner

        for owner, name in (
            (python.Function, "runtest"),
            (python, "pytest_pyfunc_call"),
            (runner, "call_and_report"),
            (runner, "call_runtest_hook"),
            (runner, "runtestprotocol"),
            (runner.CallInfo, "from_call"),
            (reports.TestReport, "from_item_and_call"),
        ):
            parts.append((owner, name, vars(owner).get(name)))
    except Exception:
        return []
    return parts


_PARTS = _runner_parts()
_TAMPERED: set[str] = set()


def _check_runner(item: pytest.Item | None = None) -> None:
    """Say once each runner function that was replaced since, and a test item whose
    ``runtest`` was replaced on the item itself."""
    found = [
        f"{getattr(owner, '__module__', '')}.{owner.__name__}.{name}".lstrip(".")
        if isinstance(owner, type)
        else f"{owner.__name__}.{name}"
        for owner, name, original in _PARTS
        if vars(owner).get(name) is not original
    ]
    if item is not None and "runtest" in getattr(item, "__dict__", {}):
        found.append(f"{item.nodeid}.runtest")
    new = [f for f in found if f not in _TAMPERED]
    if new:
        _TAMPERED.update(new)
        _write({"kind": "tampered", "what": new})


def _raised(excinfo: Any) -> str:
    if excinfo is None:
        return "nothing"
    kind = excinfo.type
    if issubclass(kind, pytest.skip.Exception):
        return "skip"
    if issubclass(kind, pytest.xfail.Exception):
        return "xfail"
    return f"error: {getattr(kind, '__name__', 'exception')}"


def _report(report: Any, seen: str) -> dict[str, Any]:
    return {
        "kind": "report",
        "seen": seen,
        "nodeid": str(report.nodeid),
        "when": str(report.when),
        "outcome": str(report.outcome),
        "xfail": hasattr(report, "wasxfail"),
    }


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    if _active(session.config):
        _write({"kind": "started", "plugins_off": _not_loaded(session.config)})


def _not_loaded(config: pytest.Config) -> list[str]:
    """Installed plugins (``pytest11`` entry points) that autoload would have loaded."""
    try:
        from importlib.metadata import entry_points

        names = sorted({ep.name for ep in entry_points(group="pytest11")})
    except Exception:
        return []
    return [n for n in names if not config.pluginmanager.has_plugin(n)]


@pytest.hookimpl(tryfirst=True)
def pytest_collectreport(report: Any) -> None:
    if _FD is not None and report.failed:
        _write({"kind": "collect_error", "nodeid": str(report.nodeid)})


@pytest.hookimpl(tryfirst=True)
def pytest_deselected(items: list[pytest.Item]) -> None:
    if _FD is not None:
        for item in items:
            _write({"kind": "deselected", "nodeid": item.nodeid})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    if not _active(session.config):
        return
    for item in session.items:
        _write({"kind": "collected", "nodeid": item.nodeid, "mark": _mark(item)})


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    # Read before any other implementation of the hook runs: what the phase raised.
    if _FD is not None:
        _check_runner(item)
        _write(
            {
                "kind": "call",
                "nodeid": item.nodeid,
                "when": str(call.when),
                "raised": _raised(call.excinfo),
            }
        )
    outcome = yield
    if _FD is not None:
        try:
            _write(_report(outcome.get_result(), "first"))
        except Exception:
            _write({"kind": "report", "seen": "first", "nodeid": item.nodeid, "outcome": "?"})


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: Any) -> None:
    if _FD is not None:
        _write(_report(report, "logged"))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: Any) -> Generator[None, Any, None]:
    yield
    if _active(session.config):
        _check_runner()
        _write({"kind": "finished", "exitstatus": int(session.exitstatus)})
