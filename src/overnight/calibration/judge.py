"""The drift judge asked as a run asks it, every call metered against a money cap.

The judge is asked exactly what a run asks it (``drift_request``, the production prompt and
tool), its answers are read exactly as a run reads them (``ask_structured`` with
``DriftVerdict``: an invalid verdict is asked for again once), and each verdict is put in its
band by ``drift_gate`` itself. What comes back is compared with the labels.

Every call goes through a ``Ledger`` with the model's price: its worst case is reserved first
and a call that would cross the cap is refused; the calibration then stops and reports how many
queues were judged and what was spent.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from overnight.calibration.queues import CalibrationSet, LabelledQueue, load_queues
from overnight.calibration.report import (
    CONFIGURED,
    Band,
    CalibrationReport,
    QueueResult,
    Status,
    Stopped,
    Thresholds,
)
from overnight.calibration.stats import agrees, band_of, summarize
from overnight.config.spec import check_model_settings, load_spec, spec_import_path
from overnight.core.budget import BudgetFractions, Ledger
from overnight.core.drift import DriftVerdict, drift_gate
from overnight.core.errors import BudgetRefused, ConfigError, InvalidModelOutput, RunError
from overnight.messages.answers import DRIFT_TOOL
from overnight.messages.types import ModelRequest, ModelResponse
from overnight.models.gateway import KeptRecords, ModelGateway, NoEvents
from overnight.models.providers import build_client
from overnight.models.structured import ask_structured
from overnight.night.harness_requests import drift_request
from overnight.seams import ModelClient

#: The default money cap of one calibration, in dollars.
DEFAULT_CAP_USD = 2.0


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
    if not math.isfinite(usd) or usd <= 0:
        raise ConfigError("--usd", f"the cap must be a positive number of dollars, not {usd}")
    queues = load_queues(queues_path)
    spec = load_spec(spec_path)
    if spec.model is None:
        raise ConfigError(
            "model", "calibrate judges with the spec's [model], and none is set", "add [model]"
        )
    check_model_settings(spec.model)
    prices = spec.price_table()
    prices.price(spec.model.name)  # an unpriced model is refused before any call
    with spec_import_path(spec):
        client = build_client(spec.model)
    return calibrate(
        client,
        queues,
        model=spec.model.name,
        max_tokens=spec.model.max_tokens,
        ledger=Ledger(prices=prices, limit_usd=usd),
    )
