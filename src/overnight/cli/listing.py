"""``overnight list``: every run started on this machine, newest last, read from the run index
and each run's own files. Light to start: no night, no model.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from overnight.core.text import printable
from overnight.store.index import indexed_runs
from overnight.store.rundir import RunDir, is_locked


def cmd_list(args: argparse.Namespace) -> int:
    rows = []
    for run in indexed_runs():
        rd = RunDir(run.path)
        if not rd.is_run():
            state = "gone"
        elif is_locked(rd):
            state = "running"
        elif rd.result.exists():
            try:
                state = str(json.loads(rd.result.read_text(encoding="utf-8"))["stop_reason"])
            except (OSError, ValueError, KeyError):
                state = "ended (result unreadable)"
        else:
            state = "stopped without a result"
        cleaned = rd.is_run() and not rd.worktree.exists()
        rows.append(
            {
                "run_id": run.run_id,
                "state": state,
                "path": str(run.path),
                "workspace": run.workspace,
                "created_at": run.created_at,
                "cleaned": cleaned,
                "resumable": state not in ("gone", "running") and _resumable(rd.result),
                "replay": _model_source(rd.manifest) == "replay",
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
    elif not rows:
        print("no runs yet")
    else:
        for r in rows:
            mark = " (replay)" if r["replay"] else ""
            mark += " (cleaned)" if r["cleaned"] else ""
            if r["resumable"]:
                mark += f"  resumable: overnight resume {shlex.quote(str(r['path']))}"
            print(printable(f"{r['run_id']}  {r['state']}{mark}\n    {r['path']}"))
    return 0


def _model_source(manifest: Path) -> str:
    """Who answered a run's calls, as its manifest says (``run.json``'s ``model_source``)."""
    try:
        return str(json.loads(manifest.read_text(encoding="utf-8")).get("model_source", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def _resumable(result: Path) -> bool:
    """A run a resume can continue: its result says so, or it stopped without one."""
    if not result.exists():
        return True
    try:
        return bool(json.loads(result.read_text(encoding="utf-8")).get("resumable"))
    except (OSError, ValueError, AttributeError):
        return False
