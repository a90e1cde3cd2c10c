"""``overnight review``: the human queue.

Parked tasks (partially applied ones among them), effects of unknown outcome, and runs that
ended in a way a resume cannot fix, each with the effects that did happen and the plan that
did not. Resolving an item records a note; nothing is deleted.

An effect of unknown outcome is resolved by saying what became of it: ``happened`` settles its
row ``confirmed`` (a later call at its step gets the recorded answer back, and its task key
stays taken: it is never made again), ``not_happened`` settles it ``failed`` (its step may be
called once more, with the same idempotency key). The ledger is where that answer lives: an
effect item is open while its row is of unknown outcome, whatever notes were recorded.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from overnight.config.spec import Spec
from overnight.core.endings import REOPENED_BY_REVIEW
from overnight.core.errors import ConfigError
from overnight.core.text import clip, one_line
from overnight.effects.ledger import REVIEW_MARK, UNSETTLED, review_outcome
from overnight.effects.store import SqliteEffectStore
from overnight.seams import EffectRow, EffectStore
from overnight.store.index import indexed_runs
from overnight.store.rundir import RunDir, RunLock, default_runs_root, read_json

#: What a person found an effect of unknown outcome to have done.
EffectVerdict = Literal["happened", "not_happened"]

EFFECT_KIND = "effect of unknown outcome"


@dataclass
class ReviewItem:
    id: str
    kind: str
    run_id: str
    run_dir: str
    summary: str
    effects_done: list[str] = field(default_factory=list)
    plan_remaining: list[str] = field(default_factory=list)
    resolved: str | None = None
    effect_key: str | None = None
    """For an effect item: its run-step key."""
    effect_resolved: str | None = None
    """For an effect item: the note of the person who settled its row, as the ledger has it."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def review_db(path: Path | None = None) -> SqliteEffectStore:
    if path is None:
        home = os.environ.get("OVERNIGHT_HOME")
        path = (Path(home) if home else Path.home() / ".overnight") / "review.sqlite"
    return SqliteEffectStore(path)


def run_dirs(root: Path | None) -> list[RunDir]:
    """The runs under review: ``root`` (a run, or a folder of runs); None: every run of the
    index plus those in ``$OVERNIGHT_HOME/runs``."""
    if root is None:
        found = {r.path.absolute(): RunDir(r.path) for r in indexed_runs()}
        for rd in run_dirs(default_runs_root()):
            found.setdefault(rd.path.absolute(), rd)
        return [rd for _, rd in sorted(found.items()) if rd.is_run()]
    if RunDir(root).is_run():
        return [RunDir(root)]
    if not root.is_dir():
        return []
    return [RunDir(p) for p in sorted(root.iterdir()) if RunDir(p).is_run()]


def _effects_path(rd: RunDir) -> Path:

    return Spec.model_validate(read_json(rd.spec)).effects_path(rd.path)


def items_of(rd: RunDir, ledger: EffectStore | None = None) -> list[ReviewItem]:
    """The items of one run. ``ledger``: where its effects are (a fleet's shared ledger);
    None: the run's own SQLite file."""
    manifest = read_json(rd.manifest)
    run_id = str(manifest["run_id"])
    result: dict[str, Any] = read_json(rd.result) if rd.result.exists() else {}
    plan = result.get("plan") or {}
    remaining = list(plan.get("remaining") or [])
    done: list[str] = []
    unsettled: list[EffectRow] = []
    for row in _rows_of(rd, run_id, ledger):
        if row.state == "confirmed":
            done.append(f"{row.tool}({row.args}) -> {row.result}")
        if row.state in UNSETTLED or review_outcome(row) is not None:
            unsettled.append(row)

    def item(item_id: str, kind: str, summary: str) -> ReviewItem:
        return ReviewItem(
            id=item_id,
            kind=kind,
            run_id=run_id,
            run_dir=str(rd.path),
            summary=summary,
            effects_done=done,
            plan_remaining=remaining,
        )

    items: list[ReviewItem] = []
    held = [str(p["id"]) for p in plan.get("parked") or [] if p.get("held_for")]
    ending = str(result.get("stop_reason", "")).split(":", 1)[0]
    if result and held and ending in REOPENED_BY_REVIEW:
        # resumable (result.json says so), but only after the review queue is resolved
        why = (
            f"{result.get('stop_reason')}: {result.get('message')} (once the effects "
            f"{', '.join(held)} wait(s) for are resolved, `overnight resume` runs it again)"
        )
        items.append(item(f"run:{run_id}", "run waits for review", why))
    elif result and not result.get("resumable") and result.get("status") != "SUCCESS":
        why = f"{result.get('stop_reason')}: {result.get('message')}"
        items.append(item(f"run:{run_id}", "run not resumable", why))
    for p in plan.get("parked") or []:
        kind = "partially applied" if "partially applied" in p.get("reason", "") else "parked"
        if p.get("held_for"):
            kind = "held for an effect of unknown outcome"
        said = one_line(clip(str(p.get("detail", "")), 300, f"{rd.path}/artifacts"))
        why = one_line(f"{p['id']}: {p['reason']}. {said}")
        items.append(item(f"parked:{run_id}:{p['id']}", kind, why))
    for e in unsettled:
        error = e.error if e.state in UNSETTLED else None
        why = (
            f"{e.tool}({e.args}) for task {e.task_id}, state {e.state}: "
            f"{error or 'no answer recorded'}"
        )
        effect = item(f"effect:{e.step_key}", EFFECT_KIND, why)
        effect.effect_key = e.step_key
        if review_outcome(e) is not None:
            effect.effect_resolved = f"{review_outcome(e)}: {e.result.get('note', '')}"
        items.append(effect)
    return items


def _rows_of(rd: RunDir, run_id: str, ledger: EffectStore | None) -> list[EffectRow]:
    if ledger is not None:
        return ledger.for_run(run_id)
    db_path = _effects_path(rd)
    if not db_path.exists():
        return []
    store = SqliteEffectStore(db_path)
    try:
        return store.for_run(run_id)
    finally:
        store.close()


def queue(
    root: Path | None,
    db: EffectStore,
    *,
    include_resolved: bool = False,
    runs: list[RunDir] | None = None,
    ledger: EffectStore | None = None,
) -> list[ReviewItem]:
    """The open items (all with ``include_resolved``) of the runs under ``root`` (or of
    ``runs``), their resolutions kept in ``db``, their effects in ``ledger`` when given."""
    resolved = db.resolutions()
    out: list[ReviewItem] = []
    for rd in runs if runs is not None else run_dirs(root):
        for item in items_of(rd, ledger):
            item.resolved = resolved.get(item.id)
            if item.effect_key is not None:  # the ledger says whether it is settled
                item.resolved = item.effect_resolved
            if include_resolved or item.resolved is None:
                out.append(item)
    return out


def resolve(
    root: Path | None,
    db: EffectStore,
    item_id: str,
    note: str,
    *,
    runs: list[RunDir] | None = None,
    ledger: EffectStore | None = None,
    outcome: EffectVerdict | None = None,
) -> ReviewItem:
    """Record ``note`` for ``item_id``; an effect item needs ``outcome`` too, which settles
    its row in the ledger (see the module)."""
    for item in queue(root, db, include_resolved=True, runs=runs, ledger=ledger):
        if item.id == item_id:
            if not note.strip():
                raise ConfigError("--note", "a resolution needs a note", "say what was done")
            if item.effect_key is not None:
                _settle_effect(item, ledger, outcome, note)
            elif outcome is not None:
                raise ConfigError(
                    "--happened",
                    f"{item_id} is not an effect: there is nothing to say happened or not",
                    "resolve it with --note alone",
                )
            db.resolve(item_id, note)
            item.resolved = note
            return item
    raise ConfigError("ITEM", f"no review item {item_id!r}", "run `overnight review` for the ids")


def _settle_effect(
    item: ReviewItem, ledger: EffectStore | None, outcome: EffectVerdict | None, note: str
) -> None:
    """Settle the row of an effect item as a person found it, with the run's lock held (a
    running night may still be waiting on the call)."""
    assert item.effect_key is not None
    if outcome is None:
        raise ConfigError(
            "--happened",
            f"{item.id} is an effect of unknown outcome: say what became of it",
            "check with the provider, then pass --happened or --not-happened with the --note",
        )
    rd = RunDir(Path(item.run_dir))
    lock = RunLock(rd)
    lock.acquire()  # RunBusy (a ConfigError) while a process drives the run
    store = ledger or SqliteEffectStore(_effects_path(rd))
    try:
        row = store.get(item.effect_key)
        if row is None:
            raise ConfigError("ITEM", f"the ledger has no effect {item.effect_key!r}")
        earlier = review_outcome(row)
        if earlier is None and row.state not in UNSETTLED:
            raise ConfigError("ITEM", f"{item.id} is settled already ({row.state})")
        if earlier is not None and earlier != outcome:
            raise ConfigError(
                "--happened",
                f"{item.id} was already resolved as {earlier.replace('_', ' ')}",
                "a resolution is not changed; record a note on the run instead",
            )
        if earlier is None:
            mark = {REVIEW_MARK: outcome, "note": note}
            if outcome == "happened":
                store.settle(row.step_key, "confirmed", result=mark)
            else:
                error = f"did not happen (resolved in review: {note})"
                store.settle(row.step_key, "failed", result=mark, error=error)
    finally:
        if ledger is None:
            store.close()
        lock.release()


def render(items: list[ReviewItem]) -> str:
    if not items:
        return "The review queue is empty."
    lines: list[str] = []
    for item in items:
        mark = f" [resolved: {item.resolved}]" if item.resolved else ""
        lines.append(f"{item.id}  ({item.kind}){mark}")
        lines.append(f"    {item.summary}")
        if item.effects_done:
            lines.append("    effects that happened: " + "; ".join(item.effects_done))
        if item.plan_remaining:
            lines.append("    not done: " + ", ".join(item.plan_remaining))
        lines.append(f"    run: {item.run_dir}")
    return "\n".join(lines)
