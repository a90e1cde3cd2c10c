"""A run's workload facts (``overnight.night.workload``) read from its files and written into
the run index at its ending, for ``overnight estimate`` to learn from
(``overnight.estimate.history``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from overnight.core.errors import ConfigError
from overnight.night import git
from overnight.night.workload import ModelSource, WorkloadFacts, Workspace, workload_facts
from overnight.store.index import record_workload
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


def model_origin(rd: RunDir, manifest: dict[str, Any]) -> tuple[str, ModelSource]:
    """The run's ``[model] provider`` and who answered its calls, from its manifest (a run
    written before the manifest kept them: its spec's provider, the source unknown)."""
    source = manifest.get("model_source")
    provider = manifest.get("provider")
    if not isinstance(provider, str):
        try:
            model = read_json(rd.spec).get("model") or {}
        except (OSError, ValueError, ConfigError):
            model = {}
        provider = str(model.get("provider") or "") if isinstance(model, dict) else ""
    return provider, source if source in ("spec", "caller", "replay") else ""


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
    provider, model_source = model_origin(rd, manifest)
    return workload_facts(
        str(manifest.get("run_id") or path.name),
        read_intact_records(rd.trace),
        workspace_of(Path(workspace)) if workspace else Workspace(path=""),
        verified=[str(v.get("id")) for v in result.get("verified") or []],
        parked=[str(p.get("id") if isinstance(p, dict) else p) for p in plan.get("parked") or []],
        ending=result.get("stop_reason"),
        created_at=str(manifest.get("created_at") or ""),
        source="ending" if source == "ending" else "trace",
        provider=provider,
        model_source=model_source,
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
