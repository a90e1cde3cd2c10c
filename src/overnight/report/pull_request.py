"""The pull request a night proposes: a title and a Markdown body from its terminal result.

The body lays out the report's facts (``overnight.report.facts``), each verified task's verify
command, the gates' counts as the report words them, and what an audit of the run's records
found. As in the report, nothing the model or its commands wrote is markup: titles, reasons,
verifier output, gate findings, verify commands it planned and its summary are code spans or
fenced blocks (``overnight.core.text``), so that a summary cannot add a heading, a link, a
table or HTML to the page a reviewer reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from overnight.core.text import ELLIPSIS, md_code, md_escape, md_fence, one_line, printable
from overnight.report.facts import fmt_share, fmt_usd, report_facts
from overnight.report.markdown import gate_lines
from overnight.report.view import ParkedRow, VerifiedRow
from overnight.store.result import TerminalResult

#: Tasks listed one by one in each section; the others are counted. GitHub refuses a body of
#: more than 65,536 characters, and a reviewer reads the first few dozen anyway.
LISTED = 50
#: Characters of the closing summary shown (result.json keeps it whole).
SUMMARY_SHOWN = 6000
#: Characters of the goal in the title.
TITLE_GOAL = 60


@dataclass(frozen=True)
class AuditFound:
    """What an audit of the run's records found, as the body tells it (the caller audits)."""

    checks: int
    """How many checks the audit made."""
    disagreements: tuple[str, ...]
    """The names of the checks that disagree, in order."""
    rerun: bool
    """Whether each verified task's verify was run again."""

    @property
    def agrees(self) -> bool:
        return not self.disagreements


@dataclass(frozen=True)
class AuditSaid:
    """What became of the audit of the run's records: what it found, or why there is none."""

    audit: AuditFound | None
    why_not: str = ""


def pr_title(r: TerminalResult) -> str:
    """``overnight: <goal, clipped> (<stop reason>)``, one line."""
    goal = one_line(r.goal.text)
    if len(goal) > TITLE_GOAL:
        cut = goal[: TITLE_GOAL - 1]
        if " " in cut:
            cut = cut.rsplit(" ", 1)[0]
        goal = cut.rstrip(" ,.;:") + ELLIPSIS
    return f"overnight: {goal} ({one_line(r.stop_reason)})"


def _verified(v: VerifiedRow, verify: str | None) -> list[str]:
    landed = f"commit {md_code(v.commit)}" if v.commit else "verified, nothing to commit"
    verdict = v.note or "its verify passed, each test reported passed by the harness's reporter"
    lines = [f"- {md_code(v.id)} {md_code(v.title)}: {landed}"]
    lines.append(f"  - verify: {md_code(verify) if verify else 'not recorded'}")
    lines.append(f"  - verdict: {md_escape(verdict)}; {v.attempts} attempt(s), {v.via_said}")
    if v.left_out:
        lines.append(f"  - generated files left out: {md_code(v.left_out)}")
    return lines


def _parked(p: ParkedRow) -> list[str]:
    lines = [f"- {md_code(p.id)} {md_code(p.title)}: {md_code(p.reason)}"]
    if p.protected_changes:
        changed = ", ".join(md_code(path) for path in p.protected_changes)
        lines.append(f"  - protected paths it changed (not committed): {changed}")
    if p.verifier_said:
        who = "the protection check" if p.protected_changes else "the verifier"
        lines.append(f"  - {who} said: {md_code(p.verifier_said)}")
    return lines


def _more(count: int, run_id: str) -> list[str]:
    if count <= LISTED:
        return []
    return [f"- and {count - LISTED} more: {md_code(f'overnight report {run_id}')}"]


def _spend(r: TerminalResult, said: str, no_model: bool) -> str:
    if no_model:
        return f"Money: {said}."
    money = r.budgets.cost_usd
    if money.limit is None or money.limit <= 0:
        against = f"{fmt_usd(money.used)} used, no money limit"
    else:
        share = fmt_share(money.used / money.limit)
        against = f"{fmt_usd(money.used)} of the {fmt_usd(money.limit)} cap ({share})"
    return f"Money: {against}; {said}."


def _audit(said: AuditSaid, run_id: str) -> str:
    again = md_code(f"overnight audit {run_id}")
    audit = said.audit
    if audit is None:
        why = f" ({md_escape(said.why_not)})" if said.why_not else ""
        return f"Not audited{why}: run {again}."
    if audit.agrees:
        head = f"All {audit.checks} checks agree"
    else:
        names = ", ".join(md_code(name) for name in audit.disagreements)
        head = f"**{len(audit.disagreements)} of {audit.checks} checks DISAGREE** ({names})"
    text = (
        f"{head}: the stop reason, budgets, money, branch, commits and effects recomputed "
        "from the run's raw files and the repository, without trusting result.json."
    )
    if not audit.rerun:
        text += f" The verify commands were not run again here; {again} runs them."
    return text


def pr_body(r: TerminalResult, verifies: Mapping[str, str], audit: AuditSaid) -> str:
    """The body; ``verifies`` maps a verified task's id to its verify command."""
    f = report_facts(r)
    h, t, w = f.headline, f.tasks, f.work
    out: list[str] = []
    out.append(f"Proposed by `overnight` from run {md_code(r.run_id)}.")
    out.append("")
    out.append(
        f"**{h.stop_reason}**: exit {h.exit_code} ({h.status}), "
        f"{'resumable' if h.resumable else 'not resumable'}. {md_escape(h.why)}"
    )
    out.append("")
    out.append(f"Goal: {md_escape(f.goal.text)}")
    out.append("")
    if h.automation:  # code that runs by itself on push, checkout or opening: first
        out.append("### Changes to what runs by itself (allowed by the spec)")
        out.append("")
        for landed in h.automation:
            paths = ", ".join(md_code(path) for path in landed.paths)
            out.append(f"- {md_code(landed.task)}: {paths}")
        out.append("")
    if h.gates:  # whether the change passes the repository's own checks: before the tasks
        out.append("### Gates")
        out.append("")
        out.append(h.gates_said)
        out.append("")
        out.extend(gate_lines(h.gates))
        out.append("")
    out.append(f"### Verified tasks ({len(t.verified)})")
    out.append("")
    for v in t.verified[:LISTED]:
        out.extend(_verified(v, verifies.get(v.id)))
    out.extend(_more(len(t.verified), r.run_id))
    out.append("")
    out.append(f"### Parked tasks ({len(t.parked)})")
    out.append("")
    for p in t.parked[:LISTED]:
        out.extend(_parked(p))
    out.extend(_more(len(t.parked), r.run_id))
    if not t.parked:
        out.append("- none")
    out.append("")
    out.append("### Spend")
    out.append("")
    out.append(_spend(r, f.spend.said, f.spend.no_model))
    out.append("")
    out.append("### Audit")
    out.append("")
    out.append(_audit(audit, r.run_id))
    out.append("")
    out.append("### Branch")
    out.append("")
    head = f", head {md_code(r.branch.head)}" if r.branch.head else ""
    out.append(
        f"Branch {md_code(w.branch)} from base commit {md_code(r.branch.base_commit)}{head}."
    )
    if w.diff_stat:
        out.append("")
        out.append(md_fence(w.diff_stat, info=""))
    out.append("")
    out.append(f"### Summary ({f.summary.written_by})")
    out.append("")
    summary = f.summary.text
    if len(summary) > SUMMARY_SHOWN:
        summary = f"{summary[:SUMMARY_SHOWN]}\n{ELLIPSIS} (the whole summary is in result.json)"
    out.append(md_fence(summary))
    return printable("\n".join(out)) + "\n"
