"""The effects, recomputed: every row the effects ledger holds for the run appears in
``result.json`` with the same tool, task and state, and the result claims no effect the ledger
does not hold (an effect the ledger refused is in the checkpoint instead)."""

from __future__ import annotations

from typing import Any

from overnight.audit.findings import AuditCheck, check
from overnight.audit.inputs import RunFiles


def _label(tool: Any, task: Any, key: Any) -> str:
    return f"{tool} of {task} (key {key})"


def _refusal(entry: dict[str, Any]) -> tuple[Any, ...]:
    return (entry.get("tool"), entry.get("task"), entry.get("task_key"), entry.get("error"))


def effects_check(files: RunFiles) -> AuditCheck:
    claimed = files.result.effects
    by_key: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for entry in claimed:
        if entry.get("state") == "refused":
            continue
        key = str(entry.get("key"))
        if key in by_key:
            problems.append(
                f"result.json lists {_label(entry.get('tool'), entry.get('task'), key)} twice"
            )
        by_key[key] = entry
    for row in files.effects:
        label = _label(row.tool, row.task_id, row.step_key)
        if row.step_key not in by_key:
            problems.append(f"{label}: {row.state} in the ledger, missing from result.json")
            continue
        listed = by_key.pop(row.step_key)
        for field, ours in (("state", row.state), ("tool", row.tool), ("task", row.task_id)):
            if listed.get(field) != ours:
                problems.append(
                    f"{label}: {field} {listed.get(field)!r} in result.json, {ours!r} in the ledger"
                )
    for key, entry in by_key.items():
        problems.append(
            f"{_label(entry.get('tool'), entry.get('task'), key)}: "
            f"{entry.get('state')} in result.json, not in the ledger"
        )
    refused_claimed = sorted(
        map(_refusal, (e for e in claimed if e.get("state") == "refused")), key=repr
    )
    refused_ours = sorted(map(_refusal, files.state.refused_effects), key=repr)
    if refused_claimed != refused_ours:
        problems.append(
            f"result.json lists {len(refused_claimed)} refused effect(s), the checkpoint "
            f"{len(refused_ours)}"
        )
    states: dict[str, int] = {}
    for row in files.effects:
        states[row.state] = states.get(row.state, 0) + 1
    counts = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none"
    detail = f"{len(files.effects)} ledger row(s) in {files.effects_path.name}: {counts}"
    return check("effects", "effects", not problems, "; ".join([detail, *problems[:8]]))
