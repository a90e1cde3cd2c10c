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
from overnight.night.workload_record import facts_of_run, workspace_of
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
        if facts is not None:
            out.append(facts)
    return out


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
    same = [f for f in recorded_workloads() if f.tasks and here.same_as(f.workspace)]
    if not same:
        return [], "no recorded run of this workspace"
    if model is not None:
        of_model = [f for f in same if model in f.models]
        if of_model:
            return of_model, f"the recorded runs of this workspace with model {model}"
        return same, f"no recorded run of this workspace used {model}: its runs on other models"
    return same, "the recorded runs of this workspace"
