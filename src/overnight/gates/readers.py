"""A check's findings, read from its output, and the findings one tree has that another has not.

A repository's own checks (linters, type checkers) report findings; a candidate is judged by
the findings it adds over its base commit, not by the findings already there. Each reader
turns one output format into ``Finding`` values, which are identified by file, rule and text
and never by position: moving code up or down leaves its findings the same, while a second
copy of an existing finding is one more.

Readers (``READERS``): ruff's, pyright's, pylint's and eslint's JSON, flake8's and mypy's
default text, and ``exit-code`` for any other command (a failing exit is one finding).
Output that is not what its reader expects raises ``FindingsUnreadable``: a tool that
crashed or was misconfigured has not reported on the code.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from overnight.core.text import one_line

READERS: tuple[str, ...] = (
    "ruff-json",
    "flake8",
    "mypy",
    "pyright-json",
    "pylint-json",
    "eslint-json",
    "exit-code",
)

#: How much of an output an unreadable-output message quotes.
_EXCERPT_CHARS = 200

#: What stands in a message for a line or column number.
LINE_PLACEHOLDER = "#"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: "line 12", "lines 3-5", "line 12, column 4", "col 5": the number goes, the word stays.
_LINE_WORDS = re.compile(
    r"\b(lines?|columns?|col)(\s+)\d+(?:\s*(?:-|to|and)\s*\d+)?", re.IGNORECASE
)
#: ":12" or ":12:5" after a name (``x.py:12``); not after a digit, so ``a[1:2]`` and times
#: such as ``12:30`` keep their numbers.
_COLON_NUMBERS = re.compile(r"(?<=[A-Za-z_)\]\"'])(?::\d+){1,2}\b")
_WHITESPACE = re.compile(r"\s+")
_DRIVE = re.compile(r"^[A-Za-z]:/")
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):", re.MULTILINE)

#: ``path:line:col: CODE message``; the column is optional (``--format`` variants drop it).
_FLAKE8_LINE = re.compile(
    r"^(?P<path>.+?):(?P<line>\d+):(?:(?P<col>\d+):)?\s+(?P<code>[A-Z]+[0-9]+)\s+(?P<msg>.*)$"
)
#: ``path:line: error: message  [code]``, also with ``:col`` and with ``--show-error-end``.
_MYPY_LINE = re.compile(
    r"^(?P<path>.+?):(?P<line>\d+)(?::\d+)?(?::\d+:\d+)?:\s*(?P<severity>error|note|warning):"
    r"\s*(?P<msg>.*?)(?:\s+\[(?P<code>[a-z0-9_-]+)\])?\s*$"
)


class FindingsUnreadable(ValueError):
    """A check's output is not what its reader expects (a crash, a configuration error, text
    where JSON was asked for); the message says what was expected and quotes the output."""


@dataclass(frozen=True)
class Finding:
    """One finding of a check: where, by which rule, and the tool's text for it.

    ``file`` is a POSIX path relative to the checked-out tree's root, ``""`` when the tool
    names no file; ``rule`` is the tool's code for it (``F401``, ``arg-type``,
    ``no-unused-vars``), ``""`` when it has none; ``message`` is normalized (paths relative
    to the root, line and column numbers replaced by ``#``, whitespace collapsed). ``line``
    is shown to people and is not part of the identity."""

    file: str
    rule: str
    message: str
    line: int | None = None

    def key(self) -> tuple[str, str, str]:
        """The identity: file, rule and message, never the line."""
        return (self.file, self.rule, self.message)

    def text(self) -> str:
        """One line for people: ``src/x.py:12: F401 `os` imported but unused``; without a
        file, ``rule: message`` (``exit: exited 1``)."""
        if not self.file:
            return one_line(f"{self.rule}: {self.message}" if self.rule else self.message)
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        body = f"{self.rule} {self.message}" if self.rule else self.message
        return one_line(f"{where}: {body}")


# --- which reader a command needs ---------------------------------------------------------

#: Words that run the next word as the program (``uv run mypy``, ``npx eslint``).
_WRAPPERS: dict[str, int] = {
    "env": 1,
    "npx": 1,
    "pnpx": 1,
    "bunx": 1,
    "uvx": 1,
    "pipx": 2,  # pipx run X
    "uv": 2,  # uv run X
    "poetry": 2,
    "pdm": 2,
    "hatch": 2,
    "pipenv": 2,
    "rye": 2,
}
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^(?:python|pypy)[0-9.]*$")


def _words(command: str | list[str]) -> list[str]:
    if isinstance(command, list):
        return list(command)
    try:
        return shlex.split(command)
    except ValueError:  # an unclosed quote: the words are still worth a guess
        return command.split()


def program_of(command: str | list[str]) -> tuple[str, list[str]]:
    """The program a command runs and its arguments, looking through environment
    assignments, runners such as ``uv run`` / ``npx`` and ``python -m X``: ``python -m mypy
    src`` gives ``("mypy", ["src"])``. The program is a bare name (``/usr/bin/ruff`` gives
    ``ruff``); ``("", [])`` for an empty command."""
    words = _words(command)
    while words:
        head = posixpath.basename(words[0].replace("\\", "/"))
        if _ENV_ASSIGNMENT.match(words[0]):
            words = words[1:]
        elif head in _WRAPPERS:
            skip = _WRAPPERS[head]
            if skip == 2 and len(words) > 1 and words[1] not in ("run", "exec", "x"):
                return head, words[1:]
            words = words[skip:]
            while words and (words[0].startswith("-") or _ENV_ASSIGNMENT.match(words[0])):
                words = words[1:]  # the runner's own options (``npx --yes``, ``env -i``)
        elif _PYTHON.match(head):
            rest = words[1:]
            # Interpreter options before -m (``python -I -m mypy``) do not change the module.
            while rest and rest[0].startswith("-") and rest[0] != "-m":
                rest = rest[1:]
            if len(rest) >= 2 and rest[0] == "-m":
                return rest[1], rest[2:]
            return head, rest
        else:
            return head, words[1:]
    return "", []


def _option_value(args: Sequence[str], *names: str) -> str | None:
    """The value given to one of the options ``names`` (``--x=v``, ``--x v`` or ``-x v``),
    the last one given winning as it does for the tools."""
    value: str | None = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(name + "="):
                value = arg[len(name) + 1 :]
    return value


def reader_for(command: str | list[str]) -> str:
    """The reader of ``command``'s output, inferred from its words; ``exit-code`` when the
    command is not one whose findings can be read (or asks for another output format)."""
    program, args = program_of(command)
    if program == "ruff" and "check" in args:
        fmt = _option_value(args, "--output-format", "--format")
        return "ruff-json" if fmt == "json" else "exit-code"
    if program == "flake8":
        fmt = _option_value(args, "--format")
        quiet = any(a in ("-q", "--quiet", "-qq") for a in args)
        return "flake8" if fmt in (None, "default") and not quiet else "exit-code"
    if program in ("mypy", "dmypy"):
        return "exit-code" if _option_value(args, "--output", "-O") else "mypy"
    if program in ("pyright", "basedpyright"):
        return "pyright-json" if "--outputjson" in args else "exit-code"
    if program == "pylint":
        fmt = _option_value(args, "--output-format", "-f")
        return "pylint-json" if fmt == "json" else "exit-code"
    if program == "eslint":
        fmt = _option_value(args, "--format", "-f")
        return "eslint-json" if fmt == "json" else "exit-code"
    return "exit-code"


# --- normalization ------------------------------------------------------------------------


def _posix_root(root: str) -> str:
    text = root.replace("\\", "/")
    return posixpath.normpath(text) if text else ""


def relative_path(path: str, root: str) -> str:
    """``path`` as a POSIX path relative to ``root`` when it lies inside it (tools print
    absolute paths sometimes), without a leading ``./``; a path outside ``root`` stays
    absolute."""
    text = path.strip().replace("\\", "/")
    if not text:
        return ""
    normal = posixpath.normpath(text)
    base = _posix_root(root)
    if posixpath.isabs(normal) or _DRIVE.match(normal):
        inside = base and base != "/" and normal.startswith(base + "/")
        return posixpath.relpath(normal, base) if inside else normal
    return "" if normal == "." else normal


def normalize_message(message: str, root: str) -> str:
    """A tool's message without what changes when code only moves: the root's absolute path
    taken off the paths it names, line and column numbers replaced by ``#``, whitespace
    collapsed."""
    text = _ANSI.sub("", message)
    base = _posix_root(root)
    if base and base != "/":
        # The root as given and in POSIX form: a tool on Windows prints backslashes.
        for form in dict.fromkeys((root.rstrip("/\\"), base)):
            text = text.replace(form + "/", "").replace(form + "\\", "")
    text = _LINE_WORDS.sub(lambda m: f"{m.group(1)}{m.group(2)}{LINE_PLACEHOLDER}", text)
    text = _COLON_NUMBERS.sub(lambda m: f":{LINE_PLACEHOLDER}" * m.group(0).count(":"), text)
    return _WHITESPACE.sub(" ", text).strip()


def _finding(file: str, rule: object, message: object, line: int | None, root: str) -> Finding:
    return Finding(
        file=relative_path(file, root),
        rule=rule.strip() if isinstance(rule, str) else "",
        message=normalize_message(str(message), root),
        line=line,
    )


def _unreadable(reader: str, expected: str, output: str) -> FindingsUnreadable:
    excerpt = output.strip()
    if len(excerpt) > _EXCERPT_CHARS:
        excerpt = excerpt[:_EXCERPT_CHARS] + "..."
    shown = one_line(excerpt) if excerpt else "(no output)"
    return FindingsUnreadable(f"{reader}: expected {expected}; the output was: {shown}")


# --- readers ------------------------------------------------------------------------------


def _load_json(reader: str, output: str, opener: str, exit_code: int) -> object:
    """The JSON document the output holds (``None`` when the output is empty on success).
    Lines before the document (a warning on stderr, when the streams are joined) are
    allowed as long as the document starts a line of its own with ``opener``."""
    expected = "a JSON array" if opener == "[" else "a JSON object"
    text = output.strip()
    if not text:
        if exit_code == 0:
            return None
        raise _unreadable(reader, f"{expected} (the command failed with exit {exit_code})", output)
    try:
        doc: object = json.loads(text)
    except ValueError:
        doc = None
        for start in re.finditer(rf"^{re.escape(opener)}", text, re.MULTILINE):
            try:
                doc = json.JSONDecoder().raw_decode(text, start.start())[0]
                break
            except ValueError:
                continue
    if doc is None or not isinstance(doc, list if opener == "[" else dict):
        raise _unreadable(reader, expected, output)
    return doc


def _json_list(reader: str, output: str, exit_code: int) -> list[object]:
    doc = _load_json(reader, output, "[", exit_code)
    return doc if isinstance(doc, list) else []


def _entry(reader: str, item: object, output: str, *required: str) -> dict[str, object]:
    """``item`` as an object holding the fields ``required``; unreadable otherwise."""
    if not isinstance(item, dict):
        raise _unreadable(reader, "a list of JSON objects", output)
    for name in required:
        if name not in item:
            raise _unreadable(reader, f"entries with a {name!r} field", output)
    return item


def _int_or_none(value: object, offset: int = 0) -> int | None:
    return value + offset if isinstance(value, int) and not isinstance(value, bool) else None


def _read_ruff(output: str, exit_code: int, root: str) -> list[Finding]:
    found: list[Finding] = []
    for raw in _json_list("ruff-json", output, exit_code):
        item = _entry("ruff-json", raw, output, "message", "filename")
        location = item.get("location")
        row = location.get("row") if isinstance(location, dict) else None
        # A syntax error has no code in older ruff versions (newer ones say "invalid-syntax").
        code = item.get("code") or "syntax-error"
        found.append(
            _finding(str(item["filename"]), code, item["message"], _int_or_none(row), root)
        )
    return found


def _read_pyright(output: str, exit_code: int, root: str) -> list[Finding]:
    doc = _load_json("pyright-json", output, "{", exit_code)
    if doc is None:
        return []
    diagnostics = doc.get("generalDiagnostics") if isinstance(doc, dict) else None
    if not isinstance(diagnostics, list):
        raise _unreadable("pyright-json", "an object with 'generalDiagnostics'", output)
    found: list[Finding] = []
    for raw in diagnostics:
        item = _entry("pyright-json", raw, output, "message")
        if item.get("severity", "error") not in ("error", "warning"):
            continue  # "information" does not fail the check
        where = item.get("range")
        start = where.get("start") if isinstance(where, dict) else None
        line = _int_or_none(start.get("line"), 1) if isinstance(start, dict) else None
        file = item.get("file")
        found.append(_finding(str(file or ""), item.get("rule"), item["message"], line, root))
    return found


def _read_pylint(output: str, exit_code: int, root: str) -> list[Finding]:
    # pylint's exit status is a bit field; 32 is a usage error (a bad option or rcfile).
    if exit_code & 32:
        raise _unreadable("pylint-json", "findings (pylint reported a usage error)", output)
    found: list[Finding] = []
    for raw in _json_list("pylint-json", output, exit_code):
        item = _entry("pylint-json", raw, output, "message")
        rule = item.get("symbol") or item.get("message-id")
        path = item.get("path")
        line = _int_or_none(item.get("line"))
        found.append(_finding(str(path or ""), rule, item["message"], line, root))
    return found


def _read_eslint(output: str, exit_code: int, root: str) -> list[Finding]:
    found: list[Finding] = []
    for raw in _json_list("eslint-json", output, exit_code):
        result = _entry("eslint-json", raw, output, "filePath", "messages")
        messages = result["messages"]
        if not isinstance(messages, list):
            raise _unreadable("eslint-json", "a list of 'messages' per file", output)
        for raw_message in messages:
            item = _entry("eslint-json", raw_message, output, "message")
            # A file that does not parse has one fatal message without a rule.
            rule = item.get("ruleId") or ("syntax-error" if item.get("fatal") else "")
            line = _int_or_none(item.get("line"))
            found.append(_finding(str(result["filePath"]), rule, item["message"], line, root))
    return found


def _read_flake8(output: str, exit_code: int, root: str) -> list[Finding]:
    if _TRACEBACK.search(output):
        raise _unreadable("flake8", "findings, not a traceback", output)
    found: list[Finding] = []
    for raw in output.splitlines():
        match = _FLAKE8_LINE.match(_ANSI.sub("", raw).rstrip())
        if match:
            found.append(
                _finding(match["path"], match["code"], match["msg"], int(match["line"]), root)
            )
    return found


def _read_mypy(output: str, exit_code: int, root: str) -> list[Finding]:
    if _TRACEBACK.search(output) or "INTERNAL ERROR" in output:
        raise _unreadable("mypy", "findings (mypy crashed)", output)
    found: list[Finding] = []
    for raw in output.splitlines():
        match = _MYPY_LINE.match(_ANSI.sub("", raw).rstrip())
        # Notes explain the error before them and summaries count errors: neither is one.
        if match and match["severity"] == "error":
            found.append(
                _finding(match["path"], match["code"], match["msg"], int(match["line"]), root)
            )
    return found


def _read_exit_code(output: str, exit_code: int, root: str) -> list[Finding]:
    if exit_code == 0:
        return []
    return [Finding(file="", rule="exit", message=f"exited {exit_code}")]


_READ: dict[str, Callable[[str, int, str], list[Finding]]] = {
    "ruff-json": _read_ruff,
    "flake8": _read_flake8,
    "mypy": _read_mypy,
    "pyright-json": _read_pyright,
    "pylint-json": _read_pylint,
    "eslint-json": _read_eslint,
    "exit-code": _read_exit_code,
}


def read_findings(reader: str, output: str, exit_code: int, root: str) -> list[Finding]:
    """The findings in ``output`` of a check that exited with ``exit_code`` after running in
    the directory ``root`` (absolute), read by ``reader`` (one of ``READERS``), in the order
    the tool gave them. A failing exit with no finding in the output is unreadable: the tool
    failed without reporting on the code."""
    read = _READ.get(reader)
    if read is None:
        raise ValueError(f"unknown findings reader {reader!r}; choose one of {', '.join(READERS)}")
    found = read(output, exit_code, root)
    if exit_code != 0 and not found and reader != "exit-code":
        raise _unreadable(reader, f"findings explaining exit {exit_code}", output)
    return found


def new_findings(base: Sequence[Finding], candidate: Sequence[Finding]) -> list[Finding]:
    """The candidate's findings beyond the base's count of the same key, in the candidate's
    order: a finding that only moved is not new, a second copy of one is."""
    remaining = Counter(f.key() for f in base)
    added: list[Finding] = []
    for finding in candidate:
        if remaining[finding.key()] > 0:
            remaining[finding.key()] -= 1
        else:
            added.append(finding)
    return added


def removed_findings(base: Sequence[Finding], candidate: Sequence[Finding]) -> list[Finding]:
    """The base's findings beyond the candidate's count of the same key, in the base's order:
    what the candidate fixed."""
    return new_findings(candidate, base)
