"""The built-in tools: read, list and search the worktree, write and edit files in it, and run
allowlisted commands in it.

Every path goes through ``resolve_inside`` first; every refusal is a ``ToolError`` whose
message says what to do instead. Outputs are bounded so that one call cannot flood the
model's context: the limits are the constants below, and ``run_command`` keeps the full
output of a long command in the run's artifacts.

``run_command`` runs no shell syntax at all. The command is split into words the way a POSIX
shell would (quotes and backslashes), any shell operator outside quotes is refused (``;``,
``&``, ``|``, ``<``, ``>``, ``(``, ``)``, ``$``, backquotes, line breaks), as are ``$`` and
backquotes inside double quotes, where a shell would expand them. The words are then quoted
again one by one before ``/bin/sh`` sees them, so even a character this check missed reaches
the program as a literal: there is no globbing, no variable expansion, no substitution.
Only commands whose first words equal one of the configured prefixes run, and ``git`` never
does, whatever the configuration says: the repository's history belongs to overnight.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from overnight import process
from overnight.core import globs
from overnight.core.errors import RunError
from overnight.seams import ToolContext, ToolError, ToolOutcome
from overnight.tools.paths import display, is_git_name, real_root, resolve_inside

#: read_file: most lines returned by one call.
READ_MAX_LINES = 2000
#: read_file: a longer line is cut (and says so).
READ_MAX_LINE_CHARS = 2000
#: read_file: most characters returned by one call.
READ_MAX_CHARS = 60_000
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
#: A file with a NUL byte in its first this-many bytes is treated as binary.
BINARY_SNIFF_BYTES = 8192
#: How long ``git ls-files`` may take before list_files walks the tree instead.
GIT_LISTING_TIMEOUT_S = 30.0

#: Shell operators refused outside quotes, with how the refusal names them.
_SHELL_OPERATORS: dict[str, str] = {
    ";": "';' (command separator)",
    "&": "'&' (background job or &&)",
    "|": "'|' (pipe or ||)",
    "<": "'<' (redirection)",
    ">": "'>' (redirection)",
    "(": "'(' (subshell)",
    ")": "')' (subshell)",
    "$": "'$' (variable or command substitution)",
    "`": "'`' (command substitution)",
    "\n": "a line break (second command)",
    "\r": "a carriage return",
}
#: Characters a shell would still expand inside double quotes.
_DOUBLE_QUOTE_EXPANSIONS = ("$", "`")

#: Variables that would point git somewhere else than the worktree.
_GIT_LOCATION_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


# --------------------------------------------------------------------------- arguments


def _str_arg(args: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = args.get(key, default)
    if value is None:
        raise ToolError(f"the argument {key!r} is required")
    if not isinstance(value, str):
        raise ToolError(f"the argument {key!r} must be a string, got {type(value).__name__}")
    return value


def _opt_str_arg(args: Mapping[str, Any], key: str) -> str | None:
    if args.get(key) is None:
        return None
    return _str_arg(args, key)


def _int_arg(args: Mapping[str, Any], key: str, default: int, minimum: int = 1) -> int:
    value = args.get(key, default)
    if value is None:
        value = default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"the argument {key!r} must be an integer, got {value!r}")
    if value < minimum:
        raise ToolError(f"the argument {key!r} must be at least {minimum}, got {value}")
    return value


# --------------------------------------------------------------------------- files


def _looks_binary(head: bytes) -> bool:
    return b"\x00" in head[:BINARY_SNIFF_BYTES]


def _existing_file(path: Path, shown: str) -> None:
    """Refuse anything but an existing regular file (a FIFO would block a read forever)."""
    if not path.exists():
        raise ToolError(f"{shown} does not exist; use list_files to see which files there are")
    if path.is_dir():
        raise ToolError(f"{shown} is a directory; use list_files to see what it contains")
    if not path.is_file():
        raise ToolError(f"{shown} is not a regular file; only regular files can be used")


def _existing_dir(path: Path, shown: str) -> None:
    if not path.exists():
        raise ToolError(f"{shown} does not exist; use list_files on '.' to see what there is")
    if not path.is_dir():
        raise ToolError(f"{shown} is a file, not a directory; use read_file to read it")


def _write_bytes(path: Path, data: bytes, shown: str) -> None:
    """Write ``data`` to ``path`` without following a symbolic link at the last step."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        raise ToolError(f"cannot write {shown}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise ToolError(f"cannot write {shown}: {exc.strerror or exc}") from None


def _encode(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(f"{what} is not valid Unicode text ({exc.reason}); fix it") from None


def _line_count(text: str) -> int:
    return len(io.StringIO(text, newline="").readlines())


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


# --------------------------------------------------------------------------- globs


def glob_matcher(pattern: str) -> Callable[[str, str], bool]:
    """``overnight.core.globs.glob_matcher``, with a bad pattern as a tool error."""
    try:
        return globs.glob_matcher(pattern)
    except globs.GlobError as exc:
        raise ToolError(f"{exc}; leave the pattern out to match every file") from None


def _relative_to_base(rel_root: str, base_shown: str) -> str:
    return rel_root if base_shown == "." else rel_root[len(base_shown) + 1 :]


# --------------------------------------------------------------------------- read_file


class ReadFileTool:
    name = "read_file"
    description = (
        "Read a text file of the repository. Returns its lines numbered like `cat -n` "
        f"(number, tab, text). At most {READ_MAX_LINES} lines or {READ_MAX_CHARS} characters "
        "per call: for a longer file, pass `offset` (the 1-based line to start at) and "
        "`limit` (how many lines) to read the rest. Paths are relative to the repository "
        "root. Binary files are refused."
    )
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path relative to the repository."},
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "First line to return (1-based). Default 1.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": f"Number of lines to return. Default and maximum {READ_MAX_LINES}.",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    mutating = False

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        path = resolve_inside(ctx.root, _str_arg(args, "path"))
        shown = display(ctx.root, path)
        _existing_file(path, shown)
        offset = _int_arg(args, "offset", 1)
        limit = min(_int_arg(args, "limit", READ_MAX_LINES), READ_MAX_LINES)
        try:
            with open(path, "rb") as raw:
                head = raw.read(BINARY_SNIFF_BYTES)
            if _looks_binary(head):
                size = path.stat().st_size
                raise ToolError(
                    f"{shown} looks like a binary file ({size} bytes); read_file shows text "
                    "files only"
                )
            lines, last, total, cut_by_chars = self._read_lines(path, offset, limit)
        except OSError as exc:
            raise ToolError(f"cannot read {shown}: {exc.strerror or exc}") from None
        if total == 0:
            return ToolOutcome(f"({shown} is empty)")
        if offset > total:
            raise ToolError(
                f"{shown} has {total} lines; offset {offset} is past the end "
                f"(pass an offset from 1 to {total})"
            )
        text = "\n".join(lines)
        if last < total:
            why = f"the {READ_MAX_CHARS}-character limit" if cut_by_chars else "the line limit"
            text += (
                f"\n[showing lines {offset}-{last} of {total} (stopped at {why}); "
                f"pass offset={last + 1} to read on]"
            )
        return ToolOutcome(text)

    @staticmethod
    def _read_lines(path: Path, offset: int, limit: int) -> tuple[list[str], int, int, bool]:
        """The numbered lines from ``offset``, the last line number shown, the file's line
        count, and whether the character limit stopped the reading."""
        out: list[str] = []
        chars = 0
        last = offset - 1
        total = 0
        full = False
        cut_by_chars = False
        with open(path, encoding="utf-8", errors="replace", newline="") as handle:
            for number, line in enumerate(handle, start=1):
                total = number
                if number < offset or full:
                    continue
                text = line.rstrip("\r\n")
                if len(text) > READ_MAX_LINE_CHARS:
                    text = text[:READ_MAX_LINE_CHARS] + f" [... line cut: {len(text)} characters]"
                entry = f"{number:>6}\t{text}"
                if out and chars + len(entry) + 1 > READ_MAX_CHARS:
                    full = cut_by_chars = True
                    continue
                out.append(entry)
                chars += len(entry) + 1
                last = number
                if len(out) >= limit:
                    full = True
        return out, last, total, cut_by_chars


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
        base = resolve_inside(ctx.root, _str_arg(args, "path", "."))
        shown = display(ctx.root, base)
        _existing_dir(base, shown)
        pattern = _opt_str_arg(args, "pattern")
        files = _files_under(ctx, base)
        if pattern is not None:
            matches = glob_matcher(pattern)
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
        pattern = _str_arg(args, "pattern")
        if not pattern:
            raise ToolError("the pattern is empty; give a regular expression to search for")
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(
                f"invalid regular expression {pattern!r}: {exc}; patterns use Python's re "
                "syntax (escape special characters such as ( [ . * with a backslash)"
            ) from None
        target = resolve_inside(ctx.root, _str_arg(args, "path", "."))
        shown = display(ctx.root, target)
        if not target.exists():
            raise ToolError(f"{shown} does not exist; use list_files to see what there is")
        glob = _opt_str_arg(args, "glob")
        candidates = _files_under(ctx, target) if target.is_dir() else [shown]
        if glob is not None:
            matches = glob_matcher(glob)
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
            if _looks_binary(data):
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


# --------------------------------------------------------------------------- write_file


def _refuse_protected(ctx: ToolContext, given: str, shown: str) -> None:
    """Refuse a path that is part of what judges the work, by the name given or by the file
    it resolves to (a link into tests/ is tests/)."""
    lexical = os.path.normpath(given).lstrip("/") if not os.path.isabs(given) else shown
    for rel in dict.fromkeys((shown, lexical)):
        rule = ctx.protected(rel)
        if rule is not None:
            raise ToolError(
                f"{rel} is protected: it is part of what judges the work ({rule}), so it "
                "cannot be changed or created in this run; change the code under test instead"
            )


class WriteFileTool:
    name = "write_file"
    description = (
        "Create a file, or replace the whole content of an existing one, with `content` "
        "(UTF-8 text). Missing parent directories are created. Paths are relative to the "
        "repository root. To change part of a file, prefer edit_file."
    )
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path relative to the repository."},
            "content": {"type": "string", "description": "The complete new content."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    mutating = True

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        path = resolve_inside(ctx.root, _str_arg(args, "path"))
        shown = display(ctx.root, path)
        _refuse_protected(ctx, _str_arg(args, "path"), shown)
        content = _str_arg(args, "content")
        if path.is_dir():
            raise ToolError(f"{shown} is a directory; give the path of a file to write")
        if path.exists() and not path.is_file():
            raise ToolError(f"{shown} is not a regular file; it cannot be written")
        data = _encode(content, "content")
        existed = path.exists()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ToolError(
                f"cannot create the directory {display(ctx.root, path.parent)}: "
                f"{exc.strerror or exc} (is part of the path an existing file?)"
            ) from None
        _write_bytes(path, data, shown)
        verb = "replaced" if existed else "created"
        return ToolOutcome(f"{verb} {shown} ({_line_count(content)} lines, {len(data)} bytes)")


# --------------------------------------------------------------------------- edit_file


def _occurrences(text: str, needle: str) -> int:
    """How many times ``needle`` occurs in ``text``, overlapping occurrences included."""
    count = 0
    start = text.find(needle)
    while start != -1:
        count += 1
        start = text.find(needle, start + 1)
    return count


class EditFileTool:
    name = "edit_file"
    description = (
        "Replace one exact piece of text in a file: `old` must occur exactly once in the file "
        "(copy it from read_file, with its indentation and line breaks, but without the line "
        "numbers), and is replaced by `new`. Include enough surrounding lines to make `old` "
        "unique. To create a file or rewrite it whole, use write_file."
    )
    input_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path relative to the repository."},
            "old": {"type": "string", "minLength": 1, "description": "Exact text to replace."},
            "new": {"type": "string", "description": "Replacement text."},
        },
        "required": ["path", "old", "new"],
        "additionalProperties": False,
    }
    mutating = True

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        path = resolve_inside(ctx.root, _str_arg(args, "path"))
        shown = display(ctx.root, path)
        _refuse_protected(ctx, _str_arg(args, "path"), shown)
        old = _str_arg(args, "old")
        new = _str_arg(args, "new")
        if not old:
            raise ToolError(
                "old is empty; give the exact text to replace (use write_file to create a file)"
            )
        if old == new:
            raise ToolError("old and new are identical; nothing would change")
        _existing_file(path, shown)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ToolError(f"cannot read {shown}: {exc.strerror or exc}") from None
        if _looks_binary(data):
            raise ToolError(f"{shown} looks like a binary file; edit_file changes text only")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(
                f"{shown} is not UTF-8 text, so edit_file cannot change it without damaging "
                "it; use write_file to replace it whole"
            ) from None
        count = _occurrences(text, old)
        if count == 0:
            hint = ""
            if "\r\n" in text and "\n" in old and "\r\n" not in old:
                hint = " This file has Windows line endings: write them as \\r\\n in old."
            raise ToolError(
                f"old was not found in {shown} (0 occurrences); read the file again and copy "
                f"the text exactly, including indentation and line breaks.{hint}"
            )
        if count > 1:
            raise ToolError(
                f"old occurs {count} times in {shown}; it must occur exactly once: include "
                "more of the surrounding lines to make it unique"
            )
        at = text.index(old)
        updated = text[:at] + new + text[at + len(old) :]
        _write_bytes(path, _encode(updated, "new"), shown)
        line = text.count("\n", 0, at) + 1
        return ToolOutcome(
            f"edited {shown}: replaced {_line_count(old)} line(s) at line {line} with "
            f"{_line_count(new)} line(s)"
        )


# --------------------------------------------------------------------------- run_command


def parse_command(command: str) -> list[str]:
    """Split ``command`` into words, refusing shell syntax (see the module docstring).

    Raises ``ToolError`` naming the offending character, an unclosed quote, or an empty
    command.
    """
    for c in command:
        if c not in "\t\n\r" and (ord(c) < 0x20 or ord(c) == 0x7F):
            raise ToolError(
                f"the command contains the control character {c!r}; write plain text only"
            )
    quote: str | None = None
    i = 0
    while i < len(command):
        c = command[i]
        if quote is None:
            if c == "\\":
                i += 2
                continue
            if c in ("'", '"'):
                quote = c
            elif c in _SHELL_OPERATORS:
                raise ToolError(
                    f"the command contains {_SHELL_OPERATORS[c]}; run_command runs one program "
                    "with its arguments and no shell syntax: no ; && || | redirections $VAR "
                    "$(...) or backquotes. Run one command per call and quote arguments that "
                    "contain such characters in single quotes"
                )
        elif quote == "'":
            if c == "'":
                quote = None
        else:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                quote = None
            elif c in _DOUBLE_QUOTE_EXPANSIONS:
                raise ToolError(
                    f"the command contains {c!r} inside double quotes, where a shell would "
                    "expand it; nothing is expanded here: use single quotes for a literal "
                    f"{c!r}"
                )
        i += 1
    if quote is not None:
        raise ToolError(f"the command has an unclosed {quote} quote")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise ToolError(f"the command cannot be split into words: {exc}") from None
    if not words:
        raise ToolError("the command is empty")
    return words


def is_git_command(words: Sequence[str]) -> bool:
    """Whether ``words`` run git itself (``git``, ``/usr/bin/git``, ``git-lfs``...)."""
    program = os.path.basename(words[0]) if words else ""
    return program == "git" or program.startswith("git-")


def check_command(command: str, prefixes: Sequence[Sequence[str]]) -> list[str]:
    """The words of ``command`` if it is one allowed program with plain arguments: no shell
    syntax, no control characters, never git, and starting with one of ``prefixes`` (word by
    word). A ``ToolError`` saying why not otherwise."""
    words = parse_command(command)
    if is_git_command(words):
        raise ToolError(
            "git is not available: overnight manages version control itself (it commits "
            "your work after each task and reverts a failed one). Leave the history alone "
            "and change the files; use list_files, read_file and search_text to look around"
        )
    if not any(tuple(words[: len(p)]) == tuple(p) for p in prefixes):
        if not prefixes:
            raise ToolError("no command is allowed in this run ([tools] commands is empty)")
        allowed = ", ".join(shlex.join(p) for p in prefixes)
        raise ToolError(
            f"{words[0]!r} is not an allowed command here; commands must start with one "
            f"of: {allowed}"
        )
    return words


def _safe_name(call_id: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", call_id).lstrip(".")
    return name[:120] or "call"


def _head_and_tail(path: Path, budget: int) -> tuple[str, str, int]:
    """The output in ``path`` for the model: ``(all of it, "", total)`` when it fits in
    ``budget`` characters, else ``(first quarter, last three quarters, total)`` of the
    budget; ``total`` is the output's length in characters."""
    head_budget = budget // 4
    tail_budget = budget - head_budget
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    whole: list[str] | None = []
    head = ""
    tail = ""
    total = 0
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(1 << 20)
            text = decoder.decode(chunk, final=not chunk)
            total += len(text)
            if whole is not None:
                whole.append(text)
                if total > budget:
                    whole = None
            if len(head) < head_budget:
                head += text[: head_budget - len(head)]
            tail = (tail + text)[-tail_budget:] if tail_budget else ""
            if not chunk:
                break
    if whole is not None:
        return "".join(whole), "", total
    return head, tail, total


class RunCommandTool:
    """Runs allowlisted commands in the worktree; see the module docstring for the rules."""

    name = "run_command"
    mutating = True

    def __init__(
        self,
        commands: Sequence[str] = (),
        *,
        timeout_s: float = 300.0,
        max_output_chars: int = 8000,
    ) -> None:
        self.prefixes: list[tuple[str, ...]] = [tuple(parse_command(c)) for c in commands]
        self.timeout_s = timeout_s
        self.max_output_chars = max_output_chars
        allowed = ", ".join(f"`{shlex.join(p)}`" for p in self.prefixes) or "none"
        self.description = (
            "Run one command in the repository root and get its exit code and output (stdout "
            "and stderr together). Only commands that start with one of these are allowed: "
            f"{allowed}. There is no shell: `;`, `&&`, `||`, pipes, redirections, `$VAR`, "
            "`$(...)` and backquotes are refused, and words are passed literally (no globbing, "
            "no variable expansion); quote arguments as in a POSIX shell. git is not "
            "available: overnight commits your work itself. Secrets such as API keys are not "
            f"in the environment. Times out after {timeout_s:g} s (less if the run has less "
            f"time left); output over {max_output_chars} characters is cut in the middle."
        )
        self.input_schema: Mapping[str, Any] = {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The command line, e.g. `pytest -q tests/test_x.py`.",
                },
                "timeout_s": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": f"Seconds before the command is killed (at most {timeout_s:g}).",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        }

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        words = self.check(_str_arg(args, "command"))
        timeout = self._timeout(args, ctx)
        stopping = ctx.stop_requested()
        if stopping is not None:
            raise ToolError(f"the run is stopping ({stopping}); the command was not started")
        top = real_root(ctx.root)
        line = shlex.join(words)
        log = ctx.artifacts / f"{_safe_name(ctx.call_id)}.log"
        try:
            confine = ctx.confine()
            result = process.run_command(
                words if confine is not None else line,
                cwd=top,
                timeout_s=timeout,
                env=None if confine is not None else process.scrubbed_env(),
                confine=confine,
                should_stop=ctx.stop_requested,
                log_path=log,
                max_output=self.max_output_chars,
            )
            head, tail, total = _head_and_tail(log, self.max_output_chars)
        except (RunError, OSError) as exc:
            raise ToolError(f"the command could not be run: {exc}") from None

        if result.timed_out:
            status = (
                f"exit code: none; timed out after {timeout:g} s, so the command and every "
                "process it started were killed"
            )
        elif result.interrupted:
            status = "exit code: none; stopped because the run is ending"
        else:
            status = f"exit code {result.exit_code}"
        parts = [f"$ {line}", f"{status} ({result.seconds:.1f} s)"]
        artifact: str | None = None
        cut = total - len(head) - len(tail)
        if cut > 0:
            artifact = str(log)
            body = (
                f"{head}\n[... {cut} of {total} characters cut here; the full output is "
                f"saved in {log} ...]\n{tail}"
            )
        else:
            body = head
            with contextlib.suppress(OSError):
                log.unlink(missing_ok=True)
        body = body.removesuffix("\n")
        parts.append(body if body else "(no output)")
        return ToolOutcome(
            "\n".join(parts),
            is_error=result.timed_out or result.interrupted,
            artifact=artifact,
            repeat_key="\n".join([f"$ {line}", status, head, tail]),
        )

    def check(self, command: str) -> list[str]:
        """The words of ``command`` if it may run; a ToolError saying why not otherwise."""
        if not self.prefixes:
            parse_command(command)
            raise ToolError("run_command is not enabled: no command is allowed in this run")
        return check_command(command, self.prefixes)

    def _timeout(self, args: Mapping[str, Any], ctx: ToolContext) -> float:
        requested = args.get("timeout_s")
        if requested is None:
            requested = self.timeout_s
        if isinstance(requested, bool) or not isinstance(requested, int | float):
            raise ToolError(f"timeout_s must be a number of seconds, got {requested!r}")
        if not requested > 0:
            raise ToolError(f"timeout_s must be positive, got {requested}")
        timeout = min(float(requested), self.timeout_s, ctx.seconds_left())
        if not timeout > 0:
            raise ToolError("the run has no time left for a command")
        return timeout
