"""Intent first: a mutating call is written down as ``intended`` before it is attempted, then
``confirmed`` with its result, ``failed`` (the provider said no, for good) or ``unknown`` (no
answer, or a retryable failure: it may have happened). A confirmed row is replayed: the tool
is not called again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from overnight.seams import DuplicateEffect, EffectRow, EffectStore

#: The states of an effect whose outcome nobody knows: it may have happened.
UNSETTLED = ("intended", "unknown")

#: The key of a row's result (or, for ``failed``, of its detail) that says a person settled
#: the row in review, and how: ``happened`` or ``not_happened``.
REVIEW_MARK = "resolved_in_review"


class ToolFailure(Exception):
    """Raised by an external tool: ``retryable`` means the effect may or may not have happened
    (a timeout, a 5xx); not retryable means the provider refused it."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        self.message = message
        self.retryable = retryable
        super().__init__(message)


@dataclass(frozen=True)
class EffectOutcome:
    result: Any
    replayed: bool
    row: EffectRow | None


class EffectRefused(Exception):
    """The task-scoped key says this effect was already attempted (by another run), or the
    step's row says an earlier attempt of it may have happened."""

    def __init__(self, existing: EffectRow, why: str = "", *, unsettled: bool = False) -> None:
        self.existing = existing
        if unsettled:
            message = (
                f"refused: an earlier attempt of this {existing.tool} call has an unknown "
                f"outcome (state: {existing.state}); it may have happened, and it will not be "
                "made again until a person resolves it"
            )
        elif why:
            message = f"refused: this call differs from the one recorded at its step ({why})"
        else:
            message = (
                f"refused: {existing.tool} for {existing.task_key} was already attempted by run "
                f"{existing.run_id} (state: {existing.state}); it will not be repeated"
            )
        super().__init__(message)


def dispatch_with_ledger(
    store: EffectStore,
    *,
    run_id: str,
    task_id: str,
    step_key: str,
    task_key: str | None,
    tool: str,
    args: dict[str, Any],
    call: Callable[[str], Any],
) -> EffectOutcome:
    """Run ``call(idempotency_key)`` at most once per step key, and at most once per task key
    across runs. Raises ``EffectRefused`` for a second delivery, ``ToolFailure`` as the tool
    raised it (after recording ``failed`` or ``unknown``). Anything else out of ``call`` (a
    ``KeyboardInterrupt`` while it waits, say) is recorded ``unknown`` and raised again."""
    prior = store.get(step_key)
    if prior is not None and (prior.tool != tool or prior.args != _plain(args)):
        raise EffectRefused(prior, f"an earlier attempt made this call with {prior.args}")
    if prior is not None and prior.state == "confirmed":
        return EffectOutcome(prior.result, replayed=True, row=prior)
    if prior is not None and prior.state in UNSETTLED:
        raise EffectRefused(prior, unsettled=True)
    try:
        if prior is None:
            store.intend(run_id, task_id, step_key, task_key, tool, args)
        else:  # failed: refused for good, or found by a person not to have happened
            store.settle(step_key, "intended")
    except DuplicateEffect as dup:
        raise EffectRefused(dup.existing) from dup
    try:
        result = call(step_key)
    except ToolFailure as failure:
        store.settle(step_key, "unknown" if failure.retryable else "failed", error=failure.message)
        raise
    except Exception as exc:  # no answer we can trust: it may have happened
        store.settle(step_key, "unknown", error=repr(exc))
        raise ToolFailure(f"the tool crashed: {exc!r}", retryable=True) from exc
    except BaseException as exc:  # the wait ended some other way: the call may be under way
        store.settle(step_key, "unknown", error=f"no answer was recorded: {exc!r}")
        raise
    row = store.settle(step_key, "confirmed", result=result)
    return EffectOutcome(result, replayed=False, row=row)


def _plain(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments as the store keeps them (a JSON round trip)."""
    loaded: dict[str, Any] = json.loads(json.dumps(args, sort_keys=True, default=str))
    return loaded


def render_done(rows: list[EffectRow]) -> str:
    """What a resumed task is told about its confirmed effects (short; not a transcript)."""
    done = [r for r in rows if r.state == "confirmed"]
    if not done:
        return ""
    parts = []
    for r in done:
        args = ", ".join(f"{k}={v}" for k, v in sorted(r.args.items()))
        detail = f" -> {r.result}" if r.result not in (None, {}, "") else ""
        parts.append(f"{r.tool}({args}){detail}")
    return "Already done in an earlier attempt: " + "; ".join(parts) + ". Do not repeat these."


def one_line(text: str, limit: int = 300) -> str:
    """``text`` folded to one line and cut to ``limit`` characters (a tool's error may come
    from an untrusted server)."""
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 3] + "..."


def render_unknown(rows: list[EffectRow]) -> str:
    """Why a task with effects of unknown outcome is held: the first one, named by tool and
    run-step key, in the first sentence; then what a person does about it."""
    first = rows[0]
    more = f" (and {len(rows) - 1} more effect(s))" if len(rows) > 1 else ""
    why = one_line(first.error or "no answer was recorded")
    return (
        f"`{first.tool}` (key {first.step_key}){more} has an unknown outcome: {why}. "
        "The task is held whatever its verify says: resolve the effect with `overnight review "
        "resolve effect:KEY --happened|--not-happened --note ...`, then `overnight resume` "
        "runs the task again."
    )


def review_outcome(row: EffectRow) -> str | None:
    """``happened`` or ``not_happened`` when a person settled ``row`` in review, else None."""
    if isinstance(row.result, dict):
        outcome = row.result.get(REVIEW_MARK)
        if outcome in ("happened", "not_happened"):
            return str(outcome)
    return None
