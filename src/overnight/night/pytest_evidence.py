"""The harness's own pytest reporter: what a test run under the harness reports, per test.

Not imported by the harness. ``overnight.night.testrun`` copies this file, under a name of
its own for each run, into a private directory, puts that directory on ``PYTHONPATH`` and
loads it with ``-p``. It writes one JSON line per event to the file descriptor named by
``$OVERNIGHT_EVIDENCE_FD``, a file the harness opened outside the sandbox and reads once
the command has ended:

* ``started``: a test session began, with the installed plugins that did not load
  (``plugins_off``: autoload is off) and, for a run recording the base commit
  (``$OVERNIGHT_EVIDENCE_COMPLETE``), the options that would have stopped or narrowed it early
  (``-x``, ``--maxfail``, ``--sw``, ``--lf``, ``--ff``, ``--nf``, from the command line or the
  project's ``addopts``), turned off so that every test runs (``complete``, ``neutralized``);
* ``collected``: a test of the session (after deselection), with the skip or xfail mark
  that applies to it when collection ended (``mark``), if any;
* ``deselected`` and ``collect_error``: a test deselected, a module that failed to import;
* ``call``: what a test's phase raised, read before any other plugin's hook could see it;
* ``report``: a phase's report, as the outermost ``makereport`` wrapper saw it (``seen:
  first``) and as it was logged (``logged``); for a skip or an xfail raised while the test
  ran, where it was raised (``skip``: the file and line of the innermost frame outside
  pytest and ``unittest``, relative to the rootdir, and the reason);
* ``tampered``: a function of the runner that decides what a test reports was replaced
  after this module was imported (by code under test at import, say);
* ``finished``: the session ended, with the exit status pytest computed.

A subtest (``unittest``'s ``subTest``, pytest's ``subtests`` fixture) is a test of its own:
its ``call`` and ``report`` lines carry ``sub``, the subtest's description as pytest prints
it (``[msg] (name='value')``). Lines are bounded: a node id longer than ``ID_LIMIT``
characters is written as its first ``ID_PREFIX`` characters, its length and a digest of the
whole (the same on every run of the same test), and any other text is cut to ``TEXT_LIMIT``.

The module is self-contained (it runs in the project's Python, which may lack everything
the harness needs) and keeps to the standard library and pytest's hooks.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Generator
from typing import Any

import pytest

_FD_VARIABLE = "OVERNIGHT_EVIDENCE_FD"
_PATH_VARIABLE = "OVERNIGHT_EVIDENCE_PATH"
_COMPLETE_VARIABLE = "OVERNIGHT_EVIDENCE_COMPLETE"


def _take_fd() -> int | None:
    value = os.environ.pop(_FD_VARIABLE, "")
    try:
        return int(value) if value else None
    except ValueError:
        return None


def _add_layout() -> None:
    """The checkout's ``src/`` and root, first on ``sys.path`` from here on: after the
    interpreter started (so no ``sitecustomize`` of the checkout runs, and ``pytest`` itself
    is the installed one) and before any conftest or test module is imported; and first on
    ``PYTHONPATH`` for the processes the tests start."""
    entries = [e for e in os.environ.pop(_PATH_VARIABLE, "").split(os.pathsep) if e]
    for entry in reversed(entries):
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
    if entries:
        # and first on the PYTHONPATH the tests' own subprocesses inherit (a tool script the
        # suite runs with sys.executable imports the package from the checkout too)
        inherited = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*entries, *inherited]))


#: A node id longer than this is written as a prefix, its length and a digest.
ID_LIMIT = 2000
ID_PREFIX = 240
#: Any other text (a reason, a subtest's description) is cut to this many characters.
TEXT_LIMIT = 1000

_FD = _take_fd()
_COMPLETE = os.environ.pop(_COMPLETE_VARIABLE, "") == "1"
_NEUTRALIZED: list[str] = []
_add_layout()


def _test_id(nodeid: str) -> str:
    """``nodeid``, or for one longer than ``ID_LIMIT`` (a test parametrized with a long
    string), a bounded name of it that is the same wherever the same test runs."""
    if len(nodeid) <= ID_LIMIT:
        return nodeid
    digest = hashlib.sha256(nodeid.encode("utf-8", "replace")).hexdigest()[:16]
    return f"{nodeid[:ID_PREFIX]}...[{len(nodeid)} characters, sha256 {digest}]"


def _text(value: str, limit: int = TEXT_LIMIT) -> str:
    return value if len(value) <= limit else value[:limit] + "..."


def _write(event: dict[str, Any]) -> None:
    if _FD is None:
        return
    if isinstance(event.get("nodeid"), str):
        event["nodeid"] = _test_id(event["nodeid"])
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
            return _text(f"skip: {skip.reason}")
        xfail = evaluate_xfail_marks(item)
        if xfail is not None:
            return _text(f"xfail: {xfail.reason}")
    except Exception:
        return None
    # unittest's own decorators (skip, skipIf, skipUnless, expectedFailure), on the method
    # or its class
    method = getattr(item, "obj", None)
    owner = getattr(item, "cls", None)
    for holder in (method, owner):
        if holder is not None and getattr(holder, "__unittest_skip__", False):
            return _text(f"skip: {getattr(holder, '__unittest_skip_why__', '')}")
    if method is not None and getattr(method, "__unittest_expecting_failure__", False):
        return "xfail: unittest expectedFailure"
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
        found.append(f"{_test_id(item.nodeid)}.runtest")
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


def _runner_dirs() -> tuple[str, ...]:
    """The directories of the code that raises skips on a test's behalf (pytest, pluggy,
    unittest): a skip's place is the innermost frame outside them."""
    import unittest

    import _pytest
    import pluggy

    dirs = []
    for module in (_pytest, pytest, pluggy, unittest):
        name = getattr(module, "__file__", None)
        if name:
            dirs.append(os.path.dirname(os.path.abspath(name)) + os.sep)
    return tuple(dirs)


_RUNNER_DIRS = _runner_dirs()


def _skip_site(excinfo: Any, root: str) -> dict[str, str] | None:
    """Where a skip or an xfail was raised, and why: ``{"where": "path:line", "reason"}``;
    ``where`` is ``test`` when no frame outside the runner raised it (a unittest decorator).
    A ``unittest.SkipTest`` (``self.skipTest``) reaches pytest as the context of the skip its
    unittest support raises: its own traceback names the place."""
    if excinfo is None:
        return None
    value = excinfo.value
    if not isinstance(value, (pytest.skip.Exception, pytest.xfail.Exception)):
        return None
    reason = str(getattr(value, "msg", None) or value)
    trace = value.__traceback__
    context = value.__context__
    if context is not None and type(context).__name__ == "SkipTest":
        trace = context.__traceback__
    where = "test"
    while trace is not None:
        filename = os.path.abspath(trace.tb_frame.f_code.co_filename)
        if not filename.startswith(_RUNNER_DIRS):
            shown = os.path.relpath(filename, root) if filename.startswith(root) else filename
            where = f"{shown}:{trace.tb_lineno}"
        trace = trace.tb_next
    if root:
        reason = reason.replace(root, "<rootdir>")
    return {"where": _text(where), "reason": reason[:500]}


def _root(config: Any) -> str:
    try:
        return str(config.rootpath) + os.sep
    except Exception:
        return ""


def _report(report: Any, seen: str) -> dict[str, Any]:
    return {
        "kind": "report",
        "seen": seen,
        "nodeid": str(report.nodeid),
        "when": str(report.when),
        "outcome": str(report.outcome),
        "xfail": hasattr(report, "wasxfail"),
    }


def _logged_site(report: Any) -> dict[str, str] | None:
    """A skip's place as pytest's report gives it (``longrepr``: path, line, reason), for a
    report that only reached this process logged (an xdist worker's)."""
    longrepr = getattr(report, "longrepr", None)
    if report.outcome != "skipped" or not isinstance(longrepr, tuple) or len(longrepr) != 3:
        return None
    path, line, reason = longrepr
    return {"where": _text(f"{path}:{line}"), "reason": str(reason)[:500]}


#: Options that stop a run early or narrow it to some tests, and the value that turns each off.
_EARLY = (
    ("maxfail", 0),
    ("stepwise", False),
    ("stepwise_skip", False),
    ("stepwise_reset", False),
    ("lf", False),
    ("failedfirst", False),
    ("newfirst", False),
)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """For a base record, every test runs: the options that would stop the run at the first
    failure or pick some tests are turned off, wherever they were set (the command line, the
    project's ``addopts``, ``PYTEST_ADDOPTS``). Runs before any plugin is configured."""
    if not (_COMPLETE and _FD is not None):
        return
    for name, off in _EARLY:
        value = getattr(config.option, name, off)
        if value != off:
            setattr(config.option, name, off)
            _NEUTRALIZED.append(f"{name}={value!r}")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    if _active(session.config):
        event: dict[str, Any] = {"kind": "started", "plugins_off": _not_loaded(session.config)}
        if _COMPLETE:
            event["complete"] = True
            event["neutralized"] = list(_NEUTRALIZED)
        _write(event)


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


def _case_key(item: pytest.Item) -> str | None:
    """A parametrized test's identity by its parameters' values: pytest numbers the ids of
    values it cannot name (``expected4``) in the order the cases were listed, and a suite that
    lists them from a set (a set of tuples holding ``None``, hashed by address) numbers them
    differently in every process. None when a value has no stable text (an address in it)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    try:
        parts = []
        for name in sorted(callspec.params):
            text = repr(callspec.params[name])
            if " at 0x" in text:
                return None
            parts.append(f"{name}={text}")
        digest = hashlib.sha256("\0".join(parts).encode("utf-8", "replace")).hexdigest()[:16]
    except Exception:
        return None
    return f"{item.nodeid.split('[', 1)[0]}[{digest}]"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    if not _active(session.config):
        return
    for item in session.items:
        event: dict[str, Any] = {"kind": "collected", "nodeid": item.nodeid, "mark": _mark(item)}
        key = _case_key(item)
        if key is not None:
            event["key"] = key
        _write(event)


#: The ``call`` and ``report`` lines of a phase whose report was made and not yet logged: a
#: subtest's report is made as its test's is, and is known as a subtest's once it is logged.
_PENDING: dict[str, list[dict[str, Any]]] = {}


def _flush(nodeid: str, sub: str | None = None) -> None:
    for event in _PENDING.pop(nodeid, []):
        if sub is not None:
            event["sub"] = sub
        _write(event)


def _subtest(report: Any) -> str | None:
    """A subtest's description as pytest prints it (``[msg] (name='value')``); None for a
    test's own report."""
    describe = getattr(report, "_sub_test_description", None)
    if not callable(describe) or getattr(report, "context", None) is None:
        return None
    try:
        return _text(str(describe()))
    except Exception:
        return "(<subtest>)"


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    # Read before any other implementation of the hook runs: what the phase raised.
    if _FD is not None:
        _check_runner(item)
        _flush(item.nodeid)  # a phase made and never logged: its test's own
        _PENDING[item.nodeid] = [
            {
                "kind": "call",
                "nodeid": item.nodeid,
                "when": str(call.when),
                "raised": _raised(call.excinfo),
            }
        ]
    outcome = yield
    if _FD is not None:
        try:
            event = _report(outcome.get_result(), "first")
            # after the other implementations: unittest's support sets the phase's exception
            site = _skip_site(call.excinfo, _root(item.config))
            if site is not None:
                event["skip"] = site
        except Exception:
            event = {"kind": "report", "seen": "first", "nodeid": item.nodeid, "outcome": "?"}
        _PENDING.setdefault(item.nodeid, []).append(event)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: Any) -> None:
    if _FD is not None:
        sub = _subtest(report)
        _flush(str(report.nodeid), sub)
        event = _report(report, "logged")
        site = _logged_site(report)
        if site is not None:
            event["skip"] = site
        if sub is not None:
            event["sub"] = sub
        _write(event)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: Any) -> Generator[None, Any, None]:
    yield
    for nodeid in list(_PENDING):
        _flush(nodeid)
    if _active(session.config):
        _check_runner()
        _write({"kind": "finished", "exitstatus": int(session.exitstatus)})
