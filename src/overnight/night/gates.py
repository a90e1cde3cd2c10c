"""The repository's own checks in the verdict (``[[gates]]``), judged against the base commit.

Each gate runs once on a clean checkout of the base commit and its findings are kept
(``gates.json``, read back by a resume); a task whose verify passed then has every gate run on
a clean checkout of exactly what would land, and may not add a finding the base did not have
(``overnight.gates.readers.new_findings``: identified by file, rule and text, never by line).
A suppression comment the change adds (``# noqa``, ``# type: ignore``) counts as the finding
it hides. A format gate's findings are the tracked files its formatter rewrites: a file the
base already left unformatted is a finding of the base too, so only newly unformatted files
count. A gate whose output cannot be read on the base commit judges nothing that night (said
in the trace and the result); one that cannot be read on a candidate is a finding.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from overnight.config.gates import GateSpec, gate_slug
from overnight.core.state import RunState
from overnight.gates.readers import (
    Finding,
    FindingsUnreadable,
    new_findings,
    read_findings,
    removed_findings,
)
from overnight.gates.suppressions import added_suppressions
from overnight.night.checkouts import NoTimeLeft, RunCheck, SetupFailed
from overnight.night.worktree import Worktree
from overnight.process import Confinement
from overnight.store.atomic import write_atomic
from overnight.store.gate_record import FoundRow, GateRun, GatesRecord, read_gates, write_gates
from overnight.store.result import GateBlock
from overnight.store.trace import Trace

#: The most new findings a park reason or a retry brief lists one by one.
SHOWN = 20
#: The most a park reason names (the parked task's detail lists up to ``SHOWN``).
NAMED = 5


@dataclass(frozen=True)
class GateVerdict:
    """What the gates said of one candidate: the findings it adds, gate by gate."""

    new: list[tuple[str, Finding]]
    """``(gate, finding)``; ``suppressions`` for a suppression comment the change adds."""
    removed: int = 0
    """Findings of the base the candidate no longer has: counted in its favour."""

    @property
    def passed(self) -> bool:
        return not self.new

    def lines(self, most: int = SHOWN) -> list[str]:
        """One line per new finding (the first ``most``), then how many more."""
        shown = [f"{gate}: {finding.text()}" for gate, finding in self.new[:most]]
        if len(self.new) > most:
            shown.append(f"and {len(self.new) - most} more")
        return shown

    def detail(self) -> str:
        """The verdict's detail: every new finding (the first ``SHOWN``), one per line."""
        return (
            f"the repository's own checks found {len(self.new)} finding(s) the base commit "
            "does not have:\n" + "\n".join(self.lines())
        )

    def park_reason(self, routed: str) -> str:
        """Why the task is parked, naming the first ``NAMED`` findings (the detail has the
        rest); ``routed`` is the router's reason."""
        named = "; ".join(self.lines(NAMED))
        count = len(self.new)
        return (
            f"its change adds {count} finding(s) of the repository's own checks: {named} ({routed})"
        )

    def brief(self, verify: str, attempt: int) -> str:
        """What the next attempt is told: the findings to fix, not to silence."""
        return (
            f"Attempt {attempt} of this task passed the check `{verify}`, but its change "
            "adds findings of the repository's own checks (its linter, formatter or type "
            "checker) that the base commit does not have; its edits are still in the "
            "worktree. Fix each one in the code (a suppression comment counts as the finding "
            "it hides, and the checks' configuration cannot be changed):\n"
            + "\n".join(self.lines())
        )


class Gates:
    """Runs a night's gates: on the base commit once, then on each verified candidate."""

    def __init__(
        self,
        gates: list[GateSpec],
        state: RunState,
        worktree: Worktree,
        checkout: Callable[[str | None], Path],
        run: RunCheck,
        confinement: Callable[..., Confinement | None],
        log_name: Callable[[str, str], str],
        trace: Trace,
        record_path: Path,
        artifacts: Path,
    ) -> None:
        self.gates = gates
        self.state = state
        self.worktree = worktree
        self.checkout = checkout
        self.run = run
        self.confinement = confinement
        self.log_name = log_name
        self.trace = trace
        self.record_path = record_path
        self.artifacts = artifacts
        self._record: GatesRecord | None = None
        self._judged: tuple[str, dict[str, GateRun]] | None = None

    # -- the base ----------------------------------------------------------------------------

    def record(self) -> GatesRecord:
        """The base commit's findings: read back when this night kept them (a resume), else
        every gate run once on a clean checkout of the base commit, and kept."""
        if self._record is not None:
            return self._record
        base = self.state.base_commit
        kept = read_gates(self.record_path)
        names = [g.name for g in self.gates]
        if kept is not None and kept.base_commit == base and sorted(kept.base) == sorted(names):
            self._record = kept
            return kept
        runs = self.run_all(base, "base")
        self._record = GatesRecord(base_commit=base, base=runs)
        write_gates(self.record_path, self._record)
        for name, ran in runs.items():
            self.trace.event(
                "decision",
                decision="gate_base",
                gate=name,
                findings=len(ran.findings),
                unreadable=ran.unreadable or None,
            )
        return self._record

    # -- a candidate -------------------------------------------------------------------------

    def judge(self, task_id: str, candidate: str | None, attempt: int) -> GateVerdict | None:
        """The gates on a clean checkout of ``candidate`` against the base's findings, and
        the suppressions it adds against the branch; None when there are no gates or no
        change. Raises ``NoTimeLeft`` when a gate is cut at the night's time limit."""
        if not self.gates or candidate is None:
            return None
        base = self.record()
        runs = self.run_all(candidate, f"{task_id}.{attempt}")
        new: list[tuple[str, Finding]] = []
        removed = 0
        for gate in self.gates:
            before, now = base.base[gate.name], runs[gate.name]
            if before.unreadable:  # it judged nothing on the base: it judges nothing tonight
                continue
            if now.unreadable:
                new.append((gate.name, Finding("", "unreadable", now.unreadable)))
                continue
            new += [(gate.name, f) for f in new_findings(before.found(), now.found())]
            removed += len(removed_findings(before.found(), now.found()))
        new += [("suppressions", f) for f in self.added_suppressions(candidate)]
        self._judged = (candidate, runs)
        verdict = GateVerdict(new, removed)
        self.trace.event(
            "decision",
            decision="gates",
            task=task_id,
            new=len(verdict.new),
            removed=removed,
            findings=verdict.lines()[:5],
        )
        return verdict

    def landed(self, commit: str) -> None:
        """Keep the gates' runs on ``commit``, which just landed, for the result's counts."""
        if self._judged is None or self._judged[0] != commit or self._record is None:
            return
        landed = {**self._record.landed, commit: self._judged[1]}
        self._record = self._record.model_copy(update={"landed": landed})
        write_gates(self.record_path, self._record)
        self._judged = None

    def added_suppressions(self, candidate: str) -> list[Finding]:
        found: list[Finding] = []
        parent = self.worktree.head()
        for change in self.worktree.changes(candidate):
            if change.status == "D" or change.nested_repository:
                continue
            new_text = self.worktree.file_text(candidate, change.path)
            if new_text is None:  # binary or too large to be code a person reads
                continue
            base_text = (
                None if change.status == "A" else self.worktree.file_text(parent, change.path)
            )
            found += added_suppressions(change.path, base_text, new_text)
        return found

    # -- running ------------------------------------------------------------------------------

    def run_all(self, commit: str, stem: str) -> dict[str, GateRun]:
        """Every gate on a clean checkout of ``commit``: the findings gates on one checkout,
        each format gate on a fresh one (a formatter rewrites what the next would read)."""
        runs: dict[str, GateRun] = {}
        where: Path | None = None
        fresh = True
        for gate in sorted(self.gates, key=lambda g: g.kind == "format"):
            if where is None or (gate.kind == "format" and not fresh):
                try:
                    where = self.checkout(commit)
                except SetupFailed as exc:
                    runs[gate.name] = GateRun(gate=gate.name, commit=commit, unreadable=str(exc))
                    where = None
                    continue
            fresh = gate.kind != "format"
            runs[gate.name] = self.run_one(gate, commit, where, stem)
        return {g.name: runs[g.name] for g in self.gates}

    def run_one(self, gate: GateSpec, commit: str, where: Path, stem: str) -> GateRun:
        files = sorted(self.worktree.tree_paths(commit)[0]) if gate.kind == "format" else []
        before = tree_hashes(where, files)
        log = self.log_name(f"{stem}.gate.{gate_slug(gate.name)}", ".log")
        ran = self.run(
            gate.command, gate.timeout_s, log, clip=True, cwd=where, confine=self.confinement()
        )
        result = ran.result
        self.trace.event(
            "tool_call",
            tool="gate",
            gate=gate.name,
            commit=commit[:12],
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            seconds=round(result.seconds, 3),
        )
        if ran.cut_at_time_limit:
            raise NoTimeLeft(f"the gate {gate.name!r} was cut at the time limit")
        if result.timed_out or result.exit_code is None:
            why = f"`{gate.command}` timed out after {ran.timeout_s:g} s"
            return GateRun(gate=gate.name, commit=commit, raw=log, unreadable=why)
        if gate.kind == "format":
            return self._formatted(gate, commit, where, files, before, result.exit_code, stem)
        output = read_log(self.artifacts / log)
        try:
            found = read_findings(gate.reads_with(), output, result.exit_code, str(where))
        except FindingsUnreadable as exc:
            why = str(exc)[:1000]
            return GateRun(
                gate=gate.name, commit=commit, raw=log, exit_code=result.exit_code, unreadable=why
            )
        rows = [FoundRow.of(f) for f in found]
        return GateRun(
            gate=gate.name, commit=commit, findings=rows, raw=log, exit_code=result.exit_code
        )

    def _formatted(
        self,
        gate: GateSpec,
        commit: str,
        where: Path,
        files: list[str],
        before: dict[str, str],
        exit_code: int,
        stem: str,
    ) -> GateRun:
        """A format gate's findings: each tracked file its command rewrote."""
        if exit_code != 0:
            why = f"`{gate.command}` exited {exit_code}: it did not format the tree"
            return GateRun(gate=gate.name, commit=commit, exit_code=exit_code, unreadable=why)
        rewritten = rewritten_files(files, before, tree_hashes(where, files))
        raw = self.log_name(f"{stem}.gate.{gate_slug(gate.name)}", ".rewritten")
        body = "".join(f"{p}\n" for p in rewritten).encode("utf-8")
        write_atomic(self.artifacts / raw, body, raw)
        return GateRun(
            gate=gate.name,
            commit=commit,
            findings=[FoundRow.of(format_finding(gate.name, p)) for p in rewritten],
            raw=raw,
            exit_code=exit_code,
        )

    # -- the result ---------------------------------------------------------------------------

    def counts(self, head: str | None) -> list[GateBlock]:
        """Per gate: the base's findings, those of the last landed commit (the base's when
        nothing landed), and what it added and removed."""
        if not self.gates:
            return []
        record = self._record or read_gates(self.record_path)
        if record is None:
            return []
        return gate_counts(record, {g.name: g.kind for g in self.gates}, head)


def format_finding(gate: str, path: str) -> Finding:
    """The finding a format gate reports for a file its formatter rewrote."""
    return Finding(path, "format", f"not formatted as `{gate}` writes it")


def gate_counts(record: GatesRecord, kinds: dict[str, str], head: str | None) -> list[GateBlock]:
    """The counts the result carries, from a gates record."""
    landed = record.landed.get(head or "") or (
        list(record.landed.values())[-1] if record.landed else {}
    )
    return [
        gate_block(name, kinds.get(name, ""), base.found(), base.unreadable, now.found())
        for name, base in record.base.items()
        for now in [landed.get(name, base)]
    ]


def gate_block(
    name: str, kind: str, base: list[Finding], unreadable: str, now: list[Finding]
) -> GateBlock:
    """One gate's counts: its findings on the base commit (``unreadable``: why none could be
    read, and then it judged nothing) against those on what landed. The night's result and
    the audit's recomputation both count with this."""
    return GateBlock(
        name=name,
        kind="format" if kind == "format" else "findings",
        base=len(base),
        landed=len(now),
        new=[] if unreadable else [f.text() for f in new_findings(base, now)],
        removed=0 if unreadable else len(removed_findings(base, now)),
        unreadable=unreadable,
    )


def tree_hashes(root: Path, files: list[str]) -> dict[str, str]:
    """The sha256 of each of ``files`` (relative to ``root``) that is a regular file: a
    format gate's findings are the files whose hash its formatter changed."""
    found: dict[str, str] = {}
    for rel in files:
        path = root / rel
        if path.is_symlink() or not path.is_file():
            continue
        try:
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            continue
    return found


def rewritten_files(files: list[str], before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The files a formatter changed, in the order of ``files``."""
    return [p for p in files if before.get(p) != after.get(p)]


def read_log(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
