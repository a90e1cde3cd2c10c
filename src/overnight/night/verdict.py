"""The verdict: the harness's word on a candidate, never the model's.

Three steps, and this module is where each happens:

* **record the base** (``base_for``): one complete run of a pytest suite on the base commit,
  whatever the check's ``-x``, ``--maxfail``, ``--sw``, ``--lf`` or ``addopts`` (the reporter
  turns them off for the record), kept in the run's state. It serves the goal predicate and
  every verify that runs the same suite or a part of it (``overnight.core.suite``); a check
  that runs another suite gets a record of its own. The start check's run of the predicate on
  the base commit is that record, and also the predicate's first verdict.
* **judge a candidate** (``verify``, ``predicate``): the check, as written, on a clean checkout
  of exactly what would be committed, in the sandbox; for pytest, judged per test on the
  reporter's evidence against the record (``overnight.core.evidence.judge``). Before any of
  that, what a candidate changed of what judges the work, or of what runs by itself (CI,
  hooks, editor and agent configuration) beyond what the spec allows (``screen``), parks it.
* **explain the judgement**: one line (``met: 280 passed; 39 skipped as on the base commit
  (33: ...; 4: ...)``), what stayed skipped grouped by reason, and the files of a landed
  change that reach into the test runner (``touches_runner``) for a person to read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from overnight.config.gates import GateSpec
from overnight.config.spec import PredicateSpec
from overnight.core.automation import Automation, AutomationChange, automation_changes
from overnight.core.evidence import BaseTests, Evidence, Judgement, RunReport, Scope, base_tests
from overnight.core.evidence import judge as judge_tests
from overnight.core.places import Places
from overnight.core.protect import ChangedPath, Protection, build_protection
from overnight.core.resume import VerifyOutcome, cannot_run_reason, outcome_of_exit, runs_pytest
from overnight.core.state import PredicateRecord, RunState
from overnight.core.suite import record_for
from overnight.core.tasks import Task
from overnight.core.text import clip
from overnight.gates.manifests import dependency_change, is_manifest
from overnight.installed import installed_module_names
from overnight.night.checkouts import NoTimeLeft, RanCommand, RunCheck, SetupFailed, ran_fields
from overnight.night.gates import GateVerdict
from overnight.night.planner import verify_prefixes
from overnight.night.testrun import runner_touches
from overnight.night.worktree import Change, Worktree
from overnight.process import Confinement, placed_output
from overnight.seams import ToolError
from overnight.store.trace import Trace
from overnight.tools.shell import check_command

OUTPUT_TAIL = 2000


@dataclass(frozen=True)
class Screen:
    """What an agent task's candidate changes that no verify may judge: what judges the work
    (``judging_changes``: path and sentence), what runs by itself beyond what the spec allows
    (``automation_refused``), and what runs by itself that the spec allows
    (``automation_allowed``: it lands)."""

    judging_changes: list[tuple[str, str]] = field(default_factory=list)
    automation_refused: list[AutomationChange] = field(default_factory=list)
    automation_allowed: list[AutomationChange] = field(default_factory=list)
    oversized: str = ""
    """Why the change is larger than ``[predicate] max_diff_lines`` allows (empty: it is not)."""
    dependencies_refused: list[str] = field(default_factory=list)
    """What it changes of the project's dependencies, the spec not allowing it: one sentence
    per manifest or lockfile."""
    dependencies_allowed: list[str] = field(default_factory=list)
    """The same, the spec allowing it (``[predicate] allow_dependency_changes``): it lands,
    named."""

    @property
    def landed_automation(self) -> list[str]:
        return [a.path for a in self.automation_allowed]

    @property
    def refused(self) -> bool:
        """Whether the change is parked unjudged: it changes what judges the work, what runs
        by itself or the dependencies beyond what the spec allows, or is too large."""
        return bool(
            self.judging_changes
            or self.automation_refused
            or self.oversized
            or self.dependencies_refused
        )


@dataclass(frozen=True)
class Verdict:
    """What a task's verify said."""

    outcome: VerifyOutcome
    detail: str
    cannot_run: str = ""
    """Why the check could not run (``exit 127: command not found``), for ``CANNOT_RUN``."""
    evidence: Evidence = "exit_code_only"
    gates: GateVerdict | None = None
    """What the repository's own checks said, when the verify passed and the spec has gates
    (``overnight.night.gates``): new findings make the outcome ``NOT_DONE``."""


@dataclass(frozen=True)
class _Verified:
    """The last verify that ran the goal predicate's command, on a clean checkout of
    ``commit``."""

    commit: str
    task: str
    ran: RanCommand


def protection_for(
    predicate: PredicateSpec,
    task_verifies: Sequence[str],
    files_at_base: set[str],
    dirs_at_base: set[str],
    gates: Sequence[GateSpec] = (),
) -> Protection:
    """What judges the work of a night whose base tree holds these paths: the ``predicate``'s
    protect globs, what its command and the spec's tasks' verify commands (``task_verifies``)
    name, and the installed module names a new top-level file may not shadow. The night and
    its audit both build it here."""
    commands = [predicate.command, *task_verifies]
    configs = [(path, gate.name) for gate in gates for path in gate.config_files()]
    return build_protection(
        predicate.protect, commands, files_at_base, dirs_at_base, installed_module_names(), configs
    )


@dataclass(frozen=True)
class VerdictRules:
    """What the verdict of a night reads of its spec."""

    predicate: PredicateSpec
    """The goal predicate: its command and timeout, what it protects, and the automation a
    candidate may change."""
    commands: list[str]
    """``[tools] commands``: the prefixes a model-written verify may start with."""
    task_verifies: list[str]
    """The verify commands of the spec's own tasks: what they name judges the work too."""
    gates: list[GateSpec] = field(default_factory=list)
    """``[[gates]]``: the files that configure them judge the work too."""


class Verdicts:
    """Record the base, judge a candidate, explain the judgement, for one night."""

    def __init__(
        self,
        rules: VerdictRules,
        state: RunState,
        worktree: Worktree,
        checkout: Callable[[str | None], Path],
        trace: Trace,
        run: RunCheck,
        confinement: Callable[..., Confinement | None],
        log_name: Callable[[str], str],
        seconds_left: Callable[[], float],
    ) -> None:
        self.rules = rules
        self.state = state
        self.worktree = worktree
        self.checkout = checkout
        self.trace = trace
        self.run = run
        self.confinement = confinement
        self.log_name = log_name
        self.seconds_left = seconds_left
        self.places = worktree.places()
        """How the run's places are written in a verdict's detail, which a model is shown (a
        retry's first message, the replan): before the output is cut to a length."""
        self._protection: Protection | None = None
        self._automation = Automation(tuple(rules.predicate.allow_automation))
        self._links: tuple[str, dict[str, str]] | None = None
        self._verified: _Verified | None = None

    # -- record the base -------------------------------------------------------------------

    def base_for(
        self, key: str, command: str | list[str], model_written: bool, timeout_s: float
    ) -> tuple[BaseTests, Scope] | None:
        """The base record a pytest check is judged against, and the part of it the check
        runs: the record of the same suite when one is kept (from the start, or an earlier
        check), else one complete run of ``command`` on a clean checkout of the base commit,
        kept under ``key``. None for a check that does not run pytest."""
        if not runs_pytest(command):
            return None
        s = self.state
        known = record_for(s.base_tests, s.base_commit, key, command)
        if known is not None:
            if known[0].command != key:
                self.trace.event(
                    "decision", decision="base_tests_shared", command=key, record=known[0].command
                )
            return known
        found = self.record(key, command, model_written, timeout_s)
        return found, Scope()

    def record(
        self, key: str, command: str | list[str], model_written: bool, timeout_s: float
    ) -> BaseTests:
        """Run ``command`` on a clean checkout of the base commit as a base record."""
        s = self.state
        try:
            where = self.checkout(s.base_commit)
        except SetupFailed as exc:  # judged without a record: every test must pass
            self.trace.event("decision", decision="base_tests_setup_failed", detail=str(exc))
            return self.keep(key, BaseTests(command=key, commit=s.base_commit), 0.0)
        ran = self.run(
            command,
            timeout_s,
            self.log_name("base-tests"),
            clip=True,
            cwd=where,
            confine=self.confinement(model_written=model_written),
            tests=True,
            complete=True,
        )
        if ran.cut_at_time_limit:
            raise NoTimeLeft("the check on the base commit was cut at the time limit")
        found = base_tests(key, s.base_commit, ran.tests or RunReport())
        return self.keep(key, found, ran.result.seconds)

    def keep(self, key: str, found: BaseTests, seconds: float) -> BaseTests:
        self.state.base_tests = {**self.state.base_tests, key: found}
        self.trace.event(
            "decision",
            decision="base_tests",
            command=key,
            seconds=round(seconds, 3),
            collected=len(found.collected),
            complete=found.complete,
            neutralized=found.neutralized,
            skipped=len(found.skipped),
        )
        return found

    # -- judge a candidate -----------------------------------------------------------------

    def verify(self, task: Task, candidate: str | None, attempt: int) -> Verdict:
        """Run the task's verify on a clean checkout of ``candidate`` (None: the branch as it
        stands): exactly what would be committed, nothing the agent left beside it. Raises
        ``NoTimeLeft`` when there is no time to start it, or the night's clock cut it."""
        if self.seconds_left() <= 0:
            raise NoTimeLeft(f"no time was left to run the verify of {task.id}")
        command: str | list[str] = task.verify
        if task.model_written:
            try:  # a model's text runs as plain words, never through a shell
                command = check_command(task.verify, verify_prefixes(self.rules.commands))
            except ToolError as exc:
                self.trace.event("tool_call", tool="verify", task=task.id, refused=str(exc))
                why = f"refused: {exc}"
                return Verdict(
                    VerifyOutcome.CANNOT_RUN, f"the verify command was refused: {exc}", why
                )
        base = self.base_for(task.verify, command, task.model_written, task.timeout_s)
        try:
            where = self.checkout(candidate)
        except SetupFailed as exc:
            return Verdict(VerifyOutcome.NOT_DONE, f"not met: {exc}")
        confine = self.confinement(model_written=task.model_written)
        ran = self.run(
            command,
            task.timeout_s,
            self.log_name(f"{task.id}.{attempt}.verify"),
            clip=True,
            cwd=where,
            confine=confine,
            tests=runs_pytest(command),
        )
        result = ran.result
        self.trace.event("tool_call", tool="verify", task=task.id, **ran_fields(ran, confine))
        if ran.cut_at_time_limit:
            raise NoTimeLeft(
                f"the verify of {task.id} was cut at the time limit after {result.seconds:.1f} s"
            )
        self._verified = None
        if command == self.rules.predicate.command and not task.model_written:
            self._verified = _Verified(candidate or self.worktree.head(), task.id, ran)
        outcome = outcome_of_exit(result.exit_code, command)
        cannot_run = cannot_run_reason(result.exit_code, command) or ""
        if result.timed_out:
            why = f"timed out after {ran.timeout_s:g} s"
        else:
            why = cannot_run or f"exit {result.exit_code}"
        evidence: Evidence = "exit_code_only"
        if ran.tests is not None:
            evidence = "tests"
            if outcome in (VerifyOutcome.DONE, VerifyOutcome.NOT_DONE):
                judged = self.judge(ran, base)
                why = judged.verdict
                if not judged.met:
                    outcome = VerifyOutcome.NOT_DONE
                self.trace.event("decision", decision="verify_evidence", task=task.id, verdict=why)
        told = clip(placed_output(result, self.places), OUTPUT_TAIL)
        detail = f"{self.places(why)}: {told}".strip()
        return Verdict(outcome, detail, cannot_run, evidence)

    def night_predicate(self) -> PredicateRecord:
        """The goal predicate's verdict for the night: the start check's, on the base commit,
        stands for the night's first run (counted as its policy ran it); any other, a run
        (``predicate``)."""
        first = self.state.last_predicate
        if first is not None and first.at_start and self.worktree.head() == self.state.base_commit:
            self.confinement()  # counted as its policy ran it, sandboxed or not
            self.trace.event("tool_call", **predicate_fields(first), from_start_check=True)
            return first.model_copy(update={"at_start": False})
        return self.predicate()

    def predicate(self) -> PredicateRecord:
        """Run the goal predicate on a clean checkout of the branch, bounded by the time left;
        with none left it is not started, and the goal counts as not met. On the base commit
        with no record yet, its run is the record (every test run, as a record runs)."""
        p = self.rules.predicate
        tests = runs_pytest(p.command)
        try:
            if self.seconds_left() <= 0:
                raise NoTimeLeft("no time was left to run the goal predicate")
            head = self.worktree.head()
            reused = self._reusable(head)
            if reused is not None:
                return self._judged_again(reused)
            on_base = head == self.state.base_commit
            base = None
            as_record = tests and on_base and self.base_for_kept(p.command) is None
            if tests and not as_record:
                base = self.base_for(p.command, p.command, False, p.timeout_s)
            where = self.checkout(None)
            confine = self.confinement()
            ran = self.run(
                p.command,
                p.timeout_s,
                "predicate.log",
                clip=True,
                cwd=where,
                confine=confine,
                tests=tests,
                complete=as_record,
            )
        except SetupFailed as exc:
            return PredicateRecord(met=False, exit_code=None, seconds=0.0, detail=f"not met: {exc}")
        except NoTimeLeft:
            return PredicateRecord(
                met=False,
                exit_code=None,
                seconds=0.0,
                detail="not run: no time was left before the time limit",
                ran=False,
            )
        if as_record and ran.tests is not None and not ran.result.timed_out:
            found = base_tests(p.command, self.state.base_commit, ran.tests)
            base = (self.keep(p.command, found, ran.result.seconds), Scope())
        record = judged_predicate(ran, base, self.places)
        self.trace.event(
            "tool_call",
            **predicate_fields(record),
            timed_out=record.timed_out,
            cut_at_time_limit=ran.cut_at_time_limit,
            sandboxed=confine is not None,
        )
        return record

    def _reusable(self, head: str) -> _Verified | None:
        """The verify whose run is the predicate's on ``head``: the same command, run as the
        predicate runs (not a model's words), to its end within the predicate's timeout, on
        a clean checkout of exactly this commit."""
        found = self._verified
        if found is None or found.commit != head:
            return None
        result = found.ran.result
        if result.timed_out or result.seconds > self.rules.predicate.timeout_s:
            return None
        return found

    def _judged_again(self, verified: _Verified) -> PredicateRecord:
        """The goal predicate judged on the run of the verify that landed this tree, against
        the predicate's own base record: the suite is not run a second time."""
        p = self.rules.predicate
        base = (
            self.base_for(p.command, p.command, False, p.timeout_s) if verified.ran.tests else None
        )
        record = judged_predicate(verified.ran, base, self.places)
        self.trace.event("tool_call", **predicate_fields(record), from_verify=verified.task)
        return record

    def base_for_kept(self, key: str) -> BaseTests | None:
        known = self.state.base_tests.get(key)
        return known if known is not None and known.commit == self.state.base_commit else None

    @staticmethod
    def judge(ran: RanCommand, base: tuple[BaseTests, Scope] | None) -> Judgement:
        record, scope = base if base is not None else (None, None)
        return judge_tests(ran.tests, ran.result.exit_code, record, scope)

    # -- what judges the work ----------------------------------------------------------------

    @property
    def protection(self) -> Protection:
        if self._protection is None:
            files, dirs = self.worktree.tree_paths(self.state.base_commit)
            rules = self.rules
            self._protection = protection_for(
                rules.predicate, rules.task_verifies, files, dirs, rules.gates
            )
        return self._protection

    def screen(self, task: Task, candidate: str | None, parent: str | None = None) -> Screen:
        """What an agent task's candidate changes (against ``parent``, by default the branch)
        of what judges the work and of what runs by itself. The user's own command tasks may
        change anything."""
        if candidate is None or task.brief is None:
            return Screen()
        found = self.worktree.changes(candidate, parent)
        changes = [ChangedPath(c.status, c.path, c.nested_repository) for c in found]
        links = self.worktree.links(parent) if parent else self.branch_links()
        automation = automation_changes(changes, self.worktree.link_targets(found), links)
        blocked, allowed = self._automation.split(automation)
        refused, named = self.dependencies(found, candidate, parent)
        return Screen(
            self.protection.judged(changes),
            blocked,
            allowed,
            oversized=self.oversized(candidate, parent),
            dependencies_refused=refused,
            dependencies_allowed=named,
        )

    def oversized(self, candidate: str, parent: str | None) -> str:
        """Why the change is over ``[predicate] max_diff_lines``; empty when it is not."""
        limit = self.rules.predicate.max_diff_lines
        if limit is None:
            return ""
        files, lines = self.worktree.diff_size(parent or self.worktree.head(), candidate)
        if lines <= limit:
            return ""
        return (
            f"its change is {lines} lines in {files} file(s), over [predicate] max_diff_lines "
            f"= {limit}"
        )

    def dependencies(
        self, found: Sequence[Change], candidate: str, parent: str | None
    ) -> tuple[list[str], list[str]]:
        """What the change does to the project's dependencies, one sentence per manifest:
        ``(refused, allowed)`` as ``[predicate] allow_dependency_changes`` says."""
        changed = dependency_changes(self.worktree, found, candidate, parent)
        if self.rules.predicate.allow_dependency_changes:
            return [], changed
        return changed, []

    def branch_links(self) -> dict[str, str]:
        """Every symbolic link of the branch's tree, with its target (read once per commit)."""
        head = self.worktree.head()
        if self._links is None or self._links[0] != head:
            self._links = (head, self.worktree.links(head))
        return self._links[1]

    def touches_runner(self, task: Task, candidate: str | None) -> list[str]:
        """The files of an agent task's candidate that reach into the test runner, found by
        a fixed-string search of the commit's own objects, for the report."""
        if candidate is None or task.brief is None:
            return []
        paths = [c.path for c in self.worktree.changes(candidate) if c.status != "D"]
        found = runner_touches(self.worktree.common, candidate, paths)
        if found:
            self.trace.event("decision", decision="touches_runner", task=task.id, paths=found)
        return found


def dependency_changes(
    worktree: Worktree, found: Sequence[Change], candidate: str, parent: str | None
) -> list[str]:
    """One sentence per manifest or lockfile whose change to ``candidate`` from ``parent``
    (by default the branch) changes the dependencies."""
    before = parent or worktree.head()
    sentences: list[str] = []
    for change in found:
        if change.nested_repository or not is_manifest(change.path):
            continue
        old = None if change.status == "A" else worktree.file_text(before, change.path)
        new = None if change.status == "D" else worktree.file_text(candidate, change.path)
        said = dependency_change(change.path, old, new)
        if said is not None:
            sentences.append(said)
    return sentences


def predicate_fields(record: PredicateRecord) -> dict[str, object]:
    """What the trace says of a goal predicate's verdict, however it was reached (a run, the
    start check's, a verify's run of the same command on the same tree)."""
    return {
        "tool": "predicate",
        "exit_code": record.exit_code,
        "met": record.met,
        "evidence": record.evidence,
        "verdict": record.verdict,
        "seconds": record.seconds,
    }


def judged_predicate(
    ran: RanCommand, base: tuple[BaseTests, Scope] | None, places: Places
) -> PredicateRecord:
    """The goal predicate's record from its run: for pytest, judged per test against the base
    record; a timeout is never met. Its detail, which the replan shows a model, has the run's
    ``places`` written as they are shown before its output is cut to a length."""
    result = ran.result
    met = result.exit_code == 0
    detail = clip(placed_output(result, places), OUTPUT_TAIL)
    judged: Judgement | None = None
    if ran.tests is not None:
        judged = Verdicts.judge(ran, base)
        met = judged.met and not result.timed_out
        detail = f"{places(judged.verdict)}\n{detail}"
    if ran.cut_at_time_limit:
        detail = f"not met (timed out at the time limit, after {result.seconds:.1f} s)\n{detail}"
    elif result.timed_out:
        detail = f"not met (timed out after {ran.timeout_s:g} s)\n{detail}"
    return PredicateRecord(
        met=met,
        exit_code=result.exit_code,
        seconds=round(result.seconds, 3),
        detail=detail.strip() if result.timed_out else detail,
        timed_out=result.timed_out,
        evidence="tests" if judged is not None else "exit_code_only",
        verdict=judged.verdict if judged is not None else "",
        allowed=list(judged.allowed) if judged is not None else [],
        stayed_skipped=[g.counted() for g in judged.stayed] if judged is not None else [],
    )
