"""The statistics of a calibration: pure functions of the per-queue results.

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
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal

from overnight.calibration.queues import LABELS, Label
from overnight.calibration.report import (
    BANDS,
    CONFIGURED,
    Agreement,
    Band,
    CalibrationReport,
    Distribution,
    QueueResult,
    Separation,
    Stopped,
    Thresholds,
)
from overnight.core.drift import DRIFT_PRUNE_ABOVE


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


def score_text(x: float | None) -> str:
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
    scores = (
        f"highest aligned {score_text(sep.max_aligned)}, "
        f"lowest drifted {score_text(sep.min_drifted)}"
    )
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
