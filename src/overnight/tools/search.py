"""The search tools: list the worktree's files (``list_files``) and search their text
(``search_text``).

The worktree's files are what git lists (tracked files and untracked ones that are not
ignored), or a plain walk outside a repository; ``.git`` is never listed. Outputs are bounded
(the constants below) so that one call cannot flood the model's context.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from overnight import process
from overnight.core import globs
from overnight.seams import ToolContext, ToolError, ToolOutcome
from overnight.tools.args import optional_str_arg, str_arg
from overnight.tools.files import looks_binary
from overnight.tools.paths import display, is_git_name, real_root, resolve_inside

#: list_files: most paths returned by one call.
LIST_MAX_ENTRIES = 1000
#: search_text: most matching lines returned by one call.
SEARCH_MAX_MATCHES = 200
#: search_text: a longer matching line is cut.
SEARCH_MAX_LINE_CHARS = 300
#: search_text: larger files are skipped (and counted).
SEARCH_MAX_FILE_BYTES = 4 << 20
#: search_text: the search stops (and says so) after this many seconds.
SEARCH_MAX_SECONDS = 30.0
#: How long ``git ls-files`` may take before list_files walks the tree instead.
GIT_LISTING_TIMEOUT_S = 30.0

#: Variables that would point git somewhere else than the worktree.
_GIT_LOCATION_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


def _existing_dir(path: Path, shown: str) -> None:
    if not path.exists():
        raise ToolError(f"{shown} does not exist; use list_files on '.' to see what there is")
    if not path.is_dir():
        raise ToolError(f"{shown} is a file, not a directory; use read_file to read it")


def workspace_files(root: Path) -> list[str]:
    """Every file of the worktree as a sorted list of relative ``/`` paths.

    Uses ``git ls-files`` (tracked files plus untracked ones that are not ignored) when the
    root is in a git repository, and a plain walk otherwise. Nothing under ``.git`` is ever
    listed; directories are not listed (symbolic links to directories are).
    """
    top = real_root(root)
    listed = _git_listing(top)
    if listed is None:
        listed = _walk_listing(top)
    return sorted(set(listed))


def _git_listing(top: Path) -> list[str] | None:
    env = process.scrubbed_env()
    for name in _GIT_LOCATION_VARS:
        env.pop(name, None)
    env["GIT_OPTIONAL_LOCKS"] = "0"
    command = [
        "git",
        "-c",
        "core.fsmonitor=false",
        "ls-files",
        "--cached",
        "--others",
        "--exclude-standard",
        "-z",
    ]
    try:
        done = subprocess.run(
            command,
            cwd=top,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_LISTING_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    found: list[str] = []
    for raw in done.stdout.split(b"\0"):
        rel = os.fsdecode(raw)
        if not rel or rel.endswith("/") or any(is_git_name(p) for p in rel.split("/")):
            continue
        full = top / rel
        # --cached also lists files deleted from the worktree, and submodule directories.
        if not os.path.lexists(full) or (full.is_dir() and not full.is_symlink()):
            continue
        found.append(rel)
    return found


def _walk_listing(top: Path) -> list[str]:
    found: list[str] = []
    for current, dirnames, filenames in os.walk(top, followlinks=False):
        base = Path(current)
        dirnames[:] = [d for d in dirnames if not is_git_name(d)]
        linked_dirs = [d for d in dirnames if (base / d).is_symlink()]
        for name in [*filenames, *linked_dirs]:
            if is_git_name(name):
                continue
            found.append((base / name).relative_to(top).as_posix())
    return found


def _files_under(ctx: ToolContext, base: Path) -> list[str]:
    prefix = display(ctx.root, base)
    everything = workspace_files(ctx.root)
    if prefix == ".":
        return everything
    return [rel for rel in everything if rel.startswith(prefix + "/")]


def _matcher(pattern: str) -> Callable[[str, str], bool]:
    """``overnight.core.globs.glob_matcher``, with a bad pattern as a tool error."""
    try:
        return globs.glob_matcher(pattern)
    except globs.GlobError as exc:
        raise ToolError(f"{exc}; leave the pattern out to match every file") from None


def _relative_to_base(rel_root: str, base_shown: str) -> str:
    return rel_root if base_shown == "." else rel_root[len(base_shown) + 1 :]


# --------------------------------------------------------------------------- list_files


class ListFilesTool:
    name = "list_files"
    description = (
        "List the files of the repository (or of one directory of it), one relative path per "
        "line, sorted. Files ignored by git and the .git directory are left out. `pattern` is "
        "a glob: without a '/' it matches file names at any depth (`*.py`, `test_*`); with a "
        "'/' it matches the path (`src/**/*.py`). `**` crosses directories, `{a,b}` picks one "
        f"of several. At most {LIST_MAX_ENTRIES} paths per call."
    )
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "Directory to list, relative to the repository. Default '.'.",
            },
            "pattern": {"type": "string", "description": "Glob the paths must match."},
        },
        "additionalProperties": False,
    }
    mutating = False

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        base = resolve_inside(ctx.root, str_arg(args, "path", "."))
        shown = display(ctx.root, base)
        _existing_dir(base, shown)
        pattern = optional_str_arg(args, "pattern")
        files = _files_under(ctx, base)
        if pattern is not None:
            matches = _matcher(pattern)
            files = [f for f in files if matches(f, _relative_to_base(f, shown))]
        if not files:
            where = f" matching {pattern!r}" if pattern is not None else ""
            return ToolOutcome(f"no files{where} under {shown}")
        text = "\n".join(files[:LIST_MAX_ENTRIES])
        if len(files) > LIST_MAX_ENTRIES:
            text += (
                f"\n[{LIST_MAX_ENTRIES} of {len(files)} files shown; narrow the listing with "
                "path or pattern]"
            )
        return ToolOutcome(text)


# --------------------------------------------------------------------------- search_text


class SearchTextTool:
    name = "search_text"
    description = (
        "Search the text files of the repository for a regular expression (Python `re` "
        "syntax, matched line by line; use `(?i)` for case-insensitive). Returns "
        "`path:line: text` for each matching line. `path` limits the search to a directory "
        "or one file; `glob` to file names or paths (as in list_files). Files ignored by git, "
        f"binary files and files over {SEARCH_MAX_FILE_BYTES >> 20} MB are skipped. At most "
        f"{SEARCH_MAX_MATCHES} matches per call."
    )
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "minLength": 1, "description": "Regular expression."},
            "path": {
                "type": "string",
                "description": "Directory or file to search, relative to the repository. "
                "Default '.'.",
            },
            "glob": {"type": "string", "description": "Glob the searched files must match."},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    mutating = False

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        pattern = str_arg(args, "pattern")
        if not pattern:
            raise ToolError("the pattern is empty; give a regular expression to search for")
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(
                f"invalid regular expression {pattern!r}: {exc}; patterns use Python's re "
                "syntax (escape special characters such as ( [ . * with a backslash)"
            ) from None
        target = resolve_inside(ctx.root, str_arg(args, "path", "."))
        shown = display(ctx.root, target)
        if not target.exists():
            raise ToolError(f"{shown} does not exist; use list_files to see what there is")
        glob = optional_str_arg(args, "glob")
        candidates = _files_under(ctx, target) if target.is_dir() else [shown]
        if glob is not None:
            matches = _matcher(glob)
            candidates = [c for c in candidates if matches(c, _relative_to_base(c, shown))]
        return ToolOutcome(self._search(ctx, regex, candidates, shown, glob))

    @staticmethod
    def _search(
        ctx: ToolContext,
        regex: re.Pattern[str],
        candidates: list[str],
        shown: str,
        glob: str | None,
    ) -> str:
        found: list[str] = []
        too_big = outside = 0
        stopped = ""
        deadline = time.monotonic() + SEARCH_MAX_SECONDS
        for rel in candidates:
            if time.monotonic() > deadline:
                stopped = (
                    f"search stopped after {SEARCH_MAX_SECONDS:g} s; narrow it with path or glob"
                )
                break
            try:
                path = resolve_inside(ctx.root, rel)
            except ToolError:
                outside += 1
                continue
            try:
                if not path.is_file():
                    continue
                if path.stat().st_size > SEARCH_MAX_FILE_BYTES:
                    too_big += 1
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            if looks_binary(data):
                continue
            text = data.decode("utf-8", errors="replace")
            for number, line in enumerate(io.StringIO(text, newline=""), start=1):
                if regex.search(line.rstrip("\r\n")) is None:
                    continue
                body = line.rstrip("\r\n")
                if len(body) > SEARCH_MAX_LINE_CHARS:
                    body = body[:SEARCH_MAX_LINE_CHARS] + " [...]"
                found.append(f"{rel}:{number}: {body}")
                if len(found) >= SEARCH_MAX_MATCHES:
                    stopped = (
                        f"stopped at {SEARCH_MAX_MATCHES} matches; narrow the pattern, path or glob"
                    )
                    break
            if len(found) >= SEARCH_MAX_MATCHES:
                break
        notes = [stopped] if stopped else []
        if too_big:
            notes.append(
                f"{too_big} file(s) over {SEARCH_MAX_FILE_BYTES >> 20} MB skipped; "
                "read them with read_file"
            )
        if outside:
            notes.append(f"{outside} link(s) to outside the workspace skipped")
        if not found:
            where = f" in files matching {glob!r}" if glob is not None else ""
            text = f"no matches for {regex.pattern!r} under {shown}{where}"
        else:
            text = "\n".join(found)
        return text + "".join(f"\n[{note}]" for note in notes)
