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
the base commit skipped them *in the same way*: the base record (``BaseTests``, one complete
run of the suite on the base commit, whatever the predicate's ``-x`` or ``addopts``) holds,
for each test skipped or xfailed there, where that happened (a skip or xfail mark, or the
file and line of the ``skip`` call, in any phase) and why. A candidate that skips such a
test at the same place for the same reason is met, and what stayed skipped is grouped by
reason for the report. A test that ran on the base (passed or failed) and is skipped,
xfailed or missing here is not met, and so is one skipped here for another reason.

A subtest (``unittest``'s ``subTest``, pytest's ``subtests``) is a test of its own, named
``<test id> › <description>`` (``tests/t.py::T::test_codecs › (codec='zstd')``): it has one
outcome, its own skip site, and the base-record rules apply to it as to any test, whatever
its siblings did.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Evidence = Literal["tests", "exit_code_only"]

NO_EVIDENCE = "not met: the test run gave no evidence"
DISAGREES = "not met: the test run's evidence disagrees"

_RANK = {"passed": 0, "skipped": 1, "xfailed": 2, "failed": 3}

#: Between a test's id and a subtest's description in the subtest's id: no node id holds it
#: (pytest writes a parameter's id in ASCII).
SUBTEST = " \u203a "
_PHASES = ("setup", "call", "teardown")


class SkipSite(BaseModel):
    """Where and why a test was skipped (or xfailed): ``where`` is ``mark`` (a skip or xfail
    mark, unittest's decorators), ``path:line`` of the innermost frame outside the runner that
    raised it (in set-up or in the test's body), or ``test`` (raised by the runner on the
    test's behalf)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["skip_site"] = "skip_site"
    outcome: Literal["skipped", "xfailed"]
    where: str
    reason: str = ""

    def said(self) -> str:
        place = "a mark" if self.where == "mark" else self.where
        return f"{self.outcome} at {place}: {self.reason or '(no reason)'}"


class BaseTests(BaseModel):
    """The base record: what a pytest command ran on the night's base commit, recorded once
    per command (or shared by every command running the same suite or a part of it)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["base_tests"] = "base_tests"
    command: str
    commit: str
    collected: list[str] = Field(default_factory=list)
    """The tests (node ids) the command collected there, in order: each must be passed
    (or skipped as there)."""
    complete: bool = False
    """Recorded with the options that stop or narrow a run turned off: every collected test
    ran (a record without it knows only the tests that ran before the run stopped)."""
    neutralized: list[str] = Field(default_factory=list)
    """The options turned off for the record (``maxfail=1`` for ``-x``, ...)."""
    skipped: dict[str, SkipSite] = Field(default_factory=dict)
    """Tests skipped or xfailed there, with where and why: each may stay so when skipped
    at the same place for the same reason."""
    ran: list[str] = Field(default_factory=list)
    """Tests that ran there (passed or failed): each must pass."""
    keys: dict[str, str] = Field(default_factory=dict)
    """Parametrized tests' identities by their parameters' values: the same case under
    another number (ids pytest numbers in the order a suite lists its cases, which a set's
    order can change from one process to the next) is the same test."""
    allowed: dict[str, str] = Field(default_factory=dict)
    """Older records: tests that may stay skipped, with why (a mark, a skip at set-up)."""


@dataclass(frozen=True)
class Unreadable:
    """A line of the evidence the reporter never writes: which, how long, why, and for which
    test when the line names one."""

    size: int
    why: str
    test: str = ""
    line: int = 0

    def said(self) -> str:
        test = f" for {self.test}" if self.test else ""
        return f"line {self.line}{test}, {self.size:,} bytes, {self.why}"


def subtest_id(nodeid: str, description: str) -> str:
    """The id of a subtest of ``nodeid``."""
    return f"{nodeid}{SUBTEST}{description}"


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
    unreadable_lines: list[Unreadable] = field(default_factory=list)
    """The first of them, each with where and why."""
    truncated: bool = False
    """The evidence was larger than the harness reads."""
    complete: int = 0
    """Sessions that ran with the options that stop or narrow a run turned off."""
    neutralized: list[str] = field(default_factory=list)
    skips: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    """``(node id, phase)`` -> ``(where, reason)`` of a skip or xfail raised there."""
    keys: dict[str, str] = field(default_factory=dict)
    """A parametrized test's node id -> its identity by its parameters' values."""

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

    def skip_site(self, nodeid: str) -> SkipSite | None:
        """Where and why ``nodeid`` was skipped or xfailed; None when it was not, or when the
        run did not say where."""
        status = self.status(nodeid)
        if status not in ("skipped", "xfailed"):
            return None
        outcome: Literal["skipped", "xfailed"] = "skipped" if status == "skipped" else "xfailed"
        kind, _, reason = self.marks.get(nodeid, "").partition(":")
        if (kind, status) in (("skip", "skipped"), ("xfail", "xfailed")):
            # A skip mark skips at set-up (unittest's decorators: in the call, raised by the
            # runner for the test); an xfail mark turns what the test raised into this.
            runner_skipped = any(
                self._phase(nodeid, w) == "skipped"
                and (w == "setup" or self.skips.get((nodeid, w), ("test", ""))[0] == "test")
                for w in ("setup", "call")
            )
            if status == "xfailed" or runner_skipped:
                return SkipSite(outcome=outcome, where="mark", reason=reason.strip())
        for when in _PHASES:
            site = self.skips.get((nodeid, when))
            if site is not None and self._phase(nodeid, when) == status:
                return SkipSite(outcome=outcome, where=site[0], reason=site[1])
        return None

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


def read_run(
    events: Iterable[Mapping[str, Any] | Unreadable | None], *, truncated: bool = False
) -> RunReport:
    """Read the reporter's events (one decoded JSON line each; an ``Unreadable`` or None for
    a line that was not one); anything the reporter never writes is counted as unreadable,
    and the first few are kept with why."""
    run = RunReport(truncated=truncated)
    collected: dict[str, None] = {}
    reported: dict[str, None] = {}

    def unreadable(line: int, found: Unreadable) -> None:
        run.unreadable += 1
        if len(run.unreadable_lines) < 3:
            run.unreadable_lines.append(replace(found, line=line))

    for number, event in enumerate(events, 1):
        if event is None or isinstance(event, Unreadable):
            unreadable(number, event or Unreadable(0, "not a line of the reporter's"))
            continue
        kind, nodeid = event.get("kind"), event.get("nodeid")
        sub = event.get("sub")
        if isinstance(nodeid, str) and isinstance(sub, str) and kind in ("call", "report"):
            nodeid = subtest_id(nodeid, sub)
            # a subtest has one phase, run inside its test's call
            for when in ("setup", "teardown"):
                run.phases.setdefault((nodeid, when), "passed")
        if kind == "started":
            run.started += 1
            off = event.get("plugins_off")
            if isinstance(off, list):
                run.plugins_off = sorted({*run.plugins_off, *(str(n) for n in off)})
            if event.get("complete") is True:
                run.complete += 1
                said = event.get("neutralized")
                if isinstance(said, list):
                    run.neutralized = sorted({*run.neutralized, *(str(n) for n in said)})
        elif kind == "finished" and isinstance(event.get("exitstatus"), int):
            run.finished.append(int(event["exitstatus"]))
        elif kind == "tampered" and isinstance(event.get("what"), list):
            run.tampered += [str(w) for w in event["what"]]
        elif not isinstance(nodeid, str):
            unreadable(number, Unreadable(0, f"a {str(kind)[:40]!r} line without a test id"))
        elif kind == "collected":
            collected[nodeid] = None
            if isinstance(event.get("mark"), str):
                run.marks[nodeid] = event["mark"]
            if isinstance(event.get("key"), str):
                run.keys[nodeid] = event["key"]
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
            site = event.get("skip")
            # the frame the outermost wrapper read wins over the logged report's location
            if isinstance(site, dict) and (key not in run.skips or event.get("seen") == "first"):
                run.skips[key] = (str(site.get("where", "")), str(site.get("reason", "")))
        else:
            unreadable(
                number,
                Unreadable(0, f"a {str(kind)[:40]!r} line the reporter never writes", nodeid),
            )
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
    """The base record of ``command`` from its run on the base commit: what ran there (to be
    passed), and what was skipped there, where and why (which may stay so)."""
    skipped: dict[str, SkipSite] = {}
    ran: list[str] = []
    for nodeid in run.collected:
        status = run.status(nodeid)
        if status in ("passed", "failed"):
            ran.append(nodeid)
        site = run.skip_site(nodeid)
        if site is not None:
            skipped[nodeid] = site
    complete = run.started > 0 and run.complete == run.started
    return BaseTests(
        command=command,
        commit=commit,
        collected=run.collected,
        complete=complete,
        neutralized=run.neutralized,
        skipped=skipped,
        ran=ran,
        keys=dict(run.keys),
    )


@dataclass(frozen=True)
class Scope:
    """The part of a base record a check runs: its tests under ``paths`` (node ids or
    path prefixes; all when empty), less those its own run deselected when ``narrowed``
    (it selects by keyword or mark)."""

    paths: tuple[str, ...] = ()
    narrowed: bool = False

    def holds(self, nodeid: str) -> bool:
        if not self.paths or "." in self.paths:
            return True
        return any(
            nodeid == p or nodeid.startswith((p + "::", p.rstrip("/") + "/")) for p in self.paths
        )


@dataclass(frozen=True)
class SkipGroup:
    """Tests that stayed skipped (or xfailed) as on the base commit, for one reason."""

    outcome: str
    reason: str
    tests: tuple[str, ...]

    def said(self) -> str:
        return f"{len(self.tests)}: {self.reason or '(no reason given)'}"

    def counted(self) -> str:
        """``33 skipped as on the base commit: numpy is not installed``."""
        why = self.reason or "(no reason given)"
        return f"{len(self.tests)} {self.outcome} as on the base commit: {why}"


@dataclass(frozen=True)
class Judgement:
    """A pytest run judged on its evidence."""

    met: bool
    verdict: str
    """One line: ``met: 3 passed`` or ``not met: ...``, naming tests."""
    allowed: tuple[str, ...] = ()
    """Tests that stayed skipped as on the base commit, each with where and why."""
    stayed: tuple[SkipGroup, ...] = ()
    """The same, grouped by reason, most tests first."""


def judge(
    run: RunReport | None,
    exit_code: int | None,
    base: BaseTests | None = None,
    scope: Scope | None = None,
) -> Judgement:
    """Whether a pytest command's run is met, on its evidence (see the module docstring);
    ``scope``: the part of ``base`` the command runs (all of it by default)."""
    scope = scope or Scope()
    required = [n for n in base.collected if scope.holds(n)] if base is not None else []
    alias = _same_cases(base, run) if base is not None and run is not None else {}
    required = [alias.get(n, n) for n in required]
    if exit_code != 0:
        failed = [] if run is None else _named(run, required, "failed")
        said = f"; failed: {_names(failed)}" if failed else ""
        return Judgement(False, f"not met: exit {exit_code}{said}")
    if run is None or run.started == 0 or not run.finished:
        return Judgement(
            False, f"{NO_EVIDENCE} (the harness's reporter saw no test session finish)"
        )
    if run.truncated:
        return Judgement(
            False,
            f"{DISAGREES} (its report is larger than the harness reads: the tests it does not "
            "hold cannot be judged)",
        )
    if run.unreadable:
        first = "; ".join(u.said() for u in run.unreadable_lines)
        return Judgement(
            False,
            f"{DISAGREES} (its report holds {run.unreadable} line(s) the harness's reporter "
            f"never writes: {first})",
        )
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
    deselected = set(run.deselected)
    if scope.narrowed:  # the check's own -k or -m left these out
        required = [n for n in required if n not in deselected]
    everything = list(dict.fromkeys([*required, *run.collected]))
    if not everything:
        return Judgement(False, f"{NO_EVIDENCE} (no test was collected)")
    by_status: dict[str, list[str]] = {}
    stayed: dict[tuple[str, str], list[str]] = {}
    notes: dict[str, list[str]] = {}
    origin = {here: there for there, here in alias.items()}
    shown: list[str] = []
    for nodeid in everything:
        status = run.status(nodeid)
        if status == "passed":
            continue
        if status in ("skipped", "xfailed"):
            why = _as_on_base(run, nodeid, base, origin.get(nodeid, nodeid))
            if why is None:
                site = run.skip_site(nodeid)
                stayed.setdefault((status, site.reason if site else ""), []).append(nodeid)
                shown.append(f"{nodeid} ({site.said() if site else status})")
                continue
            if why:
                notes.setdefault(why, []).append(nodeid)
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
        parts += [f"{note}: {_names(ids)}" for note, ids in notes.items()]
        return Judgement(False, "not met: not every test passed (" + "; ".join(parts) + ")")
    groups = tuple(
        SkipGroup(outcome, reason, tuple(ids))
        for (outcome, reason), ids in sorted(stayed.items(), key=lambda kv: -len(kv[1]))
    )
    passed = len(everything) - len(shown)
    return Judgement(True, f"met: {passed} passed{stayed_said(groups)}", tuple(shown), groups)


def stayed_said(groups: Sequence[SkipGroup], limit: int = 5) -> str:
    """``; 35 skipped as on the base commit (33: numpy is not installed; 2: ...)``."""
    said = ""
    for outcome in ("skipped", "xfailed"):
        mine = [g for g in groups if g.outcome == outcome]
        if not mine:
            continue
        count = sum(len(g.tests) for g in mine)
        reasons = "; ".join(g.said() for g in mine[:limit])
        if len(mine) > limit:
            reasons += f"; and {len(mine) - limit} more reasons"
        said += f"; {count} {outcome} as on the base commit ({reasons})"
    return said


def _same_cases(base: BaseTests, run: RunReport) -> dict[str, str]:
    """Base node ids whose case the run holds under another id: the same parametrized case
    (the same parameter values), numbered otherwise. Paired one to one, in order."""
    by_key: dict[str, list[str]] = {}
    for nodeid in run.collected:
        key = run.keys.get(nodeid)
        if key is not None:
            by_key.setdefault(key, []).append(nodeid)
    alias: dict[str, str] = {}
    for nodeid in base.collected:
        key = base.keys.get(nodeid)
        if key is None or not by_key.get(key):
            continue
        here = by_key[key].pop(0)
        if here != nodeid:
            alias[nodeid] = here
    return alias


def _as_on_base(
    run: RunReport, nodeid: str, base: BaseTests | None, on_base: str | None = None
) -> str | None:
    """None when ``nodeid``, skipped or xfailed here, was so on the base commit (as
    ``on_base``) in the same way; else what to say of it (empty when the base commit did not
    know it)."""
    if base is None:
        return ""
    on_base = on_base or nodeid
    known = base.skipped.get(on_base)
    if known is None:
        if on_base in base.allowed and on_base not in base.ran:  # an older record's
            return None
        return "ran on the base commit" if on_base in base.ran else ""
    site = run.skip_site(nodeid)
    if site is None or (site.outcome, site.where, site.reason) != (
        known.outcome,
        known.where,
        known.reason,
    ):
        here = site.said() if site is not None else "where, unsaid"
        return f"otherwise than on the base commit (there {known.said()}; here {here})"
    return None


def _named(run: RunReport, required: Sequence[str], status: str) -> list[str]:
    ids = dict.fromkeys([*required, *run.collected])
    return [n for n in ids if run.status(n) == status]


def _names(ids: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")
