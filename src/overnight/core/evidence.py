"""Positive evidence: a pytest run counts as passing only when its tests are reported passed.

The harness's own reporter (``overnight.night.pytest_evidence``) writes one JSON line per
event of the run to a file the harness reads afterwards; ``read_run`` turns those lines into
a ``RunReport`` and ``judge`` decides. A run is met only when

* the process exited 0, and every session the reporter saw start also finished, with the
  exit status pytest computed agreeing with the process's (an ``os._exit`` at import or in
  an exit handler leaves no finished line, or a status that disagrees);
* every test the night must make pass (collected on the base commit, recorded at start,
  plus every test the run itself collected) is reported passed in every phase, and what
  each phase raised agrees (a report rewritten to "passed" after the test raised is a
  failure, and a disagreement);
* nothing failed, errored, or failed to collect.

Skipped, xfailed, strict-xpassed, deselected or missing tests are not met, by name, unless
the base commit already skipped them for a reason outside the code (a skip or xfail mark,
a skip at set-up): those are ``allowed``, recorded at start and shown in the report.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Evidence = Literal["tests", "exit_code_only"]

NO_EVIDENCE = "not met: the test run gave no evidence"
DISAGREES = "not met: the test run's evidence disagrees"

_RANK = {"passed": 0, "skipped": 1, "xfailed": 2, "failed": 3}
_PHASES = ("setup", "call", "teardown")


class BaseTests(BaseModel):
    """What a pytest command collected on the night's base commit, recorded at start."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["base_tests"] = "base_tests"
    command: str
    commit: str
    collected: list[str] = Field(default_factory=list)
    """The tests (node ids) the command collected there, in order: each must be passed."""
    allowed: dict[str, str] = Field(default_factory=dict)
    """Tests that may stay skipped (or xfailed), with why: a skip or xfail mark on the base,
    or a skip at set-up there (a platform, a missing optional dependency)."""


@dataclass
class RunReport:
    """What the reporter wrote during one command (possibly several pytest sessions)."""

    started: int = 0
    finished: list[int] = field(default_factory=list)
    """The exit status pytest computed, per finished session."""
    collected: list[str] = field(default_factory=list)
    """Every test collected, then every other test a report names."""
    marks: dict[str, str] = field(default_factory=dict)
    deselected: list[str] = field(default_factory=list)
    collect_errors: list[str] = field(default_factory=list)
    phases: dict[tuple[str, str], str] = field(default_factory=dict)
    """``(node id, phase)`` -> the worst outcome any record of it gave."""
    raised: dict[tuple[str, str], str] = field(default_factory=dict)
    """``(node id, phase)`` -> what the phase raised, read before other plugins ran."""
    tampered: list[str] = field(default_factory=list)
    """Runner functions replaced inside the test process while it ran."""
    plugins_off: list[str] = field(default_factory=list)
    """Installed pytest plugins that did not load (autoload is off)."""
    unreadable: int = 0
    """Lines that are not the reporter's."""
    truncated: bool = False
    """The evidence was larger than the harness reads."""

    def errored_at_setup(self) -> list[str]:
        """Tests whose set-up failed (a fixture not found, a plugin missing)."""
        return [n for n in self.collected if self._phase(n, "setup") == "failed"]

    def status(self, nodeid: str) -> str:
        """``passed``, ``failed``, ``skipped``, ``xfailed`` or ``missing``."""
        seen = {w: self._phase(nodeid, w) for w in _PHASES}
        if seen["setup"] is None:
            return "missing"
        worst = max((s for s in seen.values() if s is not None), key=_RANK.__getitem__)
        if worst == "failed":
            return "failed"
        if seen["setup"] == "skipped":
            return "skipped"
        if seen["call"] is None:
            return "missing"
        return worst

    def _phase(self, nodeid: str, when: str) -> str | None:
        reported = self.phases.get((nodeid, when))
        raised = self.raised.get((nodeid, when))
        if raised is None:
            return reported
        from_raise = {"nothing": "passed", "skip": "skipped", "xfail": "xfailed"}.get(
            raised, "failed"
        )
        if (
            from_raise == "failed"
            and reported == "xfailed"
            and self.marks.get(nodeid, "").startswith("xfail")
        ):
            from_raise = "xfailed"  # an xfail mark turns the raise into an expected failure
        if reported is None:
            return from_raise
        return max(reported, from_raise, key=_RANK.__getitem__)


def read_run(events: Iterable[Mapping[str, Any] | None], *, truncated: bool = False) -> RunReport:
    """Read the reporter's events (one decoded JSON line each; None for a line that was
    not one); anything the reporter never writes is counted as unreadable."""
    run = RunReport(truncated=truncated)
    collected: dict[str, None] = {}
    reported: dict[str, None] = {}
    for event in events:
        if event is None:
            run.unreadable += 1
            continue
        kind, nodeid = event.get("kind"), event.get("nodeid")
        if kind == "started":
            run.started += 1
            off = event.get("plugins_off")
            if isinstance(off, list):
                run.plugins_off = sorted({*run.plugins_off, *(str(n) for n in off)})
        elif kind == "finished" and isinstance(event.get("exitstatus"), int):
            run.finished.append(int(event["exitstatus"]))
        elif kind == "tampered" and isinstance(event.get("what"), list):
            run.tampered += [str(w) for w in event["what"]]
        elif not isinstance(nodeid, str):
            run.unreadable += 1
        elif kind == "collected":
            collected[nodeid] = None
            if isinstance(event.get("mark"), str):
                run.marks[nodeid] = event["mark"]
        elif kind == "deselected":
            run.deselected.append(nodeid)
        elif kind == "collect_error":
            run.collect_errors.append(nodeid)
        elif kind == "call" and event.get("when") in _PHASES:
            reported.setdefault(nodeid, None)
            key = (nodeid, str(event["when"]))
            raised = str(event.get("raised"))
            earlier = run.raised.get(key)
            run.raised[key] = raised if earlier in (None, "nothing") else earlier
        elif kind == "report" and event.get("when") in _PHASES:
            reported.setdefault(nodeid, None)
            key = (nodeid, str(event["when"]))
            outcome = _outcome(event)
            earlier_outcome = run.phases.get(key, "passed")
            run.phases[key] = max(earlier_outcome, outcome, key=_RANK.__getitem__)
        else:
            run.unreadable += 1
    # A test reported without being collected here ran elsewhere (an xdist worker).
    run.collected = list({**collected, **reported})
    return run


def _outcome(event: Mapping[str, Any]) -> str:
    outcome = event.get("outcome")
    if outcome == "skipped":
        return "xfailed" if event.get("xfail") else "skipped"
    if outcome == "passed":
        return "passed"
    return "failed"


def base_tests(command: str, commit: str, run: RunReport) -> BaseTests:
    """What the base commit's run says the night must make pass, and what may stay
    skipped."""
    allowed: dict[str, str] = {}
    for nodeid in run.collected:
        mark = run.marks.get(nodeid)
        if mark is not None:
            allowed[nodeid] = f"{mark.split(':', 1)[0]} mark on the base commit" + (
                f" ({mark.split(':', 1)[1].strip()})" if mark.split(":", 1)[1].strip() else ""
            )
        elif run.phases.get((nodeid, "setup")) == "skipped":
            allowed[nodeid] = "skipped at set-up on the base commit"
    return BaseTests(command=command, commit=commit, collected=run.collected, allowed=allowed)


@dataclass(frozen=True)
class Judgement:
    """A pytest run judged on its evidence."""

    met: bool
    verdict: str
    """One line: ``met: 3 passed`` or ``not met: ...``, naming tests."""
    allowed: tuple[str, ...] = ()
    """Tests allowed to stay skipped that did (shown with the verdict)."""


def judge(
    run: RunReport | None,
    exit_code: int | None,
    base: BaseTests | None = None,
) -> Judgement:
    """Whether a pytest command's run is met, on its evidence (see the module docstring)."""
    required = list(base.collected) if base is not None else []
    allowed: Mapping[str, str] = base.allowed if base is not None else {}
    if exit_code != 0:
        failed = [] if run is None else _named(run, required, "failed")
        said = f"; failed: {_names(failed)}" if failed else ""
        return Judgement(False, f"not met: exit {exit_code}{said}")
    if run is None or run.started == 0 or not run.finished:
        return Judgement(
            False, f"{NO_EVIDENCE} (the harness's reporter saw no test session finish)"
        )
    if run.truncated or run.unreadable:
        return Judgement(False, f"{DISAGREES} (its report holds lines the reporter never wrote)")
    if len(run.finished) < run.started:
        return Judgement(False, f"{NO_EVIDENCE} (a test session started and never finished)")
    if run.tampered:
        return Judgement(
            False,
            f"{DISAGREES} (code in the test process replaced the runner's own "
            f"{_names(run.tampered)})",
        )
    statuses = [s for s in run.finished if s != 0]
    if statuses:
        return Judgement(
            False,
            f"{DISAGREES} (pytest computed exit status {statuses[0]}, the process exited 0)",
        )
    if run.collect_errors:
        return Judgement(False, f"not met: errors collecting {_names(run.collect_errors)}")
    everything = list(dict.fromkeys([*required, *run.collected]))
    if not everything:
        return Judgement(False, f"{NO_EVIDENCE} (no test was collected)")
    by_status: dict[str, list[str]] = {}
    shown: list[str] = []
    deselected = set(run.deselected)
    for nodeid in everything:
        status = run.status(nodeid)
        if status == "passed":
            continue
        if status in ("skipped", "xfailed") and nodeid in allowed:
            shown.append(f"{nodeid} ({allowed[nodeid]})")
            continue
        if status == "missing" and nodeid in deselected:
            status = "deselected"
        by_status.setdefault(status, []).append(nodeid)
    if "failed" in by_status:
        return Judgement(
            False,
            f"{DISAGREES} (pytest exited 0, and the harness's reporter saw "
            f"{_names(by_status['failed'])} fail)",
        )
    if by_status:
        parts = [f"{status}: {_names(ids)}" for status, ids in sorted(by_status.items())]
        return Judgement(False, "not met: not every test passed (" + "; ".join(parts) + ")")
    passed = len(everything) - len(shown)
    extra = f", {len(shown)} allowed to skip as on the base commit" if shown else ""
    return Judgement(True, f"met: {passed} passed{extra}", tuple(shown))


def _named(run: RunReport, required: Sequence[str], status: str) -> list[str]:
    ids = dict.fromkeys([*required, *run.collected])
    return [n for n in ids if run.status(n) == status]


def _names(ids: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")
