"""The search tools: list the worktree's files (``list_files``) and search their text
(``search_text``).

The worktree's files are what the harness's own walk finds that the worktree's
``.gitignore`` files do not ignore (no git reads the tree); ``.git`` is never listed. Outputs
are bounded (the constants below) so that one call cannot flood the model's context.

The patterns are the model's, so none is evaluated by a backtracking engine in the harness
process: globs go to ``overnight.core.globs`` (an automaton, linear in the path), and the
regular expression of ``search_text`` goes to ripgrep (``rg``, a linear-time engine), which
runs in the night's sandbox like ``run_command`` (or, unsandboxed, in a subprocess), bounded
by the tool's time limit and the night's clock and ended at once by a stop. The harness picks
the files (inside the worktree, no link out of it, text, not too big) and hands ripgrep their
names; ripgrep only matches.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overnight import process
from overnight.core import globs
from overnight.core.errors import RunError
from overnight.core.ignore import MAX_IGNORE_FILE_BYTES, IgnoreStack, PatternTooLarge, read_rules
from overnight.seams import ToolContext, ToolError, ToolOutcome
from overnight.tools.args import optional_str_arg, str_arg
from overnight.tools.files import BINARY_SNIFF_BYTES, looks_binary
from overnight.tools.paths import display, is_git_name, real_root, resolve_inside
from overnight.tools.run_command import artifact_name

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
#: search_text: most file names handed to one ripgrep run (more run in several).
SEARCH_BATCH_FILES = 1000
#: search_text: most characters of file names handed to one ripgrep run.
SEARCH_BATCH_CHARS = 64_000
#: The ripgrep program, looked up on PATH.
RIPGREP = "rg"
#: list_files / search_text: the clock and a stop are checked once per this many paths.
_CHECK_EVERY = 256
#: list_files / search_text: most file names of the worktree the harness holds at once.
LISTING_MAX_FILES = 200_000


def _existing_dir(path: Path, shown: str) -> None:
    if not path.exists():
        raise ToolError(f"{shown} does not exist; use list_files on '.' to see what there is")
    if not path.is_dir():
        raise ToolError(f"{shown} is a file, not a directory; use read_file to read it")


def workspace_files(root: Path) -> list[str]:
    """Every file of the worktree as a sorted list of relative ``/`` paths, at most
    LISTING_MAX_FILES of them (``workspace_listing`` also says whether it stopped there)."""
    return workspace_listing(root)[0]


def workspace_listing(root: Path) -> tuple[list[str], bool]:
    """The worktree's files as a sorted list of relative ``/`` paths, and whether the list
    stopped at LISTING_MAX_FILES (the model can make millions of files; the harness holds a
    bounded number of names).

    The harness walks the tree itself (never following a link) and leaves out what the
    worktree's ``.gitignore`` files ignore, read by its own linear-time matcher
    (:mod:`overnight.core.ignore`): no git, and no other program, reads the files the model
    wrote. Nothing named ``.git`` is listed or entered; directories are not listed (symbolic
    links to directories are).
    """
    top = real_root(root)
    found: list[str] = []
    stack: list[tuple[str, IgnoreStack]] = [("", IgnoreStack())]
    while stack and len(found) < LISTING_MAX_FILES:
        rel, ignores = stack.pop()
        below: list[tuple[str, IgnoreStack]] = []
        path = top / rel if rel else top
        try:
            with os.scandir(path) as it:
                names = sorted(e.name for e in it)
        except OSError:
            continue
        ignores = _with_ignore_file(path, rel, ignores)
        for name in names:
            if is_git_name(name):
                continue
            child = f"{rel}/{name}" if rel else name
            try:
                st = os.lstat(path / name)
            except OSError:
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            if ignores.ignored(child, is_dir):
                continue
            if is_dir:
                below.append((child, ignores))
                continue
            found.append(child)
            if len(found) >= LISTING_MAX_FILES:
                break
        stack.extend(reversed(below))
    unique = set(found)
    return sorted(unique), len(unique) >= LISTING_MAX_FILES


def _with_ignore_file(path: Path, rel: str, ignores: IgnoreStack) -> IgnoreStack:
    """``ignores`` with the directory's own ``.gitignore`` on top (not one that is a link or
    too large to be an ignore file, as the candidate reads them)."""
    try:
        fd = os.open(path / ".gitignore", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return ignores
    try:
        if os.fstat(fd).st_size > MAX_IGNORE_FILE_BYTES:
            return ignores
        data = os.read(fd, MAX_IGNORE_FILE_BYTES)
    finally:
        os.close(fd)
    try:
        return ignores.push(read_rules(data, rel))
    except PatternTooLarge:
        return ignores


def _files_under(ctx: ToolContext, base: Path) -> tuple[list[str], bool]:
    """The files under ``base``, and whether the worktree's listing stopped short."""
    prefix = display(ctx.root, base)
    everything, cut = workspace_listing(ctx.root)
    if prefix == ".":
        return everything, cut
    return [rel for rel in everything if rel.startswith(prefix + "/")], cut


def _cut_note() -> str:
    return (
        f"the worktree holds more than {LISTING_MAX_FILES} files; only the first "
        f"{LISTING_MAX_FILES} in the listing's order were considered"
    )


def _matcher(pattern: str) -> Callable[[str, str], bool]:
    """``overnight.core.globs.glob_matcher``, with a bad pattern as a tool error."""
    try:
        return globs.glob_matcher(pattern)
    except globs.GlobError as exc:
        raise ToolError(f"{exc}; leave the pattern out to match every file") from None


def _relative_to_base(rel_root: str, base_shown: str) -> str:
    return rel_root if base_shown == "." else rel_root[len(base_shown) + 1 :]


def _checked(items: list[str], ctx: ToolContext, deadline: float, what: str) -> Iterator[str]:
    """``items``, checking now and then that the run is not stopping and that ``deadline``
    (``time.monotonic``) and the night's clock have not passed."""
    for index, item in enumerate(items):
        if index % _CHECK_EVERY == 0:
            stopping = ctx.stop_requested()
            if stopping is not None:
                raise ToolError(f"the run is stopping ({stopping}); {what} was stopped")
            if time.monotonic() > deadline or ctx.seconds_left() <= 0:
                raise ToolError(f"{what} ran out of time; narrow it with path or pattern")
        yield item


def _filtered(
    files: list[str], pattern: str, shown: str, ctx: ToolContext, deadline: float, what: str
) -> list[str]:
    matches = _matcher(pattern)
    return [
        f for f in _checked(files, ctx, deadline, what) if matches(f, _relative_to_base(f, shown))
    ]


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
        files, cut = _files_under(ctx, base)
        if pattern is not None:
            deadline = time.monotonic() + SEARCH_MAX_SECONDS
            files = _filtered(files, pattern, shown, ctx, deadline, "the listing")
        cut_note = f"\n[{_cut_note()}]" if cut else ""
        if not files:
            where = f" matching {pattern!r}" if pattern is not None else ""
            return ToolOutcome(f"no files{where} under {shown}{cut_note}")
        text = "\n".join(files[:LIST_MAX_ENTRIES])
        if len(files) > LIST_MAX_ENTRIES:
            text += (
                f"\n[{LIST_MAX_ENTRIES} of {len(files)} files shown; narrow the listing with "
                "path or pattern]"
            )
        return ToolOutcome(text + cut_note)


# --------------------------------------------------------------------------- search_text


def _ripgrep() -> str:
    found = shutil.which(RIPGREP)
    if found is None:
        raise ToolError(
            "search_text needs ripgrep (rg), which is not installed on this machine; tell the "
            "user to install it (Debian and Ubuntu: apt-get install ripgrep, or run "
            "scripts/system-deps). Meanwhile use list_files and read_file"
        )
    return found


def _rg_argv(rg: str, pattern: str, paths: list[str]) -> list[str]:
    """ripgrep's command line: no configuration file, one thread (the output follows the
    order of ``paths``), ``path NUL line:text`` per match, the pattern as one argument after
    ``--regexp=`` and the paths after ``--``; ripgrep does not follow links (the harness has
    already refused those leading out of the worktree)."""
    return [
        rg,
        "--no-config",
        "--no-heading",
        "--with-filename",
        "--line-number",
        "--null",
        "--color=never",
        "--threads=1",
        "--no-messages",
        "--text",
        "--crlf",
        f"--max-count={SEARCH_MAX_MATCHES}",
        f"--max-columns={SEARCH_MAX_LINE_CHARS * 4}",
        "--max-columns-preview",
        f"--regexp={pattern}",
        "--",
        *paths,
    ]


def _batches(paths: list[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    chars = 0
    for path in paths:
        if batch and (len(batch) >= SEARCH_BATCH_FILES or chars + len(path) > SEARCH_BATCH_CHARS):
            yield batch
            batch, chars = [], 0
        batch.append(path)
        chars += len(path) + 1
    if batch:
        yield batch


@dataclass
class _Found:
    lines: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    too_big: int = 0
    outside: int = 0
    stopped: str = ""
    listing_cut: bool = False


def _read_matches(log: Path, found: _Found) -> None:
    """Add the matches of one ripgrep output file to ``found``, one line at a time (a line is
    short: ripgrep cuts long ones), up to SEARCH_MAX_MATCHES; other lines are its messages."""
    with open(log, "rb") as handle:
        while len(found.lines) < SEARCH_MAX_MATCHES:
            raw = handle.readline(1 << 16)
            if not raw:
                return
            record = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            path, nul, rest = record.partition("\0")
            number, colon, body = rest.partition(":")
            if not (nul and colon and number.isdigit()):
                if len(found.messages) < 20:
                    found.messages.append(record[:SEARCH_MAX_LINE_CHARS])
                continue
            body = body.rstrip("\r")
            if len(body) > SEARCH_MAX_LINE_CHARS:
                body = body[:SEARCH_MAX_LINE_CHARS] + " [...]"
            found.lines.append(f"{path}:{number}: {body}")


class SearchTextTool:
    name = "search_text"
    description = (
        "Search the text files of the repository for a regular expression (ripgrep's syntax, "
        "as in Rust's regex crate: no backreferences or look-around; matched line by line; "
        "use `(?i)` for case-insensitive). Returns `path:line: text` for each matching line. "
        "`path` limits the search to a directory or one file; `glob` to file names or paths "
        "(as in list_files). Files ignored by git, binary files and files over "
        f"{SEARCH_MAX_FILE_BYTES >> 20} MB are skipped. At most {SEARCH_MAX_MATCHES} matches "
        "per call."
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
        if "\x00" in pattern:
            raise ToolError("the pattern contains a NUL character; search for text without it")
        rg = _ripgrep()
        target = resolve_inside(ctx.root, str_arg(args, "path", "."))
        shown = display(ctx.root, target)
        if not target.exists():
            raise ToolError(f"{shown} does not exist; use list_files to see what there is")
        glob = optional_str_arg(args, "glob")
        deadline = time.monotonic() + SEARCH_MAX_SECONDS
        candidates, cut = _files_under(ctx, target) if target.is_dir() else ([shown], False)
        if glob is not None:
            candidates = _filtered(candidates, glob, shown, ctx, deadline, "the search")
        found = _Found(listing_cut=cut)
        paths = self._searchable(ctx, candidates, deadline, found)
        top = real_root(ctx.root)
        # With no file to search, ripgrep still reads the pattern (on an empty input), so that a
        # pattern it refuses is an error whatever the files.
        batches = list(_batches(paths)) or [[os.devnull]]
        for number, batch in enumerate(batches):
            if len(found.lines) >= SEARCH_MAX_MATCHES or found.stopped:
                break
            log = ctx.artifacts / f"{artifact_name(ctx.call_id)}.search-{number}.log"
            try:
                self._run_rg(ctx, rg, pattern, batch, top, log, deadline, found)
            finally:
                with contextlib.suppress(OSError):
                    log.unlink(missing_ok=True)
        return ToolOutcome(_report(found, pattern, shown, glob))

    @staticmethod
    def _searchable(
        ctx: ToolContext, candidates: list[str], deadline: float, found: _Found
    ) -> list[str]:
        """The candidates ripgrep may read: inside the worktree through every link, regular,
        not too big, not binary (by their first bytes), with a name ripgrep's output can
        carry unambiguously (no newline)."""
        kept: list[str] = []
        for rel in _checked(candidates, ctx, deadline, "the search"):
            try:
                path = resolve_inside(ctx.root, rel)
            except ToolError:
                found.outside += 1
                continue
            if "\n" in rel or "\r" in rel:
                continue
            try:
                if not path.is_file():
                    continue
                if path.stat().st_size > SEARCH_MAX_FILE_BYTES:
                    found.too_big += 1
                    continue
                with open(path, "rb") as handle:
                    head = handle.read(BINARY_SNIFF_BYTES)
            except OSError:
                continue
            if not looks_binary(head):
                kept.append(rel)
        return kept

    @staticmethod
    def _run_rg(
        ctx: ToolContext,
        rg: str,
        pattern: str,
        batch: list[str],
        top: Path,
        log: Path,
        deadline: float,
        found: _Found,
    ) -> None:
        timeout = min(deadline - time.monotonic(), ctx.seconds_left())
        if not timeout > 0:
            found.stopped = (
                f"search stopped after {SEARCH_MAX_SECONDS:g} s; narrow it with path or glob"
            )
            return
        try:
            confine = ctx.confine()
            result = process.run_command(
                _rg_argv(rg, pattern, batch),
                cwd=top,
                timeout_s=timeout,
                env=None if confine is not None else process.scrubbed_env(),
                confine=confine,
                should_stop=ctx.stop_requested,
                log_path=log,
                max_output=0,
            )
        except (RunError, OSError) as exc:
            raise ToolError(f"the search could not be run: {exc}") from None
        if result.interrupted:
            stopping = ctx.stop_requested() or "stop"
            raise ToolError(f"the run is stopping ({stopping}); the search was stopped")
        before = len(found.lines)
        _read_matches(log, found)
        if result.timed_out:
            found.stopped = (
                f"search stopped after {result.seconds:.1f} s; narrow it with path or glob"
            )
        elif result.exit_code not in (0, 1) and len(found.lines) == before:
            said = "; ".join(_plain(found.messages)) or f"ripgrep exit code {result.exit_code}"
            raise ToolError(
                f"invalid regular expression {pattern!r} "
                f"(ripgrep says: {said}); patterns use ripgrep's syntax: escape special "
                "characters such as ( [ . * with a backslash; backreferences and look-around "
                "are not supported"
            )
        if len(found.lines) >= SEARCH_MAX_MATCHES:
            found.stopped = (
                f"stopped at {SEARCH_MAX_MATCHES} matches; narrow the pattern, path or glob"
            )


def _plain(messages: list[str]) -> list[str]:
    """ripgrep's error lines without its hints about flags the model cannot pass."""
    return [
        m.strip() for m in messages if m.strip() and not m.startswith(_FLAG_HINTS) and "--" not in m
    ]


_FLAG_HINTS = ("Consider enabling", "When multiline mode", "regex parse error", "and look-around")


def _report(found: _Found, pattern: str, shown: str, glob: str | None) -> str:
    notes = [found.stopped] if found.stopped else []
    if found.too_big:
        notes.append(
            f"{found.too_big} file(s) over {SEARCH_MAX_FILE_BYTES >> 20} MB skipped; "
            "read them with read_file"
        )
    if found.outside:
        notes.append(f"{found.outside} link(s) to outside the workspace skipped")
    if found.listing_cut:
        notes.append(_cut_note())
    if not found.lines:
        where = f" in files matching {glob!r}" if glob is not None else ""
        text = f"no matches for {pattern!r} under {shown}{where}"
    else:
        text = "\n".join(found.lines)
    return text + "".join(f"\n[{note}]" for note in notes)
