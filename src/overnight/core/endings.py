"""The seven endings of a run, their priority, classes, exit codes and resumability.

This is the only place that decides how a run ends. ``should_stop`` is called at the top of
every lap; ``classify_exception`` turns anything raised inside a lap into a ``Stop``. The
tables below are checked against the set of endings, in both directions, when this module is
imported: a reason with no class and a class that nothing can produce are both refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from overnight.core.budget import BUDGET_STOP_DETAIL, BudgetsView, first_exhausted
from overnight.core.errors import (
    BudgetRefused,
    Interrupted,
    RunError,
    TableError,
)


class Ending(StrEnum):
    GOAL_MET = "GOAL_MET"
    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    TIME_LIMIT = "TIME_LIMIT"
    DRIFT_DETECTED = "DRIFT_DETECTED"
    NO_PROGRESS = "NO_PROGRESS"
    QUEUE_EMPTY_GOAL_UNMET = "QUEUE_EMPTY_GOAL_UNMET"
    UNRECOVERABLE_ERROR = "UNRECOVERABLE_ERROR"


class Outcome(StrEnum):
    SUCCESS = "SUCCESS"
    PARTIAL = "PARTIAL"
    FAILURE = "FAILURE"


#: The order ``should_stop`` checks in. UNRECOVERABLE_ERROR has no predicate of its own: it is
#: what a lap that raised becomes, and it is reported before the others because after an
#: unexpected exception none of the facts they read can be trusted.
PRIORITY: tuple[Ending, ...] = (
    Ending.UNRECOVERABLE_ERROR,
    Ending.GOAL_MET,
    Ending.BUDGET_EXHAUSTED,
    Ending.TIME_LIMIT,
    Ending.DRIFT_DETECTED,
    Ending.NO_PROGRESS,
    Ending.QUEUE_EMPTY_GOAL_UNMET,
)

CLASS: dict[Ending, Outcome] = {
    Ending.GOAL_MET: Outcome.SUCCESS,
    Ending.BUDGET_EXHAUSTED: Outcome.PARTIAL,
    Ending.TIME_LIMIT: Outcome.PARTIAL,
    Ending.DRIFT_DETECTED: Outcome.FAILURE,
    Ending.NO_PROGRESS: Outcome.FAILURE,
    Ending.QUEUE_EMPTY_GOAL_UNMET: Outcome.FAILURE,
    Ending.UNRECOVERABLE_ERROR: Outcome.FAILURE,
}

EXIT_CODE: dict[Ending, int] = {
    Ending.GOAL_MET: 0,
    Ending.BUDGET_EXHAUSTED: 2,
    Ending.TIME_LIMIT: 2,
    Ending.DRIFT_DETECTED: 3,
    Ending.NO_PROGRESS: 3,
    Ending.QUEUE_EMPTY_GOAL_UNMET: 3,
    Ending.UNRECOVERABLE_ERROR: 4,
}

#: Would running again with the same inputs (and, for budgets, a raised limit) end
#: differently? ``None`` means: it depends on the cause, see ``RESUMABLE_BY_CAUSE``.
RESUMABLE: dict[Ending, bool | None] = {
    Ending.GOAL_MET: False,
    Ending.BUDGET_EXHAUSTED: True,
    Ending.TIME_LIMIT: True,
    Ending.DRIFT_DETECTED: False,
    Ending.NO_PROGRESS: False,
    Ending.QUEUE_EMPTY_GOAL_UNMET: False,
    Ending.UNRECOVERABLE_ERROR: None,
}

#: Endings that a person's review changes: the queue ran dry, or nothing progressed, while a
#: task was held for an effect of unknown outcome. Once its effects are resolved, a resume
#: runs it again.
REOPENED_BY_REVIEW: tuple[Ending, ...] = (Ending.QUEUE_EMPTY_GOAL_UNMET, Ending.NO_PROGRESS)

RESUMABLE_BY_CAUSE: dict[str, bool] = {
    "dependency_unavailable": True,  # the clock decides, not the task: later, yes
    "fleet_database_unreachable": True,  # the fleet's database comes back: later, yes
    "model_error": True,  # a provider fault, not a property of the inputs
    "invalid_model_output": True,  # sampled output; a second attempt can differ
    "disk_full": True,  # after space is freed
    "checkpoint_corrupt": False,  # nothing trustworthy to resume from
    "goal_mutated": False,  # the run's own identity is in doubt
    "workspace_error": False,
    "internal_error": False,  # a bug reproduces
}

#: Who is told, and how urgently. Only drift wakes somebody: it is the one ending where the
#: run was spending money on the wrong problem.
ALERT: dict[Ending, str] = {
    Ending.GOAL_MET: "none",
    Ending.BUDGET_EXHAUSTED: "alert",
    Ending.TIME_LIMIT: "alert",
    Ending.DRIFT_DETECTED: "page",
    Ending.NO_PROGRESS: "alert",
    Ending.QUEUE_EMPTY_GOAL_UNMET: "alert",
    Ending.UNRECOVERABLE_ERROR: "alert",
}

DRIFT_HALT_ABOVE = 0.5


def verify_tables(endings: Iterable[str], tables: Mapping[str, Iterable[str]]) -> None:
    """Raise ``TableError`` unless every table has exactly the given endings as keys.

    Both directions are reported separately: an ending with no entry, and an entry for
    something that is not an ending (a class with no producer).
    """
    wanted = {str(e) for e in endings}
    problems: list[str] = []
    for name, keys in tables.items():
        have = [str(k) for k in keys]
        if len(have) != len(set(have)):
            problems.append(f"{name} lists an ending twice")
        missing = wanted - set(have)
        extra = set(have) - wanted
        if missing:
            problems.append(f"{name} has no entry for {sorted(missing)}")
        if extra:
            problems.append(f"{name} has entries no ending produces: {sorted(extra)}")
    if problems:
        raise TableError("; ".join(problems))


#: Every table keyed by ending; each must name all seven and nothing else.
ENDING_TABLES: dict[str, Iterable[Ending]] = {
    "PRIORITY": PRIORITY,
    "CLASS": CLASS,
    "EXIT_CODE": EXIT_CODE,
    "RESUMABLE": RESUMABLE,
    "ALERT": ALERT,
}

verify_tables(Ending, ENDING_TABLES)


@dataclass(frozen=True)
class Stop:
    """A decided ending. ``detail`` qualifies it: which budget, which signal, which cause."""

    ending: Ending
    detail: str = ""
    message: str = ""

    @property
    def reason(self) -> str:
        return f"{self.ending}:{self.detail}" if self.detail else str(self.ending)


@dataclass(frozen=True)
class Verdict:
    """Everything the morning needs to know about a ``Stop``, read from the tables."""

    stop: Stop
    outcome: Outcome
    exit_code: int
    resumable: bool
    alert: str


def describe(
    stop: Stop, classes: Mapping[Ending, Outcome] = CLASS, *, held: bool = False
) -> Verdict:
    """Look a stop up in the tables. A stop the tables do not know is a ``TableError``.

    ``held``: a task of the run is parked for a person's answer about an effect of unknown
    outcome. An ending of ``REOPENED_BY_REVIEW`` is then resumable whatever its table says:
    once the review queue is resolved, a resume runs the task again."""
    if stop.ending not in classes:
        raise TableError(f"unclassified stop: {stop.ending}")
    resumable = RESUMABLE[stop.ending]
    if resumable is None:
        resumable = RESUMABLE_BY_CAUSE.get(stop.detail, False)
    if held and stop.ending in REOPENED_BY_REVIEW:
        resumable = True
    return Verdict(
        stop=stop,
        outcome=classes[stop.ending],
        exit_code=EXIT_CODE[stop.ending],
        resumable=resumable,
        alert=ALERT[stop.ending],
    )


@dataclass(frozen=True)
class StopFacts:
    """What the stop check reads. Built by the harness from its state at the top of a lap."""

    goal_met: bool
    budgets: BudgetsView
    drift_score: float
    no_progress_streak: int
    no_progress_limit: int
    queue_length: int
    interrupted_by: str | None = None
    fatal: Stop | None = None


def should_stop(facts: StopFacts) -> Stop | None:
    """The one stop check. The order of the ``if``s is the priority order; it is load-bearing.

    The goal comes first so that a run reaching its goal on its last dollar reports success.
    ``blocked`` budgets (a refused reservation) count as exhausted: the ledger refuses the call
    that would cross a line, so ``used`` alone would never get there.
    """
    if facts.fatal is not None:
        return facts.fatal
    if facts.goal_met:
        return Stop(Ending.GOAL_MET)
    budget = first_exhausted(facts.budgets, kind="budget")
    if budget is not None:
        return Stop(Ending.BUDGET_EXHAUSTED, BUDGET_STOP_DETAIL[budget])
    if first_exhausted(facts.budgets, kind="time") is not None:
        return Stop(Ending.TIME_LIMIT, BUDGET_STOP_DETAIL["seconds"])
    if facts.interrupted_by is not None:
        return Stop(Ending.TIME_LIMIT, facts.interrupted_by, "drained after a signal")
    if facts.drift_score > DRIFT_HALT_ABOVE:
        return Stop(Ending.DRIFT_DETECTED, message=f"drift score {facts.drift_score:.2f}")
    if facts.no_progress_streak >= facts.no_progress_limit:
        return Stop(
            Ending.NO_PROGRESS,
            message=f"{facts.no_progress_streak} tasks in a row changed nothing verifiable",
        )
    if facts.queue_length == 0:
        return Stop(Ending.QUEUE_EMPTY_GOAL_UNMET, message="the queue drained, goal unmet")
    return None


def classify_exception(exc: BaseException) -> Stop | None:
    """Turn an exception out of a lap into a ``Stop``, or ``None`` for the two soft ones.

    ``BudgetRefused`` and ``Interrupted`` return ``None``: the caller records the flag and the
    top of the next lap classifies the stop in the one place stops get classified.
    ``TableError`` is re-raised: it means this module is broken, and must stay loud.
    """
    if isinstance(exc, TableError):
        raise exc
    if isinstance(exc, BudgetRefused | Interrupted):
        return None
    if isinstance(exc, RunError):
        return Stop(Ending.UNRECOVERABLE_ERROR, exc.cause, exc.detail)
    if isinstance(exc, OSError) and exc.errno == 28:  # ENOSPC
        return Stop(Ending.UNRECOVERABLE_ERROR, "disk_full", repr(exc))
    return Stop(Ending.UNRECOVERABLE_ERROR, "internal_error", repr(exc))


BUDGET_TYPE_REASONS = frozenset(
    f"{ending}:{detail}"
    for ending, detail in (
        (Ending.BUDGET_EXHAUSTED, BUDGET_STOP_DETAIL["cost_usd"]),
        (Ending.BUDGET_EXHAUSTED, BUDGET_STOP_DETAIL["fleet_money"]),
        (Ending.BUDGET_EXHAUSTED, BUDGET_STOP_DETAIL["tokens"]),
        (Ending.BUDGET_EXHAUSTED, BUDGET_STOP_DETAIL["steps"]),
        (Ending.TIME_LIMIT, BUDGET_STOP_DETAIL["seconds"]),
    )
)


def recompute_from_budgets(budgets: BudgetsView) -> str | None:
    """The stop reason the budgets block alone implies, by a route that shares nothing with
    ``should_stop`` beyond the definition of "exhausted"."""
    name = first_exhausted(budgets, kind="budget") or first_exhausted(budgets, kind="time")
    if name is None:
        return None
    ending = Ending.TIME_LIMIT if name == "seconds" else Ending.BUDGET_EXHAUSTED
    return f"{ending}:{BUDGET_STOP_DETAIL[name]}"


def agrees_with_budgets(stop_reason: str, budgets: BudgetsView) -> bool:
    """Does a terminal result's ``stop_reason`` agree with its own budgets block?

    The block is judged by what each budget had used when the stop was decided (``at_stop``
    when a reading carries it, else ``used``): the closing summary spends after the decision,
    so a result's final ``used`` may sit past a line the decision never saw crossed.

    A budget-type reason must be exactly what the block implies. DRIFT_DETECTED, NO_PROGRESS,
    QUEUE_EMPTY_GOAL_UNMET and a signal-driven TIME_LIMIT are checked after the budgets, so
    the block must show none exhausted. GOAL_MET outranks budgets and UNRECOVERABLE_ERROR
    outranks everything, so the block says nothing about them.
    """
    implied = recompute_from_budgets(budgets)
    if stop_reason in BUDGET_TYPE_REASONS:
        return implied == stop_reason
    ending = stop_reason.split(":", 1)[0]
    if ending in (Ending.GOAL_MET, Ending.UNRECOVERABLE_ERROR):
        return True
    return implied is None
