"""A recorded night billed again, old against new: the total, each purpose, and what the
night's cap would have allowed at the new bill. Pure; ``overnight reprice`` reads the run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from overnight.core.budget import Price, to_usd
from overnight.estimate.rebill import CachePolicy, is_exact, rebill, recorded_policy
from overnight.night.workload import CallFacts, WorkloadFacts, main_model


@dataclass(frozen=True)
class PurposeRow:
    purpose: str
    calls: int
    old_usd: float
    new_usd: float


@dataclass(frozen=True)
class CapCheck:
    """What the run's cap would have allowed at the new bill."""

    cap_usd: float
    enforcement_line_usd: float
    finish_line_usd: float
    calls_paid: int
    """Calls, in the order they were made, before the first that would cross the
    enforcement line."""
    calls: int
    refused_at_task: str | None
    """The task during whose calls the line would have been crossed, if any."""
    tasks_started_past_finish: tuple[str, ...]
    """Tasks that would have started with the spend past the finish line: not started."""
    verified_paid: tuple[str, ...]
    """Verified tasks whose every call is paid before the line."""
    text: str


@dataclass(frozen=True)
class Repricing:
    kind: str
    version: int
    run_id: str
    calls: int
    recorded_policy: str
    cache: str | None
    exact: bool
    """False when the cache policy is derived from the recorded call times and TTLs."""
    model: str | None
    replaces: str | None
    prices_from: str
    old_usd: float
    new_usd: float
    unanswered_usd: float
    """Reservations that never had an answer, counted at their worst case in both."""
    by_purpose: tuple[PurposeRow, ...]
    cap: CapCheck | None
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _owner(facts: WorkloadFacts) -> dict[int, str]:
    return {id(c): t.id for t in facts.tasks for c in t.calls}


def cap_check(
    facts: WorkloadFacts,
    priced: list[tuple[CallFacts, int]],
    cap_usd: float,
    finish_at: float,
    enforce_at: float,
    unanswered: int = 0,
) -> CapCheck:
    """Walk the calls in the order they were made at their new prices against the cap."""
    owner = _owner(facts)
    enforce = round(cap_usd * 10**9 * enforce_at)
    finish = round(cap_usd * 10**9 * finish_at)
    starts = {t.id: min((c.at for c in t.calls), default=float("inf")) for t in facts.tasks}
    spent, paid, refused_task = unanswered, 0, None
    crossed = False
    spent_at: list[tuple[float, int]] = []
    for c, nanos in sorted(priced, key=lambda p: p[0].at):
        if not crossed and spent + nanos > enforce:
            crossed = True
            refused_task = owner.get(id(c), c.purpose)
        if not crossed:
            paid += 1
            spent += nanos
        spent_at.append((c.at, spent))
    last_paid_at = max((at for at, _ in spent_at[:paid]), default=float("-inf"))
    past_finish = tuple(
        t
        for t, start in starts.items()
        if any(at < start and s >= finish for at, s in spent_at[:paid])
    )
    verified = tuple(
        t.id
        for t in facts.tasks
        if t.outcome == "verified" and all(c.at <= last_paid_at for c in t.calls)
    )
    total = len(priced)
    if not crossed:
        text = (
            f"the ${cap_usd:.2f} cap (enforcement line ${enforce / 1e9:.4f}) would have paid "
            f"for all {total} calls"
        )
    else:
        text = (
            f"the ${cap_usd:.2f} cap (enforcement line ${enforce / 1e9:.4f}) would have "
            f"refused call {paid + 1} of {total} (in {refused_task}): "
            f"{len(verified)} of {facts.tasks_verified} verified task(s) paid for"
        )
    if past_finish:
        text += f"; {', '.join(past_finish)} would have started past the finish line"
    return CapCheck(
        cap_usd=cap_usd,
        enforcement_line_usd=enforce / 1e9,
        finish_line_usd=finish / 1e9,
        calls_paid=paid,
        calls=total,
        refused_at_task=refused_task,
        tasks_started_past_finish=past_finish,
        verified_paid=verified,
        text=text,
    )


def reprice_run(
    facts: WorkloadFacts,
    price_of: Callable[[str], Price],
    *,
    model: str | None = None,
    policy: CachePolicy | None = None,
    min_cacheable: int = 1024,
    cap: tuple[float, float, float] | None = None,
    unanswered_nanos: int = 0,
    prices_from: str = "",
) -> Repricing:
    """The run billed again at ``price_of``; with ``model``, its main model's calls at that
    model's price; with ``policy``, under that cache policy. ``cap`` is the run's
    ``(usd, finish_at, enforce_at)``."""
    replaces = main_model(facts) if model is not None else None
    billed = rebill(
        facts, price_of, model=model, replaces=replaces, policy=policy, min_cacheable=min_cacheable
    )
    rows: dict[str, list[int]] = {}
    for b in billed:
        row = rows.setdefault(b.call.purpose, [0, 0, 0])
        row[0] += 1
        row[1] += b.old_nanos
        row[2] += b.nanos
    old = sum(b.old_nanos for b in billed) + unanswered_nanos
    new = sum(b.nanos for b in billed) + unanswered_nanos
    exact = is_exact(facts.all_calls, policy)
    notes: list[str] = []
    if not exact:
        notes.append(
            f"derived: the recording was made with cache policy "
            f"{recorded_policy(facts.all_calls)}; under {policy} each task's calls are "
            "replayed against a cache keyed by their recorded start times and the TTL"
        )
    if any(not b.call.usage_known for b in billed):
        notes.append("calls booked without a usage keep their booked (worst-case) dollars")
    if unanswered_nanos:
        notes.append("reservations with no answer count at their worst case, as booked")
    return Repricing(
        kind="reprice",
        version=1,
        run_id=facts.run_id,
        calls=len(billed),
        recorded_policy=recorded_policy(facts.all_calls),
        cache=policy,
        exact=exact,
        model=model,
        replaces=replaces,
        prices_from=prices_from,
        old_usd=to_usd(old),
        new_usd=to_usd(new),
        unanswered_usd=to_usd(unanswered_nanos),
        by_purpose=tuple(
            PurposeRow(p, r[0], to_usd(r[1]), to_usd(r[2])) for p, r in sorted(rows.items())
        ),
        cap=(
            cap_check(facts, [(b.call, b.nanos) for b in billed], *cap, unanswered_nanos)
            if cap is not None and cap[0] > 0
            else None
        ),
        notes=tuple(notes),
    )


def render_repricing(r: Repricing) -> str:
    def usd(x: float) -> str:
        return f"${x:,.2f}" if abs(x) >= 1 else f"${x:.4f}"

    how = []
    if r.model is not None:
        how.append(f"{r.replaces}'s calls at {r.model}'s price")
    if r.cache is not None:
        how.append(f"cache {r.cache} ({'exact' if r.exact else 'DERIVED'})")
    lines = [
        f"Reprice of run {r.run_id}: {r.calls} recorded calls, cache as recorded "
        f"{r.recorded_policy}; {', '.join(how) or 'as recorded'}; prices: {r.prices_from}",
        "",
        f"  {'purpose':<12} {'calls':>5} {'recorded':>12} {'repriced':>12}",
    ]
    for row in r.by_purpose:
        lines.append(
            f"  {row.purpose:<12} {row.calls:>5} {usd(row.old_usd):>12} {usd(row.new_usd):>12}"
        )
    if r.unanswered_usd:
        lines.append(f"  {'unanswered':<12} {'':>5} {usd(r.unanswered_usd):>12} {'':>12}")
    lines.append(f"  {'total':<12} {r.calls:>5} {usd(r.old_usd):>12} {usd(r.new_usd):>12}")
    lines.append("")
    if r.cap is not None:
        lines.append(f"Cap: {r.cap.text}.")
    lines += [f"Note: {n}." for n in r.notes]
    return "\n".join(lines) + "\n"
