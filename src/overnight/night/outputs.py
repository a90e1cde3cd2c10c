"""What the goal's suite writes into the checkout it runs in: a test's output files, a
coverage database, what the set-up command generates.

The check before the night lists the files present in its clean export of the base commit,
runs the set-up and the predicate there, and keeps the files that appeared
(``written_files``). The night excludes exactly those paths from every candidate
(``overnight.core.candidate_rules``): the agent's own test runs write them too, and any clean
checkout gets them again. They are kept in the run's artifacts (``suite_outputs.json``), read
again when the run resumes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from overnight.store.atomic import write_atomic
from overnight.store.rundir import RunDir

#: Most paths kept: a suite writing more is noted by its first ones.
MAX_OUTPUTS = 1000

#: Directories never walked: git's, and caches the candidate's rules exclude already.
_SKIPPED = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})

_FILE = "suite_outputs.json"


def files_in(where: Path) -> set[str]:
    """Every regular file below ``where`` (relative, ``/``-separated), links not followed."""
    found: set[str] = set()
    for top, dirs, files in os.walk(where, followlinks=False):
        dirs[:] = [d for d in dirs if d not in _SKIPPED]
        rel = os.path.relpath(top, where)
        for name in files:
            path = name if rel == "." else f"{rel}/{name}"
            found.add(path.replace(os.sep, "/"))
    return found


def written_files(where: Path, before: set[str]) -> list[str]:
    """The files below ``where`` that ``before`` did not hold, sorted, at most
    ``MAX_OUTPUTS``."""
    return sorted(files_in(where) - before)[:MAX_OUTPUTS]


def save_outputs(run_dir: RunDir, paths: list[str]) -> None:
    write_atomic(run_dir.artifacts / _FILE, json.dumps(paths).encode(), "the suite's outputs")


def load_outputs(run_dir: RunDir) -> list[str]:
    """The paths kept by ``save_outputs``; none when the file is missing or damaged (a
    candidate then carries them, and what judges the work still screens them)."""
    try:
        data = json.loads((run_dir.artifacts / _FILE).read_bytes())
    except (OSError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    return [p for p in data if isinstance(p, str)][:MAX_OUTPUTS]
