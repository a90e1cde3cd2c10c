"""The runs an estimate learns from: workload facts written into the run index at every
ending (``overnight.night.workload_record``), rebuilt from the trace of a run that ended
before runs recorded them.

The only part of ``estimate/`` that reads files (run directories, the index) and runs git
(``workspace_of``: to know a workspace by its remote and its first commit's tree).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from overnight.core.errors import ConfigError
from overnight.night.workload import FACTS_VERSION, WorkloadFacts
from overnight.night.workload_record import facts_of_run, model_origin, workspace_of
from overnight.store.index import indexed_runs, resolve_run, workload_records
from overnight.store.rundir import RunDir, read_json


def _parse(data: dict[str, Any]) -> WorkloadFacts | None:
    if data.get("version") != FACTS_VERSION:
        return None
    try:
        return WorkloadFacts.model_validate(data)
    except ValidationError:
        return None


def recorded_workloads() -> list[WorkloadFacts]:
    """Every indexed run's workload, oldest first: as recorded at its ending, else rebuilt
    from its trace (a run that has ended but predates the facts)."""
    recorded = workload_records()
    out: list[WorkloadFacts] = []
    for run in indexed_runs():
        data = recorded.get(run.run_id)
        facts = _parse(data) if data is not None else None
        if facts is None and RunDir(run.path).result.exists():
            facts = facts_of_run(run.path)
        if facts is not None and not facts.provider:  # recorded before the origin was kept
            rd = RunDir(run.path)
            try:
                manifest: dict[str, Any] = read_json(rd.manifest)
            except (OSError, ValueError, ConfigError):
                manifest = {}
            provider, source = model_origin(rd, manifest)
            facts = facts.model_copy(update={"provider": provider, "model_source": source})
        if facts is not None:
            out.append(facts)
    return out


#: The providers whose nights are the user's own: a scripted (``script``), ``python`` or
#: replayed night answers from a fixed text and says nothing of what a real model costs.
LEARNABLE_PROVIDERS = ("anthropic", "openai", "openai-compatible")


def learnable(facts: WorkloadFacts) -> bool:
    """A night of a real provider whose own model answered (not one a caller handed in, not a
    replay); a record from before the source was kept counts when its provider is real."""
    return facts.provider in LEARNABLE_PROVIDERS and facts.model_source in ("spec", "")


def named_workloads(names: Sequence[str]) -> list[WorkloadFacts]:
    """The runs given by ``--from``: run directories or run ids."""
    recorded = workload_records()
    out: list[WorkloadFacts] = []
    for name in names:
        path = resolve_run(name)
        data = recorded.get(str(read_json(RunDir(path).manifest).get("run_id", "")))
        facts = _parse(data) if data is not None else None
        facts = facts or facts_of_run(path)
        if facts is None or not facts.tasks:
            raise ConfigError(
                "--from", f"run {name} recorded no task to learn from", "name a run that ran tasks"
            )
        out.append(facts)
    return out


def history_for(workspace: Path, model: str | None) -> tuple[list[WorkloadFacts], str]:
    """The recorded runs of the same workspace that ran tasks, of the same model when there
    are any; and how they were chosen."""
    here = workspace_of(workspace)
    ran = [f for f in recorded_workloads() if f.tasks and here.same_as(f.workspace)]
    same = [f for f in ran if learnable(f)]
    rehearsals = len(ran) - len(same)
    left_out = (
        f"; {rehearsals} scripted, python or replayed night(s) not counted" if rehearsals else ""
    )
    if not ran:
        return [], "no recorded run of this workspace"
    if not same:
        return [], f"no recorded night of this workspace on a real provider{left_out}"
    if model is not None:
        of_model = [f for f in same if model in f.models]
        if of_model:
            return of_model, f"{_nights(of_model)} of this workspace with model {model}{left_out}"
        return [], (
            f"no recorded night of this workspace used {model} (its {_nights(same)} used "
            f"{', '.join(sorted({m for f in same for m in f.models[:1]}))}){left_out}"
        )
    return same, f"{_nights(same)} of this workspace{left_out}"


def _nights(runs: Sequence[WorkloadFacts]) -> str:
    return f"{len(runs)} recorded night{'s' if len(runs) != 1 else ''}"
