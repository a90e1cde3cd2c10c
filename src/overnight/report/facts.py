"""What a report shows beyond ``result.json``, and the facts both renderings derive from it.

Two things live outside the terminal result: the lessons the run learned (in its checkpoint)
and where the budget bands sit (in its spec). Both are read leniently: a report of a run whose
checkpoint or spec cannot be read is still a report, without them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from overnight.core.budget import BudgetFractions
from overnight.report.result import TerminalResult, VerifiedTask
from overnight.store.checkpoint import load_checkpoint


@dataclass(frozen=True)
class ReportExtras:
    lessons: list[str] = field(default_factory=list)
    """The run's lessons, oldest first; empty when the checkpoint cannot be read."""
    fractions: BudgetFractions = field(default_factory=BudgetFractions)
    """Where the bands sit, from the run's spec; the defaults when it cannot be read."""


def read_lessons(run_dir: Path) -> list[str]:
    try:
        body = load_checkpoint(run_dir / "checkpoint.json")
    except Exception:  # a corrupt or unreadable checkpoint: the report goes on without lessons
        return []
    lessons = body.get("lessons") if body else None
    if not isinstance(lessons, list):
        return []
    return [item for item in lessons if isinstance(item, str)]


def read_fractions(run_dir: Path) -> BudgetFractions:
    try:
        budget = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))["budget"]
        return BudgetFractions(
            notice_at=float(budget["notice_at"]),
            finish_at=float(budget["finish_at"]),
            enforce_at=float(budget["enforce_at"]),
        )
    except Exception:  # no spec, or one from another version: the default bands
        return BudgetFractions()


def read_extras(run_dir: Path) -> ReportExtras:
    return ReportExtras(lessons=read_lessons(run_dir), fractions=read_fractions(run_dir))


@dataclass(frozen=True)
class MoneyLine:
    """One horizontal line of the money budget and when the spend first reached it."""

    name: str
    """``notice`` (the agent is told), ``finish`` (no new task), ``limit`` (crossed by nothing)."""
    fraction: float
    usd: float
    reached_at: float | None
    """Seconds into the run of the first call whose cumulative spend reached the line."""


def money_lines(r: TerminalResult, fractions: BudgetFractions) -> list[MoneyLine]:
    """The 70/90/100% lines (as the run's spec placed them); none without a positive limit."""
    money = r.budgets.cost_usd
    limit = money.limit
    if limit is None or limit <= 0:
        return []
    finish = money.stop_at if money.stop_at is not None else limit * fractions.finish_at
    placed = (
        ("notice", fractions.notice_at, limit * fractions.notice_at),
        ("finish", finish / limit, finish),
        ("limit", 1.0, limit),
    )
    lines: list[MoneyLine] = []
    for name, fraction, usd in placed:
        reached = next((p.seconds for p in r.spend.curve if p.cost_usd >= usd - 1e-12), None)
        lines.append(MoneyLine(name, fraction, usd, reached))
    return lines


def fmt_usd(value: float) -> str:
    """Cents when they say it all, four decimals when the amount is small or finer."""
    if abs(value - round(value, 2)) < 1e-9:
        return f"${value:,.2f}"
    return f"${value:,.4f}"


def fmt_seconds(value: float) -> str:
    if value < 60:
        return f"{value:.1f}s"
    whole = round(value)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def fmt_amount(name: str, value: float) -> str:
    """A budget amount in its own unit: dollars, tokens, steps or wall-clock time."""
    if name == "cost_usd":
        return fmt_usd(value)
    if name == "seconds":
        return fmt_seconds(value)
    return f"{value:,.0f}"


def sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text.endswith((".", "!", "?")) else f"{text}."


UNSANDBOXED_BANNER = (
    'Unsandboxed night: [sandbox] mode = "off". Commands the model wrote or influenced ran '
    "with your user's access to this machine, its files and its network; the verdict is only "
    "as good as the model's restraint."
)


def sandbox_banner(r: TerminalResult) -> str | None:
    """The warning a report opens with when the night ran without its sandbox."""
    return UNSANDBOXED_BANNER if r.sandbox is not None and r.sandbox.mode == "off" else None


def sandbox_line(r: TerminalResult) -> str:
    """One sentence on how the night's commands were confined."""
    sb = r.sandbox
    if sb is None:
        return "Sandbox: not recorded (a result from before the sandbox existed)."
    network = "with the network" if sb.network else "without network"
    return (
        f'Sandbox: mode "{sb.mode}", {network}; {sb.sandboxed_commands} command(s) ran '
        f"sandboxed, {sb.unsandboxed_commands} as written."
    )


def command_note(v: VerifiedTask) -> str:
    """What a verified command task's own command did, when it did not simply exit 0."""
    if v.command_timed_out:
        return "its command timed out"
    if v.command_exit_code not in (None, 0):
        return f"its command exited {v.command_exit_code}"
    return ""
