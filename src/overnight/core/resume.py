"""Resume verifies the task that was in flight; it never re-executes it.

Three outcomes, and the third is the one that goes to a human.
"""

from __future__ import annotations

from enum import StrEnum


class VerifyOutcome(StrEnum):
    DONE = "done"
    NOT_DONE = "not_done"
    PARTIAL = "partially_applied"


def outcome_of_exit(exit_code: int | None) -> VerifyOutcome:
    """0 done, 1 not done (nothing happened), anything else, or no answer, partially applied."""
    if exit_code == 0:
        return VerifyOutcome.DONE
    if exit_code == 1:
        return VerifyOutcome.NOT_DONE
    return VerifyOutcome.PARTIAL
