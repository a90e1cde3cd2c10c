"""What an audit found: one verdict per check, and the audit as a whole (``--json``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

AUDIT_KIND = "overnight-audit"

#: The exit codes of ``overnight audit``: everything agrees, or something does not.
EXIT_AGREES = 0
EXIT_DISAGREES = 3

Verdict = Literal["ok", "DISAGREES"]
Concern = Literal["run", "stop", "money", "work", "gates", "effects"]


class AuditCheck(BaseModel):
    """One claim of the result, recomputed and compared."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["audit_check"] = "audit_check"
    name: str
    """What was checked: ``stop_reason``, ``budgets.cost_usd``, ``verify t_1``, ..."""
    concern: Concern
    verdict: Verdict
    detail: str
    """What was recomputed, from what, and (when it disagrees) what the result says instead."""

    @property
    def agrees(self) -> bool:
        return self.verdict == "ok"


class Recomputed(BaseModel):
    """The figures the audit derived itself, for whoever reads the JSON."""

    model_config = ConfigDict(extra="forbid")

    stop_reason: str | None
    """What the stop check gives on the raw files; null when nothing would have stopped."""
    total_usd: float | None
    """Every booked call re-priced, plus unanswered reservations at their worst case."""
    at_stop_usd: float | None
    """What was spent when the stop was decided (everything but the closing summary)."""
    commits: list[str] = Field(default_factory=list)
    """The run's branch after its base commit, oldest first."""
    prices_from: str = ""
    """Where the price table came from: the run's manifest, or (a run that did not record it)
    the spec's tables and genai-prices today."""


class Audit(BaseModel):
    """The whole audit of one run."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["overnight-audit"] = "overnight-audit"
    run_id: str
    run_dir: str
    rerun: bool
    """Whether each verified task's verify was run again (``--no-rerun``: not)."""
    checks: list[AuditCheck]
    recomputed: Recomputed
    disagreements: list[str]
    """The names of the checks that disagree, in order."""
    agrees: bool
    exit_code: int

    @classmethod
    def of(
        cls,
        run_id: str,
        run_dir: str,
        rerun: bool,
        checks: list[AuditCheck],
        recomputed: Recomputed,
    ) -> Audit:
        disagreements = [c.name for c in checks if not c.agrees]
        return cls(
            run_id=run_id,
            run_dir=run_dir,
            rerun=rerun,
            checks=checks,
            recomputed=recomputed,
            disagreements=disagreements,
            agrees=not disagreements,
            exit_code=EXIT_DISAGREES if disagreements else EXIT_AGREES,
        )


def check(name: str, concern: Concern, agrees: bool, detail: str) -> AuditCheck:
    return AuditCheck(
        name=name, concern=concern, verdict="ok" if agrees else "DISAGREES", detail=detail
    )
