"""The gates, recomputed: every run ``gates.json`` keeps (each gate on the base commit, and on
each commit that landed) read again from the raw artifact the night read it from, with the
gate's reader from ``spec.json`` (``GateSpec.reads_with``) and the exit code the night
recorded (or, for a run recorded without one, the trace's): the command's output log for a
findings gate, the list of files its formatter rewrote for a format gate. What is read must
be what ``gates.json`` keeps; nothing that landed may add a finding the base commit does not
have; and the counts ``result.json`` carries per gate (base, landed, new, removed) are
recomputed from what was read, on the last commit that landed, as the night counts them
(``overnight.night.gates.gate_counts``).

A finding's text is relative to the checkout the gate ran in, ``RUN_DIR/checkout``: the
checkout of the run directory as it is now, or of the one the result says the night ran in,
when the run was moved or copied since (which only changes how paths are written, never how
many findings there are). A night without gates (no ``[[gates]]``, no ``gates.json``, none in
the result) has no check here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overnight.audit.findings import AuditCheck, check
from overnight.audit.inputs import RunFiles
from overnight.config.gates import GateSpec
from overnight.gates.readers import (
    Finding,
    FindingsUnreadable,
    new_findings,
    read_findings,
)
from overnight.night.gates import format_finding, gate_block, read_log
from overnight.store.gate_record import FoundRow, GateRun, GatesRecord, read_gates

#: The most findings a detail names one by one.
NAMED = 3
#: Where in ``gates.json`` the base commit's runs are.
BASE = "base"


@dataclass
class Reread:
    """One gate run read again from its raw artifact."""

    found: list[Finding]
    """What the artifact backs; the kept findings when there is no artifact to read."""
    unreadable: str
    problems: list[str] = field(default_factory=list)


def landed_commits(files: RunFiles) -> list[str]:
    """The commits the checkpoint landed, in order."""
    return [c.commit for c in files.state.completed if c.commit]


def checkout_roots(files: RunFiles) -> list[str]:
    """Where the night's checkout may have been: the run directory's as it is now, then the
    one the result says the night ran in."""
    here = files.run_dir.checkout.absolute()
    there = (files.result.run_dir / "checkout").absolute()
    return list(dict.fromkeys([str(here), str(there)]))


def traced_exits(trace: list[dict[str, Any]], gate: str, commit: str) -> set[int | None]:
    """The exit codes the trace gives for ``gate``'s runs on ``commit``."""
    return {
        rec.get("exit_code")
        for rec in trace
        if rec.get("kind") == "tool_call"
        and rec.get("tool") == "gate"
        and rec.get("gate") == gate
        and rec.get("commit") == commit[:12]
    }


def exit_code_of(files: RunFiles, run: GateRun, problems: list[str]) -> int | None:
    """The exit code ``run``'s output is read with: the one ``gates.json`` records, else the
    one the trace gives (a run recorded before exit codes were); None when it did not finish
    or neither says."""
    traced = traced_exits(files.trace, run.gate, run.commit)
    if run.exit_code is not None:
        if traced and run.exit_code not in traced:
            said = ", ".join(sorted(map(str, traced)))
            problems.append(f"gates.json says it exited {run.exit_code}, the trace {said}")
        return run.exit_code
    codes = {code for code in traced if isinstance(code, int)}
    return codes.pop() if len(codes) == 1 and None not in traced else None


def _named(found: list[Finding]) -> str:
    shown = "; ".join(f.text() for f in found[:NAMED])
    return shown + (f" and {len(found) - NAMED} more" if len(found) > NAMED else "")


def compare(kept: GateRun, found: list[Finding], why: str, raw: str, problems: list[str]) -> None:
    """What the artifact ``raw`` gave (``found``, or why it cannot be read) against what
    ``gates.json`` keeps of the run."""
    if why != kept.unreadable:
        if not kept.unreadable:
            problems.append(f"{raw} cannot be read ({why}), gates.json keeps findings read from it")
        elif not why:
            problems.append(
                f"gates.json says its output could not be read ({kept.unreadable}), "
                f"{raw} reads as {len(found)} finding(s)"
            )
        else:
            problems.append(f"{raw} cannot be read ({why}), gates.json says ({kept.unreadable})")
    rows = [FoundRow.of(f) for f in found]
    if rows == kept.findings:
        return
    read_only = new_findings(kept.found(), found)
    kept_only = new_findings(found, kept.found())
    said = f"gates.json keeps {len(kept.findings)} finding(s), {raw} has {len(found)}"
    if read_only:
        said += f"; not kept: {_named(read_only)}"
    if kept_only:
        said += f"; not in {raw}: {_named(kept_only)}"
    if not read_only and not kept_only:
        said += " (the same findings, at other lines or in another order)"
    problems.append(said)


def reread(files: RunFiles, gate: GateSpec, run: GateRun, root: str) -> Reread:
    """``run`` read again from its raw artifact, as the night read it in ``root``."""
    problems: list[str] = []
    exit_code = exit_code_of(files, run, problems)
    if run.raw is None:
        if not run.unreadable:
            problems.append("gates.json names no raw artifact its findings were read from")
        elif run.findings:
            problems.append(f"gates.json keeps {len(run.findings)} finding(s) of an unread run")
        elif gate.kind == "format" and exit_code == 0:
            problems.append("its formatter exited 0, yet gates.json keeps no rewritten files")
        return Reread(run.found(), run.unreadable, problems)
    if Path(run.raw).name != run.raw or run.raw in ("", ".", ".."):
        problems.append(f"gates.json names {run.raw!r} as its raw artifact, not a file's name")
        return Reread(run.found(), run.unreadable, problems)
    raw = f"artifacts/{run.raw}"
    path = files.run_dir.artifacts / run.raw
    if not path.is_file():
        problems.append(f"its raw artifact {raw} is missing")
        return Reread(run.found(), run.unreadable, problems)
    if exit_code is None:
        if run.unreadable and not run.findings:  # it did not finish: nothing to read
            return Reread([], run.unreadable, problems)
        problems.append(f"no exit code is recorded for it (gates.json, the trace): {raw} unread")
        return Reread(run.found(), run.unreadable, problems)
    if gate.kind == "format":
        if exit_code != 0:
            problems.append(f"its formatter exited {exit_code}, yet it kept {raw}")
        found = [format_finding(gate.name, p) for p in read_log(path).splitlines() if p]
        compare(run, found, "", raw, problems)
        return Reread(found, "", problems)
    why = ""
    try:
        found = read_findings(gate.reads_with(), read_log(path), exit_code, root)
    except FindingsUnreadable as exc:
        found, why = [], str(exc)[:1000]
    compare(run, found, why, raw, problems)
    return Reread(found, why, problems)


Rereads = dict[tuple[str, str], Reread]
"""``(BASE or a landed commit, gate) -> the run read again``."""


def reread_all(files: RunFiles, record: GatesRecord, specs: dict[str, GateSpec]) -> Rereads:
    """Every run of the record of a gate of the spec read again, each in the first of
    ``checkout_roots`` that backs it, those that back more runs first (a run none backs is
    read in the one that backs the most, as the night's other runs were)."""
    runs = [(BASE, name, run) for name, run in record.base.items()]
    runs += [(c, name, run) for c, by in record.landed.items() for name, run in by.items()]
    tried = [
        {
            (at, name): reread(files, specs[name], run, root)
            for at, name, run in runs
            if name in specs
        }
        for root in checkout_roots(files)
    ]
    tried.sort(key=lambda found: sum(not r.problems for r in found.values()), reverse=True)
    best = tried[0]
    return {
        key: next((found[key] for found in tried if not found[key].problems), best[key])
        for key in best
    }


def record_check(files: RunFiles, record: GatesRecord, specs: dict[str, GateSpec]) -> AuditCheck:
    """``gates.json`` as a whole: of this run's base commit, of the spec's gates, of the
    commits that landed; and the gates ``result.json`` counts."""
    problems: list[str] = []
    base = files.state.base_commit
    if record.base_commit != base:
        problems.append(f"gates.json is of the base {record.base_commit[:12]}, not {base[:12]}")
    if sorted(record.base) != sorted(specs):
        problems.append(
            f"gates.json ran {', '.join(sorted(record.base)) or 'no gate'} on the base, "
            f"the spec has {', '.join(sorted(specs)) or 'none'}"
        )
    landed = landed_commits(files)
    for commit, runs in record.landed.items():
        if commit not in landed:
            problems.append(
                f"gates.json keeps runs on {commit[:12]}, which the checkpoint never landed"
            )
        if sorted(runs) != sorted(record.base):
            problems.append(
                f"on {commit[:12]} gates.json ran {', '.join(sorted(runs)) or 'no gate'}"
            )
    for at, runs in [(BASE, record.base), *record.landed.items()]:
        for name, run in runs.items():
            if run.gate != name or run.commit != (base if at == BASE else at):
                problems.append(
                    f"gates.json files the run of {run.gate} on {run.commit[:12]} wrongly"
                )
    claimed = [g.name for g in files.result.gates]
    if sorted(claimed) != sorted(record.base):
        problems.append(
            f"result.json counts {', '.join(claimed) or 'no gate'}, gates.json ran "
            f"{', '.join(sorted(record.base)) or 'none'}"
        )
    unjudged = [c for c in landed if c not in record.landed]
    detail = (
        f"gates.json: {len(record.base)} gate(s) on the base {record.base_commit[:12]}, "
        f"the runs on {len(record.landed)} landed commit(s)"
    )
    if unjudged:  # a resume that found the commit landed by the process that died
        detail += f" ({len(unjudged)} landed commit(s) without runs kept)"
    return check("gates", "gates", not problems, "; ".join([detail, *problems]))


def last_landed(files: RunFiles, record: GatesRecord) -> str | None:
    """The last commit that landed with its gates' runs kept (the runs the result counts)."""
    kept = [c for c in landed_commits(files) if c in record.landed]
    if kept:
        return kept[-1]
    return list(record.landed)[-1] if record.landed else None


def gate_check(
    files: RunFiles, record: GatesRecord, name: str, spec: GateSpec | None, found: Rereads
) -> AuditCheck:
    """One gate: its runs against their raw artifacts, what landed against the base, and the
    counts ``result.json`` carries for it."""
    label = f"gate {name}"
    if spec is None:
        return check(label, "gates", False, "not a gate of spec.json: its output cannot be read")
    base = found[(BASE, name)]
    problems = [f"on the base: {p}" for p in base.problems]
    for commit in record.landed:
        now = found.get((commit, name))
        if now is None:
            continue
        problems += [f"on {commit[:12]}: {p}" for p in now.problems]
        if base.unreadable:
            continue
        if now.unreadable:
            problems.append(f"{commit[:12]} landed, its output unread: {now.unreadable}")
        added = new_findings(base.found, now.found)
        if added:
            problems.append(
                f"{commit[:12]} landed with {len(added)} finding(s) the base commit does not "
                f"have: {_named(added)}"
            )
    head = last_landed(files, record)
    now = found.get((head, name), base) if head is not None else base
    ours = gate_block(name, spec.kind, base.found, base.unreadable, now.found)
    claimed = [g for g in files.result.gates if g.name == name]
    if not claimed:
        problems.append("result.json carries no counts for it")
    for block in claimed[:1]:
        for key, value in ours.model_dump(exclude={"name"}).items():
            theirs = getattr(block, key)
            if theirs != value:
                problems.append(f"result.json's {key} is {theirs!r}, recomputed {value!r}")
    detail = (
        f"format gate: {len(base.found)} rewritten file(s) on the base"
        if spec.kind == "format"
        else f"findings gate, read with {spec.reads_with()}: {len(base.found)} on the base"
    )
    if base.unreadable:
        detail += " (unreadable: it judged nothing)"
    detail += f", {len(now.found)} on {head[:12]}" if head is not None else ", nothing landed"
    detail += f"; {len(ours.new)} new, {ours.removed} removed"
    return check(label, "gates", not problems, "; ".join([detail, *problems]))


def gate_checks(files: RunFiles) -> list[AuditCheck]:
    """The ``gates`` check and one ``gate NAME`` check per gate; none for a night without
    gates."""
    specs = {g.name: g for g in files.spec.gates}
    path = files.run_dir.gates
    if not specs and not files.result.gates and not path.exists():
        return []
    try:
        record = read_gates(path)
    except (OSError, ValueError) as exc:  # unreadable JSON, or not a gates record
        return [check("gates", "gates", False, f"gates.json cannot be read: {exc}")]
    if record is None:
        return [unrecorded_check(files, specs)]
    found = reread_all(files, record, specs)
    checks = [record_check(files, record, specs)]
    names = [n for n in specs if n in record.base] + sorted(set(record.base) - set(specs))
    checks += [gate_check(files, record, n, specs.get(n), found) for n in names]
    return checks


def unrecorded_check(files: RunFiles, specs: dict[str, GateSpec]) -> AuditCheck:
    """No ``gates.json``: no gate ran (the night ended before any candidate was judged), so
    nothing landed and the result counts no gate."""
    problems: list[str] = []
    if files.result.gates:
        named = ", ".join(g.name for g in files.result.gates)
        problems.append(f"result.json counts {named}, with no gates.json to back the counts")
    landed = landed_commits(files)
    if specs and landed:
        problems.append(f"{len(landed)} commit(s) landed with no gate run kept for any")
    detail = f"no gates.json: none of the {len(specs)} gate(s) ran"
    return check("gates", "gates", not problems, "; ".join([detail, *problems]))
