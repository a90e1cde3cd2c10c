"""What a report shows: every fact of a finished night, derived once (by
``overnight.report.facts.report_facts``) for the Markdown and the HTML renderings to lay out.

Text fields are final: money, times, shares and scores are already formatted, and every string
from the run is as the run wrote it (each rendering escapes it for its medium). Numbers kept
beside them are the same facts as coordinates for the page's plots. A field marked
``PAGE_ONLY`` is a detail only the page adds (a whole hash, raw command output, a colour);
every other text field appears in both renderings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any, Literal

#: Metadata of a field the page shows and the Markdown leaves out.
PAGE_ONLY: Mapping[str, bool] = MappingProxyType({"page_only": True})

MarkKind = Literal["notice", "stop", "enforced", "refused"]


@dataclass(frozen=True)
class Pair:
    """A name and its value as text: a field of a sent alert, a purpose and its spend."""

    name: str
    value: str


@dataclass(frozen=True)
class AutomationLanded:
    """A verified task's landed changes to what runs by itself, the spec allowing them."""

    task: str
    paths: list[str]


@dataclass(frozen=True)
class GateRow:
    """One of the repository's own checks (``[[gates]]``), as the night judged by it."""

    name: str
    kind: Literal["findings", "format"] = field(metadata=PAGE_ONLY)
    """``findings``, or ``format`` (its findings are the files it would rewrite)."""
    said: str
    """Its counts in words: on the base commit, after the night's commits, new and removed;
    or that it judged nothing, its output on the base commit being unreadable."""
    unreadable: str
    """Why its output on the base commit could not be read; empty when it could."""
    new: list[str]
    """The findings of what landed that the base commit does not have, as many as are
    listed (none, for anything the harness landed)."""
    new_unlisted: int
    """The new findings left out of ``new`` (result.json lists them all)."""
    base: int
    landed: int
    removed: int


@dataclass(frozen=True)
class Headline:
    run_id: str
    ending: str
    stop_reason: str
    """The ending, qualified (``BUDGET_EXHAUSTED:money``); it starts with ``ending``."""
    status: str
    exit_code: int
    resumable: bool
    why: str
    """The result's message as a sentence."""
    alert: str = field(metadata=PAGE_ONLY)
    """The route this ending calls for: ``alert``, ``page`` or ``none`` (``alert_said`` names
    it)."""
    alert_said: str
    """What happened to the alert, as a sentence: which route, how it was sent, whether it
    worked, or why nothing was sent."""
    alerts_sent: list[list[Pair]]
    """What was sent when the run ended, one list of fields per alert."""
    banner: str | None
    """The warning of an unsandboxed night; None when the night ran sandboxed."""
    automation: list[AutomationLanded] = field(default_factory=list)
    """Landed changes to what runs by itself (``[predicate] allow_automation``), per task."""
    automation_said: str = ""
    """What they are, as a sentence; empty when none landed."""
    gates: list[GateRow] = field(default_factory=list)
    """The repository's own checks, in the spec's order; empty for a spec without gates."""
    gates_said: str = ""
    """What the gates are and what they held back, as a sentence; empty without gates."""


@dataclass(frozen=True)
class PredicateFacts:
    command: str
    state: str
    """``passed``, or ``not passed (exit N)``."""
    output: str = field(metadata=PAGE_ONLY)
    """What it printed; empty when that was only whitespace."""


@dataclass(frozen=True)
class GoalFacts:
    text: str
    sha256: str = field(metadata=PAGE_ONLY)
    """The first 16 hex digits of the goal's hash."""
    predicate: PredicateFacts | None = None


@dataclass(frozen=True)
class SummaryFacts:
    source: Literal["model", "structured"] = field(metadata=PAGE_ONLY)
    written_by: str
    """``written by the model`` or ``rendered from state``."""
    text: str
    error: str | None
    """Why the summary call failed; None when it did not fail."""


@dataclass(frozen=True)
class BudgetMark:
    """One line on a budget: where it sits, in the budget's unit and as a share of its limit."""

    kind: MarkKind
    amount: str
    share: str | None = field(metadata=PAGE_ONLY)
    """None when the budget has no limit above zero."""
    value: float


@dataclass(frozen=True)
class BudgetRow:
    key: str = field(metadata=PAGE_ONLY)
    """``cost_usd``, ``tokens``, ``steps`` or ``seconds``."""
    name: str
    """``money``, ``tokens``, ``steps`` or ``seconds``."""
    used: str
    limit: str | None
    """None when no limit is set."""
    share: str | None
    """Used as a share of the limit; None unless the limit is above zero."""
    no_model: bool
    """Money with a zero limit: a night without a model needs no money."""
    state: Literal["ok", "near", "over"] = field(metadata=PAGE_ONLY)
    """``over``: at its stop line or a call was refused; ``near``: past the notice line."""
    used_value: float
    limit_value: float | None
    marks: list[BudgetMark]
    """Notice (money only), stop, enforced and refused, those that are set, in that order."""

    def mark(self, kind: MarkKind) -> BudgetMark | None:
        return next((m for m in self.marks if m.kind == kind), None)


@dataclass(frozen=True)
class MoneyLineFacts:
    """A money line (see ``overnight.report.facts.MoneyLine``) in words."""

    name: str
    """``notice``, ``finish`` or ``limit``."""
    amount: str
    share: str
    reached: str
    """``not reached``, or ``reached at`` and the time."""
    fraction: float
    usd: float


@dataclass(frozen=True)
class CurvePoint:
    """The spend so far after one model call."""

    at: str
    spent: str
    seconds: float
    cost_usd: float


@dataclass(frozen=True)
class BillingWarning:
    kind: str
    """``usage_unknown``, ``over_reservation``...: the ``kind`` of the result's warning."""
    call: str
    """Which call: its purpose and attempt, as far as the journal said."""
    message: str


@dataclass(frozen=True)
class SpendFacts:
    total: str
    model_calls: int
    wrapup: str
    per_verified_task: str
    said: str
    """The total in one sentence, naming the closing summary's share of it (or that a night
    without a model spent nothing): the one total every output shows."""
    by_purpose: list[Pair]
    """Largest first."""
    lines: list[MoneyLineFacts]
    """Empty without a money limit above zero."""
    curve: list[CurvePoint]
    limit: float | None
    """The money limit, for the chart's scale."""
    warnings: list[BillingWarning] = field(default_factory=list)
    """Calls whose bill was not simply what they reported within what was reserved."""
    no_model: bool = False
    """A night without a model and without a money limit: nothing to gauge."""


@dataclass(frozen=True)
class VerifiedRow:
    id: str
    title: str
    commit: str = field(metadata=PAGE_ONLY)
    """The whole hash; empty when the task committed nothing."""
    short_commit: str
    """The hash's first 12 characters, or ``-``."""
    attempts: int
    via: str = field(metadata=PAGE_ONLY)
    """``lap`` or ``resume`` (``via_said`` says it in words)."""
    via_said: str
    """How it was verified, in words: right after it ran, or by a resumed run."""
    note: str
    """What its own command did when it did not simply exit 0; empty otherwise."""
    left_out: str = ""
    """Generated files its candidate left out (excluded, or tracked and dropped); empty when
    none."""


@dataclass(frozen=True)
class ParkedRow:
    id: str
    title: str
    reason: str
    verifier_said: str
    """What the verifier (or the check that parked it) said: its first sentence whole, then
    as much of its end as fits, cut at a boundary; empty when it said nothing."""
    verifier_output: str = field(metadata=PAGE_ONLY)
    """The whole output kept in the result; empty when ``verifier_said`` is."""
    patch: str | None
    protected_changes: list[str]
    left_out: str = ""
    """As for a verified task."""
    automation_changes: list[str] = field(default_factory=list)
    """Automation paths it changed that the spec does not allow (not committed)."""


@dataclass(frozen=True)
class PrunedRow:
    id: str
    title: str
    score: str
    after_tasks: int


@dataclass(frozen=True)
class TaskFacts:
    verified: list[VerifiedRow]
    parked: list[ParkedRow]
    pruned: list[PrunedRow]
    in_flight: str | None
    not_started: list[str]


@dataclass(frozen=True)
class EffectRow:
    state: str
    tool: str
    task: str
    key: str
    args: str
    answer: str | None
    """The provider's answer as text; None when there was none."""
    error: str | None


@dataclass(frozen=True)
class DriftRow:
    after_tasks: int
    at: str
    score: str
    action: str
    off_goal: str
    """The off-goal task ids, comma-separated; empty when none."""
    value: float
    automation_shown: str = ""
    """What the judge was shown of the automation paths the night's tasks changed; empty
    when none did."""


@dataclass(frozen=True)
class DriftFacts:
    rule: str
    """When drift prunes and when it halts, in one sentence."""
    prune_above: float
    halt_above: float
    checks: list[DriftRow]


@dataclass(frozen=True)
class WorkFacts:
    branch: str
    base_commit: str
    head: str | None = field(metadata=PAGE_ONLY)
    worktree: str
    worktree_kept: str
    """Whether the worktree is still there: kept for a resume, or removed when a night that
    cannot be resumed ended (its branch stays)."""
    diff_stat: str
    """Empty when the branch changed nothing."""
    sandbox: str
    """One sentence on how the night's commands were confined."""
    executor: list[str] = field(default_factory=list)
    """The CLI agent's attempts, its cost beside the harness's (none for other nights)."""


@dataclass(frozen=True)
class RunRecord:
    trace_ref: str
    started_at: str
    ended_at: str
    resumes: int
    trace_gap: str | None
    """The warning that the trace is incomplete; None when every line was written."""
    schema: str = field(metadata=PAGE_ONLY)


@dataclass(frozen=True)
class ReportFacts:
    headline: Headline
    goal: GoalFacts
    summary: SummaryFacts
    budgets: list[BudgetRow]
    """Money, tokens, steps, seconds."""
    spend: SpendFacts
    tasks: TaskFacts
    effects: list[EffectRow]
    drift: DriftFacts
    lessons: list[str]
    work: WorkFacts
    record: RunRecord

    @property
    def money(self) -> BudgetRow:
        return next(row for row in self.budgets if row.key == "cost_usd")


#: ``overnight report --json``: what the document is, and the version of its shape (raised
#: when a field is renamed or removed; a field added leaves it).
FACTS_KIND = "overnight-report-facts"
FACTS_VERSION = 1


def facts_document(facts: ReportFacts) -> dict[str, Any]:
    """Every fact of the report as plain values (``overnight report --json``): the view model's
    fields, nested as they are, under a ``kind`` and a ``version``."""
    return {"kind": FACTS_KIND, "version": FACTS_VERSION, **asdict(facts)}
