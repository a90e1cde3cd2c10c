"""``overnight clean``: what finished nights leave in the user's repository, removed.

A run's worktree and verify checkout go once it has ended and cannot be resumed (a resumable
run's too with ``--all``); its branch ``overnight/<run-id>`` goes when it holds no commit beyond
the commit the night started from. Kept, and said why: a running night (nothing of it), a run
a resume could continue (its branch always, its worktree without ``--all``), a branch with a
commit beyond its base (whoever made it), a branch checked out somewhere, and with
``--older-than`` every run that ended (or, without a result, started) more recently.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from overnight.core.errors import ConfigError
from overnight.core.text import printable
from overnight.effects.review import run_dirs
from overnight.night import git
from overnight.night import worktree as ws
from overnight.store.rundir import RunDir, is_locked


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _when(text: object) -> datetime | None:
    try:
        found = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def _ago(seconds: float) -> str:
    if seconds < 2 * 3600:
        return f"{max(0, round(seconds / 60))} min"
    if seconds < 2 * 86400:
        return f"{round(seconds / 3600)} h"
    return f"{round(seconds / 86400)} days"


@dataclass(frozen=True)
class Branch:
    """A run's branch in the user's repository, as it stands now."""

    repo: Path
    name: str
    tip: str
    beyond: int | None
    """Commits reachable from the branch and not from the night's base commit; None when
    that base cannot be read."""
    checked_out: Path | None
    """A worktree (not the run's own) that has the branch checked out."""


def _branch(
    rd: RunDir, manifest: dict[str, Any], result: dict[str, Any], *, dry_run: bool
) -> tuple[Branch | None, str]:
    """The run's branch, or None and why there is nothing to decide about one. In a dry run
    the run's own worktree still holds the branch: it would be gone first."""
    block = result.get("branch") or {}
    name = str(block.get("name") or manifest.get("branch") or "")
    base = str(block.get("base_commit") or "")
    try:
        repo = ws.check_repository(Path(str(manifest.get("workspace", ""))))
    except ConfigError:
        return None, "its repository is gone"
    if not name.startswith("overnight/"):
        return None, f"{name!r} is not a night's branch"
    ref = f"refs/heads/{name}"
    tip = git.answer(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if not tip:
        return None, "no branch"
    counted = git.answer(repo, "rev-list", "--count", f"{base}..{tip}", "--") if base else None
    own = {p.resolve() for p in (rd.worktree, rd.checkout)} if dry_run else set()
    held = None
    for entry in (git.answer(repo, "worktree", "list", "--porcelain") or "").split("\n\n"):
        fields: dict[str, str] = {}
        for line in entry.splitlines():
            key, _, value = line.partition(" ")
            fields[key] = value
        where = Path(fields.get("worktree", "")).resolve()
        if fields.get("branch") == ref and where not in own:
            held = where
    return Branch(repo, name, tip, None if counted is None else int(counted), held), ""


@dataclass
class Tally:
    worktrees: int = 0
    branches: int = 0


def _say(text: str) -> None:
    print(printable(text))


def cmd_clean(args: argparse.Namespace) -> int:
    one = args.run_dir is not None
    runs = [RunDir(args.run_dir)] if one else run_dirs(args.runs)
    if one and not runs[0].is_run():
        raise ConfigError("RUN", f"{runs[0].path} is not an overnight run directory")
    tally = Tally()
    now = datetime.now(UTC)
    for rd in runs:
        _clean_run(rd, args, one=one, now=now, tally=tally)
    if not one and not args.dry_run:
        _say(
            f"{tally.worktrees} worktree(s) and {tally.branches} branch(es) removed; "
            "branches with commits, results and reports are kept"
        )
    return 0


def _clean_run(
    rd: RunDir, args: argparse.Namespace, *, one: bool, now: datetime, tally: Tally
) -> None:
    trees = [p for p in (rd.worktree, rd.checkout) if p.exists()]
    if is_locked(rd):
        if one:
            raise ConfigError(
                "RUN", f"{rd.path} is running", "stop it (SIGTERM) before cleaning it"
            )
        _say(f"kept:    {rd.path} (running)")
        return
    result = _read_json(rd.result) if rd.result.exists() else {}
    manifest = _read_json(rd.manifest)
    ended = f"ended {result.get('stop_reason')}" if result else "has no result yet"
    if args.older_than is not None:
        when = _when(result.get("ended_at")) if result else _when(manifest.get("created_at"))
        if when is None:
            _say(f"kept:    {rd.path} (its age cannot be read; --older-than needs it)")
            return
        if (now - when).total_seconds() < args.older_than.seconds:
            verb = "ended" if result else "started"
            age = _ago((now - when).total_seconds())
            _say(f"kept:    {rd.path} (newer than {args.older_than.text}: {verb} {age} ago)")
            return
    resumable = not result or bool(result.get("resumable"))
    removed_any = False
    if trees and resumable and not args.all:
        if one:
            raise ConfigError(
                "RUN",
                f"{rd.path} {ended} and could be resumed; cleaning removes its worktree",
                "resume it first, or pass --all",
            )
        _say(f"kept:    {rd.path} ({ended}, resumable; --all removes it too)")
    elif trees:
        shown = ", ".join(str(p) for p in trees)
        if args.dry_run:
            _say(f"would remove: {shown} ({ended})")
        else:
            gone = [str(p) for p in trees if ws.remove_worktree(p) or not p.exists()]
            tally.worktrees += len(gone)
            _say(f"removed: {', '.join(gone) or 'nothing'} ({ended})")
        removed_any = True
    branch, why = _branch(rd, manifest, result, dry_run=args.dry_run)
    if branch is None:
        if why and why != "no branch":
            _say(f"kept:    {rd.path} ({why})")
    elif resumable:
        _say(f"kept:    branch {branch.name} (the run could be resumed; a resume needs it)")
    elif branch.beyond is None:
        _say(f"kept:    branch {branch.name} (its base commit cannot be read)")
    elif branch.beyond:
        _say(f"kept:    branch {branch.name} ({branch.beyond} commit(s) beyond its base)")
    elif branch.checked_out is not None:
        _say(f"kept:    branch {branch.name} (checked out in {branch.checked_out})")
    elif args.dry_run:
        _say(f"would remove: branch {branch.name} (it landed nothing)")
        removed_any = True
    else:
        # Only if it still points where it was counted: a commit made meanwhile keeps it.
        ref = f"refs/heads/{branch.name}"
        if git.answer(branch.repo, "update-ref", "-d", ref, branch.tip) is None:
            _say(f"kept:    branch {branch.name} (it moved while being removed)")
        else:
            tally.branches += 1
            _say(f"removed: branch {branch.name} (it landed nothing)")
            removed_any = True
    if one and not removed_any:
        _say("removed: nothing (already clean)")
