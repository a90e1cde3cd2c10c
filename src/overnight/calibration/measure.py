"""Calibrate the drift judge against hand-labelled queues before trusting its thresholds.

The judge is asked exactly what a run asks it (``drift_request``, the production prompt and
tool), its answers are read exactly as a run reads them (``ask_structured`` with
``DriftVerdict``: an invalid verdict is asked for again once), and each verdict is put in its
band by ``drift_gate`` itself. What comes back is compared with the labels.

Agreement, per queue:

- an **aligned** queue agrees when its score is at or below the prune line (``score <= 0.3``:
  the gate does nothing);
- a **drifted** queue agrees when its score is above the prune line (``score > 0.3``: the gate
  at least prunes) and, when the labels name off-goal tasks, the judge's off-goal ids include
  at least one of them (a prune that removes only the wrong tasks is not a catch);
- a queue with no readable verdict (invalid twice), or not judged at all (the money cap or a
  provider failure stopped the calibration), does not agree.

Separation is about scores only: the sets separate when the highest aligned score is below
the lowest drifted score; then every threshold ``t`` with ``max_aligned <= t < min_drifted``
(the gate's ``>`` is strict) puts every aligned queue at or below it and every drifted queue
above it. The prune line is trusted only when it is one of those thresholds and every queue
has a verdict. When it is not, the report says so in plain words and suggests the lower
threshold that would separate the sets, if there is one.

Every call goes through a ``Ledger`` with the model's price: its worst case is reserved first
and a call that would cross the cap is refused; the calibration then stops and reports how many
queues were judged and what was spent.

The statistics (``agrees``, ``confusion_matrix``, ``distribution``, ``separation``,
``suggest_threshold``, ``severity_order``, ``summarize``) are pure functions of the results.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from overnight.calibration.queues import LABELS, CalibrationSet, Label, LabelledQueue, load_queues
from overnight.core.budget import BudgetFractions, Ledger
from overnight.core.drift import DRIFT_PRUNE_ABOVE, DriftVerdict, drift_gate
from overnight.core.endings import DRIFT_HALT_ABOVE
from overnight.core.errors import (
    BudgetRefused,
    ConfigError,
    InvalidModelOutput,
    RunError,
)
from overnight.models.gateway import KeptRecords, ModelGateway, NoEvents
from overnight.models.seam import ModelClient
from overnight.models.structured import ask_structured
from overnight.models.types import ModelRequest, ModelResponse
from overnight.night.prompts import DRIFT_TOOL, drift_request

Band = Literal["none", "prune", "halt"]
BANDS: tuple[Band, ...] = ("none", "prune", "halt")
Status = Literal["judged", "unreadable", "not_judged"]

#: The default money cap of one calibration, in dollars.
DEFAULT_CAP_USD = 2.0

#: Exit codes: the prune line separates the sets / it does not (or was not fully measured) /
#: the provider failed and the calibration stopped.
EXIT_SEPARATES = 0
EXIT_NOT_SEPARATED = 3
EXIT_MODEL_FAILED = 4


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Thresholds(_Model):
    """The gate's lines (both strict): above ``prune_above`` prune, above ``halt_above`` halt."""

    prune_above: float = DRIFT_PRUNE_ABOVE
    halt_above: float = DRIFT_HALT_ABOVE


CONFIGURED = Thresholds()


class QueueResult(_Model):
    """One labelled queue and what the judge said about it."""

    id: str
    label: Label
    severity: float
    expected_off_goal: list[str] = Field(default_factory=list)
    status: Status = "judged"
    score: float | None = None
    band: Band | None = None
    off_goal: list[str] = Field(default_factory=list)
    """The judge's off-goal task ids."""
    agrees: bool = False
    calls: int = 0
    """Calls made for this queue: 1, or 2 when the first verdict was invalid."""
    reasoning: str = ""
    error: str | None = None


class Agreement(_Model):
    agree: int
    judged: int
    """Queues of this label with a readable verdict."""
    total: int


class Distribution(_Model):
    n: int
    min: float | None
    median: float | None
    max: float | None
    scores: list[float]
    """Sorted, lowest first."""


class Separation(_Model):
    separable: bool
    """The highest aligned score is below the lowest drifted score."""
    max_aligned: float | None
    min_drifted: float | None
    window: tuple[float, float] | None
    """Every threshold ``t`` with ``window[0] <= t < window[1]`` separates the sets."""
    at_prune: bool
    at_halt: bool
    suggested_threshold: float | None
    """A threshold inside the window, when the configured prune line is not."""
    direction: Literal["lower", "higher"] | None
    """Where ``suggested_threshold`` lies relative to the prune line."""


class Stopped(_Model):
    reason: Literal["money_cap", "model_error"]
    detail: str


class CalibrationReport(_Model):
    model: str
    thresholds: Thresholds
    queues_total: int
    queues_judged: int
    """Queues with a readable verdict."""
    unreadable: int
    """Queues whose verdict was invalid twice."""
    calls: int
    retries: int
    """Second calls made because the first verdict failed its schema."""
    spend_usd: float
    cap_usd: float
    tokens: int
    stopped: Stopped | None
    results: list[QueueResult]
    agreement: dict[str, Agreement]
    """Per label, and ``all``."""
    confusion: dict[str, dict[str, int]]
    """Label -> band -> count, over the queues with a verdict."""
    distributions: dict[str, Distribution]
    separation: Separation
    severity_order: float | None
    """Of the pairs of drifted queues with different severities, the share whose scores are
    ordered the same way (ties in score count against); None with fewer than two."""
    trusted: bool
    """Every queue has a verdict and the prune line separates the sets."""
    statements: list[str]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def exit_code(self) -> int:
        """0: trusted; 3: not separated or not fully measured; 4: the provider failed."""
        if self.trusted:
            return EXIT_SEPARATES
        if self.stopped is not None and self.stopped.reason == "model_error":
            return EXIT_MODEL_FAILED
        return EXIT_NOT_SEPARATED


# -- pure statistics ----------------------------------------------------------------------


def band_of(score: float, thresholds: Thresholds = CONFIGURED) -> Band:
    """The gate's band for ``score``; both lines strict, as in ``drift_gate``."""
    if score > thresholds.halt_above:
        return "halt"
    if score > thresholds.prune_above:
        return "prune"
    return "none"


def agrees(
    label: Label,
    score: float | None,
    off_goal: Sequence[str],
    expected_off_goal: Sequence[str],
    prune_above: float = DRIFT_PRUNE_ABOVE,
) -> bool:
    """Whether a verdict agrees with its label (see the module docstring)."""
    if score is None:
        return False
    if label == "aligned":
        return score <= prune_above
    if score <= prune_above:
        return False
    return not expected_off_goal or bool(set(off_goal) & set(expected_off_goal))


def agreement(results: Sequence[QueueResult]) -> dict[str, Agreement]:
    out: dict[str, Agreement] = {}
    for key in (*LABELS, "all"):
        rows = [r for r in results if key == "all" or r.label == key]
        out[key] = Agreement(
            agree=sum(r.agrees for r in rows),
            judged=sum(r.score is not None for r in rows),
            total=len(rows),
        )
    return out


def confusion_matrix(
    results: Sequence[QueueResult], thresholds: Thresholds = CONFIGURED
) -> dict[str, dict[str, int]]:
    """Label x band counts over the results that have a score."""
    matrix: dict[str, dict[str, int]] = {label: dict.fromkeys(BANDS, 0) for label in LABELS}
    for r in results:
        if r.score is not None:
            matrix[r.label][band_of(r.score, thresholds)] += 1
    return matrix


def distribution(scores: Sequence[float]) -> Distribution:
    ordered = sorted(scores)
    if not ordered:
        return Distribution(n=0, min=None, median=None, max=None, scores=[])
    return Distribution(
        n=len(ordered),
        min=ordered[0],
        median=statistics.median(ordered),
        max=ordered[-1],
        scores=ordered,
    )


def scores_of(results: Sequence[QueueResult], label: Label) -> list[float]:
    return [r.score for r in results if r.label == label and r.score is not None]


def suggest_threshold(max_aligned: float, min_drifted: float) -> float | None:
    """A round threshold ``t`` with ``max_aligned <= t < min_drifted`` (about the middle of
    the window, rounded down to two decimals), or None when no threshold separates."""
    if not max_aligned < min_drifted:
        return None
    middle = (max_aligned + min_drifted) / 2
    t = math.floor(round(middle * 100, 6)) / 100
    return t if max_aligned <= t < min_drifted else max_aligned


def separation(
    aligned: Sequence[float], drifted: Sequence[float], thresholds: Thresholds = CONFIGURED
) -> Separation:
    """Whether thresholds exist that put every aligned score at or below them and every
    drifted score above them, and whether the configured lines are among them."""
    if not aligned or not drifted:
        return Separation(
            separable=False,
            max_aligned=max(aligned, default=None),
            min_drifted=min(drifted, default=None),
            window=None,
            at_prune=False,
            at_halt=False,
            suggested_threshold=None,
            direction=None,
        )
    hi_a, lo_d = max(aligned), min(drifted)
    separable = hi_a < lo_d

    def separates(t: float) -> bool:
        return separable and hi_a <= t < lo_d

    at_prune = separates(thresholds.prune_above)
    suggested = None if at_prune else suggest_threshold(hi_a, lo_d)
    direction: Literal["lower", "higher"] | None = None
    if suggested is not None:
        direction = "lower" if suggested < thresholds.prune_above else "higher"
    return Separation(
        separable=separable,
        max_aligned=hi_a,
        min_drifted=lo_d,
        window=(hi_a, lo_d) if separable else None,
        at_prune=at_prune,
        at_halt=separates(thresholds.halt_above),
        suggested_threshold=suggested,
        direction=direction,
    )


def severity_order(results: Sequence[QueueResult]) -> float | None:
    rows = [(r.severity, r.score) for r in results if r.label == "drifted" and r.score is not None]
    concordant = pairs = 0
    for i, (sev_i, score_i) in enumerate(rows):
        for sev_j, score_j in rows[i + 1 :]:
            if sev_i == sev_j:
                continue
            pairs += 1
            concordant += (sev_i - sev_j) * (score_i - score_j) > 0
    return concordant / pairs if pairs else None


def _fmt(x: float | None) -> str:
    """A score as given (up to four significant digits), so a window's edges are exact."""
    return "-" if x is None else f"{x:.4g}"


def _statements(
    results: Sequence[QueueResult],
    sep: Separation,
    thresholds: Thresholds,
    stopped: Stopped | None,
    unreadable: int,
) -> tuple[bool, list[str]]:
    out: list[str] = []
    total = len(results)
    judged = sum(r.score is not None for r in results)
    complete = judged == total
    line = f"{thresholds.prune_above:g}"
    if stopped is not None:
        why = "a model call failed"
        if stopped.reason == "money_cap":
            why = "the money cap refused the next call"
        out.append(f"stopped after {judged} of {total} queues judged: {why} ({stopped.detail})")
    if unreadable:
        out.append(
            f"{unreadable} verdict(s) failed the schema twice; a run would end on such an answer"
        )
    named_none = [
        r.id
        for r in results
        if r.label == "drifted"
        and r.score is not None
        and r.score > thresholds.prune_above
        and r.expected_off_goal
        and not set(r.off_goal) & set(r.expected_off_goal)
    ]
    if named_none:
        out.append(
            f"{len(named_none)} drifted queue(s) scored above {line} but named none of the "
            "expected off-goal tasks, so a prune would shed the wrong work: "
            + ", ".join(named_none)
        )
    trusted = complete and sep.at_prune
    if trusted:
        out.append(
            f"the judge separates the sets at {line}: every aligned score is at or below it "
            "and every drifted score above it"
        )
        return trusted, out
    if sep.at_prune:
        out.append(
            f"the queues judged separate at {line}, but {total - judged} of {total} have no "
            "verdict; the prune line is not measured, do not trust it yet"
        )
        return trusted, out
    if sep.max_aligned is None or sep.min_drifted is None:
        out.append("a labelled set has no verdict at all; the prune line is not measured")
        return trusted, out
    out.append(f"the judge cannot tell these sets apart at {line}; do not trust the prune line")
    scores = f"highest aligned {_fmt(sep.max_aligned)}, lowest drifted {_fmt(sep.min_drifted)}"
    if sep.suggested_threshold is None:
        out.append(f"no threshold separates them ({scores}); no lower threshold exists")
    elif sep.direction == "lower":
        out.append(
            f"a prune line of {sep.suggested_threshold:g} would separate them ({scores}); "
            f"lower the threshold to {sep.suggested_threshold:g} rather than trust {line}"
        )
    else:
        out.append(
            f"only a prune line above {line} would separate them ({scores}; e.g. "
            f"{sep.suggested_threshold:g}): the judge scores aligned work as drifted; no lower "
            "threshold exists"
        )
    return trusted, out


def summarize(
    results: Sequence[QueueResult],
    *,
    model: str,
    thresholds: Thresholds = CONFIGURED,
    spend_usd: float = 0.0,
    cap_usd: float = 0.0,
    tokens: int = 0,
    stopped: Stopped | None = None,
) -> CalibrationReport:
    """The report, from the per-queue results alone."""
    sep = separation(scores_of(results, "aligned"), scores_of(results, "drifted"), thresholds)
    unreadable = sum(r.status == "unreadable" for r in results)
    trusted, statements = _statements(results, sep, thresholds, stopped, unreadable)
    calls = sum(r.calls for r in results)
    return CalibrationReport(
        model=model,
        thresholds=thresholds,
        queues_total=len(results),
        queues_judged=sum(r.score is not None for r in results),
        unreadable=unreadable,
        calls=calls,
        retries=sum(max(0, r.calls - 1) for r in results),
        spend_usd=spend_usd,
        cap_usd=cap_usd,
        tokens=tokens,
        stopped=stopped,
        results=list(results),
        agreement=agreement(results),
        confusion=confusion_matrix(results, thresholds),
        distributions={label: distribution(scores_of(results, label)) for label in LABELS},
        separation=sep,
        severity_order=severity_order(results),
        trusted=trusted,
        statements=statements,
    )


# -- the judge, metered ---------------------------------------------------------------------


class MeteredJudge:
    """Each call through the model gateway, as a night makes it: every attempt reserved at
    its worst case (refused beyond the cap) and booked from its usage, a retried or broken
    attempt booked as a night books it. Nothing is written to disk."""

    def __init__(self, client: ModelClient, ledger: Ledger) -> None:
        self.gateway = ModelGateway(
            client, ledger, KeptRecords(), NoEvents(), time.monotonic, BudgetFractions()
        )
        self.calls = 0

    def __call__(self, request: ModelRequest) -> ModelResponse:
        try:
            response = self.gateway.call(request)
        except BudgetRefused:
            raise  # refused before it was made: not a call
        except BaseException:
            self.calls += 1
            raise
        self.calls += 1
        return response


def _unjudged(q: LabelledQueue, status: Status, calls: int, error: str | None) -> QueueResult:
    return QueueResult(
        id=q.id,
        label=q.label,
        severity=q.severity,
        expected_off_goal=list(q.off_goal_task_ids),
        status=status,
        calls=calls,
        error=error,
    )


def judge_queue(
    judge: MeteredJudge,
    q: LabelledQueue,
    *,
    model: str,
    max_tokens: int,
    thresholds: Thresholds = CONFIGURED,
) -> QueueResult:
    """One queue, asked and read as a run asks and reads it. Budget refusals and provider
    failures propagate; an answer invalid twice is an ``unreadable`` result."""
    tasks = q.tasks()
    before = judge.calls
    request = drift_request(model, max_tokens, q.goal, tasks)
    try:
        verdict = ask_structured(judge, request, DriftVerdict, DRIFT_TOOL.name)
    except InvalidModelOutput as exc:
        return _unjudged(q, "unreadable", judge.calls - before, exc.detail)
    if thresholds == CONFIGURED:
        band: Band = drift_gate(tasks, verdict).action  # the production gate itself
    else:
        band = band_of(verdict.drift_score, thresholds)
    return QueueResult(
        id=q.id,
        label=q.label,
        severity=q.severity,
        expected_off_goal=list(q.off_goal_task_ids),
        score=verdict.drift_score,
        band=band,
        off_goal=list(verdict.off_goal_task_ids),
        agrees=agrees(
            q.label,
            verdict.drift_score,
            verdict.off_goal_task_ids,
            q.off_goal_task_ids,
            thresholds.prune_above,
        ),
        calls=judge.calls - before,
        reasoning=verdict.reasoning,
    )


def calibrate(
    client: ModelClient,
    queues: CalibrationSet,
    *,
    model: str,
    max_tokens: int,
    ledger: Ledger,
    thresholds: Thresholds = CONFIGURED,
) -> CalibrationReport:
    """Judge every labelled queue in order (stopping at the money cap or a provider failure)
    and summarize."""
    judge = MeteredJudge(client, ledger)
    results: list[QueueResult] = []
    stopped: Stopped | None = None
    for q in queues.queues:
        if stopped is not None:
            results.append(_unjudged(q, "not_judged", 0, "not judged: the calibration stopped"))
            continue
        before = judge.calls
        try:
            results.append(
                judge_queue(judge, q, model=model, max_tokens=max_tokens, thresholds=thresholds)
            )
        except BudgetRefused as exc:
            stopped = Stopped(reason="money_cap", detail=exc.detail)
            results.append(_unjudged(q, "not_judged", judge.calls - before, exc.detail))
        except RunError as exc:
            stopped = Stopped(reason="model_error", detail=exc.detail)
            results.append(_unjudged(q, "not_judged", judge.calls - before, exc.detail))
    return summarize(
        results,
        model=model,
        thresholds=thresholds,
        spend_usd=ledger.spent_usd,
        cap_usd=ledger.limit_usd,
        tokens=ledger.tokens_used,
        stopped=stopped,
    )


def calibrate_spec(
    spec_path: Path, queues_path: Path | None = None, usd: float = DEFAULT_CAP_USD
) -> CalibrationReport:
    """``overnight calibrate``: the spec's ``[model]`` as the judge, its price table, a ledger
    capped at ``usd``. Bad input is a ``ConfigError`` before any call is made."""
    from overnight.config.spec import _check_model, _with_import_path, load_spec
    from overnight.models.providers import build_client

    if not math.isfinite(usd) or usd <= 0:
        raise ConfigError("--usd", f"the cap must be a positive number of dollars, not {usd}")
    queues = load_queues(queues_path)
    spec = load_spec(spec_path)
    if spec.model is None:
        raise ConfigError(
            "model", "calibrate judges with the spec's [model], and none is set", "add [model]"
        )
    _check_model(spec.model)
    prices = spec.price_table()
    prices.price(spec.model.name)  # an unpriced model is refused before any call
    with _with_import_path(spec):
        client = build_client(spec.model)
    return calibrate(
        client,
        queues,
        model=spec.model.name,
        max_tokens=spec.model.max_tokens,
        ledger=Ledger(prices=prices, limit_usd=usd),
    )


# -- rendering ------------------------------------------------------------------------------


def render_text(report: CalibrationReport) -> str:
    t = report.thresholds
    lines = [
        f"drift judge calibration: {report.model} on {report.queues_total} labelled queues "
        f"(prune above {t.prune_above:g}, halt above {t.halt_above:g})",
        "",
        f"{'queue':<34} {'label':<8} {'sev':>4} {'score':>5}  {'band':<6} {'agrees':<6} named",
    ]
    for r in report.results:
        if r.score is None:
            what = "unreadable" if r.status == "unreadable" else "not judged"
            lines.append(f"{r.id:<34} {r.label:<8} {r.severity:>4.2f} {'-':>5}  {what}")
            continue
        named = ", ".join(r.off_goal) or "-"
        lines.append(
            f"{r.id:<34} {r.label:<8} {r.severity:>4.2f} {r.score:>5.2f}  {r.band or '-':<6} "
            f"{'yes' if r.agrees else 'NO':<6} {named}"
        )
    a = report.agreement
    lines += [
        "",
        "agreement: "
        + ", ".join(f"{k} {a[k].agree}/{a[k].total}" for k in (*LABELS, "all"))
        + " (aligned: score <= prune line; drifted: above it, naming an expected off-goal task)",
        "confusion (label x band):",
        f"  {'':<8} " + " ".join(f"{b:>5}" for b in BANDS),
    ]
    for label in LABELS:
        row = report.confusion[label]
        lines.append(f"  {label:<8} " + " ".join(f"{row[b]:>5}" for b in BANDS))
    lines.append("scores:")
    for label in LABELS:
        d = report.distributions[label]
        listed = ", ".join(f"{s:.2f}" for s in d.scores)
        lines.append(
            f"  {label:<8} n={d.n:<2} min {_fmt(d.min)}  median {_fmt(d.median)}  "
            f"max {_fmt(d.max)}  [{listed}]"
        )
    s = report.separation
    if s.window is not None:
        lines.append(
            f"separation: max aligned {_fmt(s.max_aligned)} < min drifted "
            f"{_fmt(s.min_drifted)}; any threshold t with {_fmt(s.window[0])} <= t < "
            f"{_fmt(s.window[1])} separates them"
        )
    else:
        lines.append(
            f"separation: none (max aligned {_fmt(s.max_aligned)}, "
            f"min drifted {_fmt(s.min_drifted)})"
        )
    halting = report.confusion["drifted"]["halt"]
    lines.append(
        f"halt line {t.halt_above:g}: {halting} drifted and "
        f"{report.confusion['aligned']['halt']} aligned queue(s) would halt a run"
        + ("; it also separates the sets" if s.at_halt else "")
    )
    if report.severity_order is not None:
        lines.append(
            f"severity order: {report.severity_order:.0%} of drifted pairs are scored in the "
            "order of their severity"
        )
    lines.append(
        f"calls: {report.calls} ({report.retries} retried, {report.unreadable} unreadable); "
        f"spent ${report.spend_usd:.4f} of the ${report.cap_usd:.2f} cap; "
        f"{report.queues_judged} of {report.queues_total} queues judged"
    )
    lines.append("")
    lines += [f"verdict: {st}" for st in report.statements]
    return "\n".join(lines) + "\n"
