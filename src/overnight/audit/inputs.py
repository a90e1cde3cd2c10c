"""The raw files of a run, read once and never written: the manifest, the spec the run used,
the checkpoint (snapshot and journal, through ``load_run_state``), the spend journal, the
trace, the effects ledger (opened read-only) and, to be judged, ``result.json``."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from overnight.config.spec import Spec
from overnight.core.errors import CheckpointCorrupt, ConfigError
from overnight.core.state import RunState
from overnight.seams import EffectRow
from overnight.store.journal import read_intact_records, read_journal
from overnight.store.result import TerminalResult
from overnight.store.run_state import load_run_state
from overnight.store.rundir import RunDir, read_json


class Unreadable(Exception):
    """A raw file the audit needs cannot be read: nothing the result says can be backed by
    it. ``name`` is the check that disagrees."""

    def __init__(self, name: str, detail: str) -> None:
        self.name = name
        self.detail = detail
        super().__init__(f"{name}: {detail}")


@dataclass(frozen=True)
class RunFiles:
    run_dir: RunDir
    manifest: dict[str, Any]
    spec: Spec
    state: RunState
    spend: list[dict[str, Any]]
    trace: list[dict[str, Any]]
    result: TerminalResult
    effects: list[EffectRow]
    """The ledger's rows of this run, in the order they were written."""
    effects_path: Path

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id", self.state.run_id))

    @property
    def workspace(self) -> Path:
        return Path(str(self.manifest.get("workspace") or self.spec.workspace_path()))

    @property
    def branch(self) -> str:
        return str(self.manifest.get("branch") or self.state.branch)


def check_run_dir(path: Path) -> RunDir:
    """The run directory at ``path``; a ``ConfigError`` (exit 64) when it is none or the run
    has no result to audit yet."""
    rd = RunDir(path)
    if not rd.is_run():
        raise ConfigError(
            "RUN",
            f"{path} is not an overnight run directory (no run.json and spec.json)",
            "pass a run directory, or a run id from `overnight list`",
        )
    if not rd.result.exists():
        raise ConfigError(
            "RUN",
            f"{path} has no result.json to audit (still running, or stopped without one)",
            f"wait for it to end, or `overnight resume {path}`, then audit it",
        )
    return rd


def _json_file(path: Path, name: str) -> Any:
    try:
        return read_json(path)
    except (OSError, ValueError) as exc:
        raise Unreadable(name, f"{path.name} cannot be read: {exc}") from None


def read_run(rd: RunDir) -> RunFiles:
    """Every raw file of the run; ``Unreadable`` names the first one that cannot be read."""
    manifest = _json_file(rd.manifest, "run.json")
    if not isinstance(manifest, dict):
        raise Unreadable("run.json", "run.json is not an object")
    try:
        spec = Spec.model_validate(_json_file(rd.spec, "spec.json"))
    except ValidationError as exc:
        raise Unreadable("spec.json", f"spec.json is not a valid spec: {exc}") from None
    try:
        result = TerminalResult.model_validate(_json_file(rd.result, "result.json"))
    except ValidationError as exc:
        raise Unreadable("result.json", f"result.json does not fit its schema: {exc}") from None
    try:
        state = load_run_state(rd.checkpoint)
    except CheckpointCorrupt as exc:
        raise Unreadable("checkpoint", f"the checkpoint cannot be trusted: {exc}") from None
    if state is None:
        raise Unreadable("checkpoint", "the run has no checkpoint: nothing backs its result")
    try:
        spend = read_journal(rd.spend)
    except CheckpointCorrupt as exc:
        raise Unreadable("spend.jsonl", f"the spend journal is damaged: {exc}") from None
    effects_path = spec.effects_path(rd.path)
    try:
        effects = ledger_rows(effects_path, str(manifest.get("run_id", state.run_id)))
    except sqlite3.Error as exc:
        raise Unreadable(
            "effects", f"the effects ledger {effects_path} cannot be read: {exc}"
        ) from None
    return RunFiles(
        run_dir=rd,
        manifest=manifest,
        spec=spec,
        state=state,
        spend=spend,
        trace=read_intact_records(rd.trace),
        result=result,
        effects=effects,
        effects_path=effects_path,
    )


def _loaded(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def ledger_rows(path: Path, run_id: str) -> list[EffectRow]:
    """The effects ledger's rows of ``run_id``, read through a read-only connection; none
    when the ledger was never created (the run attempted no effect)."""
    if not path.exists():
        return []
    db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=30.0)
    try:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT * FROM effects WHERE run_id = ? ORDER BY id", (run_id,))
        return [
            EffectRow(
                run_id=r["run_id"],
                task_id=r["task_id"],
                step_key=r["step_key"],
                task_key=r["task_key"],
                tool=r["tool"],
                args=_loaded(r["args"]),
                state=r["state"],
                result=_loaded(r["result"]),
                error=r["error"],
                created_at=r["created_at"],
                updated_at=r["updated_at"],
            )
            for r in rows.fetchall()
        ]
    finally:
        db.close()
