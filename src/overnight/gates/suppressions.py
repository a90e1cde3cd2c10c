"""Suppression comments: a check silenced in the code counts as the finding it hides.

A candidate that adds ``# noqa`` or ``# type: ignore[arg-type]`` has not fixed what a check
reported, it has hidden it from the check; comparing the check's findings alone would call
that clean. So every suppression comment is normalized (``# NOQA:F401,E501`` becomes
``# noqa: E501, F401``) and counted per file, and the ones a file has beyond its base
version's count are findings of their own, like the new findings of a check: a suppression
that only moved to another line adds nothing, a second identical one adds one.

Only comments count, as far as a reader of lines can tell: in Python files (``.py``,
``.pyi``) the comments are the tokenizer's, so ``x = "# noqa"`` is a string and not a
suppression; other files are read line by line, a marker counting after a comment opener
(``#``, ``//``, ``/*``, ``*``, ``<!--``, ``{/*``) on its line.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from overnight.gates.readers import Finding

#: The file names read by their Python tokens rather than line by line.
PYTHON_SUFFIXES: tuple[str, ...] = (".py", ".pyi", ".pyw")

#: The quotes an inline mypy setting may put around its value.
QUOTES = "\"'"
_CODE_LIST = r"[A-Za-z]+[0-9]+(?:\s*,\s*[A-Za-z]+[0-9]+)*"
_RULE_NAME = r"[\w./@-]+"
_RULE_LIST = rf"{_RULE_NAME}(?:\s*,\s*{_RULE_NAME})*"


def _codes(text: str | None, upper: bool = False) -> str:
    """A list of codes in one canonical form: split on commas and blanks, sorted, unique."""
    items = {c.strip() for c in re.split(r"[\s,]+", text or "") if c.strip()}
    return ", ".join(sorted(c.upper() if upper else c for c in items))


def _with_codes(head: str, codes: str, sep: str = ": ") -> str:
    return f"{head}{sep}{codes}" if codes else head


@dataclass(frozen=True)
class Marker:
    """One family of suppression comments: its ``name``, the ``pattern`` that finds it in a
    comment, and how a match is written in its normalized form."""

    name: str
    pattern: re.Pattern[str]
    normalize: Callable[[re.Match[str]], str]


def _noqa(m: re.Match[str]) -> str:
    return _with_codes("# noqa", _codes(m["codes"], upper=True))


def _file_noqa(m: re.Match[str]) -> str:
    return _with_codes(f"# {m['tool'].lower()}: noqa", _codes(m["codes"], upper=True))


def _type_ignore(m: re.Match[str]) -> str:
    codes = _codes(m["codes"])
    return f"# type: ignore[{codes}]" if codes else "# type: ignore"


def _mypy(m: re.Match[str]) -> str:
    if m["codes"] is None:
        return "# mypy: ignore-errors"
    return f"# mypy: disable-error-code={_codes(m['codes'].strip(QUOTES))}"


def _pyright(m: re.Match[str]) -> str:
    codes = _codes(m["codes"])
    return f"# pyright: ignore[{codes}]" if codes else "# pyright: ignore"


def _pylint(m: re.Match[str]) -> str:
    if m["verb"] is None:
        return "# pylint: skip-file"
    return f"# pylint: {m['verb'].lower()}={_codes(m['codes'])}"


def _spaced(m: re.Match[str]) -> str:
    """``#fmt:skip`` as ``# fmt: skip``: the tools accept both spellings."""
    return "# " + re.sub(r"\s*:\s*", ": ", m[0].lstrip("#").strip())


def _eslint(m: re.Match[str]) -> str:
    # A description after " -- " explains the suppression; it does not change what it hides.
    rules = m["rules"].split(" --", 1)[0]
    return _with_codes(m["directive"], _codes(rules), sep=" ")


def _as_found(m: re.Match[str]) -> str:
    return m[0]


#: Every suppression comment recognized, by family. Python markers are found inside a
#: comment's text (which starts with ``#``); the others after any comment opener.
MARKERS: tuple[Marker, ...] = (
    # flake8 and ruff read noqa case-insensitively, with or without codes; the file-wide
    # forms name the tool.
    Marker(
        "# ruff: noqa / # flake8: noqa",
        re.compile(
            rf"#\s*(?P<tool>ruff|flake8)\s*[:=]\s*noqa\b(?:\s*:\s*(?P<codes>{_CODE_LIST}))?",
            re.IGNORECASE,
        ),
        _file_noqa,
    ),
    Marker(
        "# noqa",
        re.compile(rf"#\s*noqa\b(?:\s*:\s*(?P<codes>{_CODE_LIST}))?", re.IGNORECASE),
        _noqa,
    ),
    Marker(
        "# type: ignore",
        re.compile(r"#\s*type:\s*ignore\b(?:\[(?P<codes>[^\]]*)\])?"),
        _type_ignore,
    ),
    Marker(
        "# mypy: ignore-errors / disable-error-code",
        re.compile(
            r"#\s*mypy:\s*(?:ignore-errors\b"
            r"|disable-error-code\s*=\s*(?P<codes>[\"']?[\w-]+(?:\s*,\s*[\w-]+)*[\"']?))"
        ),
        _mypy,
    ),
    Marker(
        "# pyright: ignore",
        re.compile(r"#\s*pyright:\s*ignore\b(?:\[(?P<codes>[^\]]*)\])?"),
        _pyright,
    ),
    Marker(
        "# pylint: disable / skip-file",
        re.compile(
            rf"#\s*pylint:\s*(?:(?P<verb>disable-next|disable-msg|disable)\s*=\s*"
            rf"(?P<codes>{_RULE_LIST})|skip-file\b)"
        ),
        _pylint,
    ),
    Marker("# fmt: off / skip", re.compile(r"#\s*fmt:\s*(?:off|skip)\b"), _spaced),
    Marker(
        "# isort: skip / skip_file / off",
        re.compile(r"#\s*isort:\s*(?:skip_file|skip|off)\b"),
        _spaced,
    ),
    Marker(
        "eslint-disable",
        # The rules run to the end of the comment: "*/", "-->" or the end of the line.
        re.compile(
            r"(?P<directive>eslint-disable(?:-next-line|-line)?)(?![\w-])"
            r"(?P<rules>[^\n*]*?)(?=\*/|-->|$)",
            re.MULTILINE,
        ),
        _eslint,
    ),
    Marker("prettier-ignore", re.compile(r"prettier-ignore(?:-start)?(?![\w-])"), _as_found),
    Marker("@ts-ignore", re.compile(r"@ts-(?:ignore|expect-error|nocheck)(?![\w-])"), _as_found),
)

#: Where a comment starts on a line of a file that is not Python.
_COMMENT_OPENER = re.compile(r"#|//|/\*|<!--|^\s*\*")
#: Quoted strings on one line, taken out before scanning a Python line that did not tokenize.
_QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'")


def _in_comment(comment: str) -> Iterator[str]:
    """The normalized suppressions in one comment's text, left to right."""
    hits: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []
    for marker in MARKERS:
        for m in marker.pattern.finditer(comment):
            # A span is one marker's only: the file-wide flake8 marker is not also a line one.
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            taken.append((m.start(), m.end()))
            hits.append((m.start(), marker.normalize(m)))
    for _start, text in sorted(hits):
        yield text


def _python_comments(text: str) -> Iterator[tuple[int, str]]:
    """``(line, comment)`` for each comment token; lines after the point where tokenizing
    fails (broken code) are scanned as text, their quoted strings taken out first."""
    lines = text.splitlines()
    scanned_to = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            scanned_to = tok.end[0]
            if tok.type == tokenize.COMMENT:
                yield tok.start[0], tok.string
    except (tokenize.TokenError, SyntaxError):
        for number in range(scanned_to + 1, len(lines) + 1):
            line = _QUOTED.sub('""', lines[number - 1])
            hash_at = line.find("#")
            if hash_at >= 0:
                yield number, line[hash_at:]


def _other_comments(text: str) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(text.splitlines(), start=1):
        opener = _COMMENT_OPENER.search(line)
        if opener is not None:
            yield number, line[opener.start() :]


def _is_python(path: str) -> bool:
    return path.lower().endswith(PYTHON_SUFFIXES)


def _occurrences(text: str, path: str) -> Iterator[tuple[int, str]]:
    """``(line, normalized suppression)`` for every suppression in ``text``, in order."""
    comments = _python_comments(text) if _is_python(path) else _other_comments(text)
    for number, comment in comments:
        for found in _in_comment(comment):
            yield number, found


def suppressions_in(text: str, path: str = "") -> Counter[str]:
    """Each suppression comment of ``text``, normalized, with how many times it occurs.
    ``path`` decides how the text is read: a Python file's comments by its tokens, any other
    file (and text without a path) line by line."""
    return Counter(found for _line, found in _occurrences(text, path))


def added_suppressions(path: str, base_text: str | None, new_text: str) -> list[Finding]:
    """The suppressions ``new_text`` has beyond ``base_text``'s count of the same one (all
    of them when ``base_text`` is None: a new file), as findings of ``path`` with the rule
    ``suppression``, each at the first line where its marker occurs."""
    before = suppressions_in(base_text, path) if base_text is not None else Counter[str]()
    first_line: dict[str, int] = {}
    after: Counter[str] = Counter()
    for number, found in _occurrences(new_text, path):
        first_line.setdefault(found, number)
        after[found] += 1
    added: list[Finding] = []
    for found, line in first_line.items():
        for _ in range(after[found] - before[found]):
            added.append(
                Finding(file=path, rule="suppression", message=f"adds `{found}`", line=line)
            )
    return added
