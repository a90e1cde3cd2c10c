"""The runs an estimate learns from: workload facts written into the run index at every
ending, rebuilt from the trace of a run that ended before runs recorded them.

The only part of ``estimate/`` that reads files (run directories, the index) and runs git
(to know a workspace by its remote and its first commit's tree).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from overnight.core.errors import ConfigError
from overnight.estimate.facts import FACTS_VERSION, WorkloadFacts, Workspace, workload_facts
from overnight.night import git
from overnight.store.index import indexed_runs, record_workload, resolve_run, workload_records
from overnight.store.journal import read_intact_records
from overnight.store.rundir import RunDir, read_json


def workspace_of(path: Path) -> Workspace:
    """A workspace known by its path, its ``origin`` remote and its first commit's tree."""
    roots = git.answer(path, "rev-list", "--max-parents=0", "HEAD")
    first = roots.split()[-1] if roots else None
    tree = git.answer(path, "rev-parse", f"{first}^{{tree}}") if first else None
    return Workspace(
        path=str(path.absolute()),
        remote=git.answer(path, "config", "--get", "remote.origin.url"),
        root_tree=tree,
    )


def facts_of_run(path: Path, source: str = "trace") -> WorkloadFacts | None:
    """A run directory's workload facts from its trace and result; None when it has no
    trace to read."""
    rd = RunDir(path)
    if not rd.trace.exists():
        return None
    try:
        manifest: dict[str, Any] = read_json(rd.manifest)
    except (OSError, ValueError, ConfigError):
        manifest = {}
    result: dict[str, Any] = {}
    if rd.result.exists():
        try:
            result = read_json(rd.result)
        except (OSError, ValueError, ConfigError):
            result = {}
    plan = result.get("plan") or {}
    workspace = str(manifest.get("workspace") or "")
    return workload_facts(
        str(manifest.get("run_id") or path.name),
        read_intact_records(rd.trace),
        workspace_of(Path(workspace)) if workspace else Workspace(path=""),
        verified=[str(v.get("id")) for v in result.get("verified") or []],
        parked=[str(p.get("id") if isinstance(p, dict) else p) for p in plan.get("parked") or []],
        ending=result.get("stop_reason"),
        created_at=str(manifest.get("created_at") or ""),
        source="ending" if source == "ending" else "trace",
    )


def record_run_workload(path: Path) -> None:
    """Write a run's workload facts into the index at its ending (best effort: a run never
    fails for its index)."""
    try:
        facts = facts_of_run(path, source="ending")
    except (OSError, ValueError, ValidationError):
        return
    if facts is not None:
        record_workload(facts.run_id, facts.model_dump(mode="json"))


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
