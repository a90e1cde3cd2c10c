"""The file tools: read a text file of the worktree, write one whole, edit one piece of one.

Every path goes through ``resolve_inside`` first; every refusal is a ``ToolError`` whose
message says what to do instead. A write never follows a symbolic link at its last step, and
a path that is part of what judges the work (``ToolContext.protected``) is never written.
What ``read_file`` returns is bounded (the constants below) so that one call cannot flood the
model's context.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from overnight.seams import ToolContext, ToolError, ToolOutcome
from overnight.tools.args import int_arg, str_arg
from overnight.tools.paths import display, resolve_inside

#: read_file: most lines returned by one call.
READ_MAX_LINES = 2000
#: read_file: a longer line is cut (and says so).
READ_MAX_LINE_CHARS = 2000
#: read_file: most characters returned by one call.
READ_MAX_CHARS = 60_000
#: edit_file: a larger file is refused (it is read whole to be changed).
EDIT_MAX_BYTES = 32 << 20
#: A file with a NUL byte in its first this-many bytes is treated as binary.
BINARY_SNIFF_BYTES = 8192


def looks_binary(head: bytes) -> bool:
    """Whether a file whose first bytes are ``head`` is binary (see BINARY_SNIFF_BYTES)."""
    return b"\x00" in head[:BINARY_SNIFF_BYTES]


def _existing_file(path: Path, shown: str) -> None:
    """Refuse anything but an existing regular file (a FIFO would block a read forever)."""
    if not path.exists():
        raise ToolError(f"{shown} does not exist; use list_files to see which files there are")
    if path.is_dir():
        raise ToolError(f"{shown} is a directory; use list_files to see what it contains")
    if not path.is_file():
        raise ToolError(f"{shown} is not a regular file; only regular files can be used")


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
        path = resolve_inside(ctx.root, str_arg(args, "path"))
        shown = display(ctx.root, path)
        _existing_file(path, shown)
        offset = int_arg(args, "offset", 1)
        limit = min(int_arg(args, "limit", READ_MAX_LINES), READ_MAX_LINES)
        try:
            with open(path, "rb") as raw:
                head = raw.read(BINARY_SNIFF_BYTES)
            if looks_binary(head):
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
            for number, (text, length) in enumerate(_bounded_lines(handle), start=1):
                total = number
                if number < offset or full:
                    continue
                if length > READ_MAX_LINE_CHARS:
                    text = text[:READ_MAX_LINE_CHARS] + f" [... line cut: {length} characters]"
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


def _bounded_lines(handle: TextIO) -> Iterator[tuple[str, int]]:
    """Each line of ``handle`` without its terminator, cut after READ_MAX_LINE_CHARS + 1
    characters, with its whole length: a line is never held whole, however long (a file the
    model made may be one line of gigabytes)."""
    ends = ("\n", "\r")
    while True:
        asked = READ_MAX_LINE_CHARS + 1
        piece = handle.readline(asked)
        if not piece:
            return
        text = piece
        length = len(piece)
        while len(piece) == asked and not piece.endswith(ends):
            asked = 1 << 16
            piece = handle.readline(asked)
            length += len(piece)
        if piece.endswith(ends):
            length -= len(piece) - len(piece.rstrip("\r\n"))
        yield text.rstrip("\r\n"), length


# --------------------------------------------------------------------------- write_file


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
        path = resolve_inside(ctx.root, str_arg(args, "path"))
        shown = display(ctx.root, path)
        _refuse_protected(ctx, str_arg(args, "path"), shown)
        content = str_arg(args, "content")
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
        path = resolve_inside(ctx.root, str_arg(args, "path"))
        shown = display(ctx.root, path)
        _refuse_protected(ctx, str_arg(args, "path"), shown)
        old = str_arg(args, "old")
        new = str_arg(args, "new")
        if not old:
            raise ToolError(
                "old is empty; give the exact text to replace (use write_file to create a file)"
            )
        if old == new:
            raise ToolError("old and new are identical; nothing would change")
        _existing_file(path, shown)
        try:
            size = path.stat().st_size
            if size > EDIT_MAX_BYTES:
                raise ToolError(
                    f"{shown} is {size} bytes; edit_file changes files of at most "
                    f"{EDIT_MAX_BYTES >> 20} MB (read it in parts with read_file, and replace "
                    "it whole with write_file if you must)"
                )
            data = path.read_bytes()
        except OSError as exc:
            raise ToolError(f"cannot read {shown}: {exc.strerror or exc}") from None
        if looks_binary(data):
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
