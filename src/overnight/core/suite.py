"""Which pytest commands run the same suite: one base record serves every check that runs the
suite it recorded, or a part of it.

A pytest command is read as its invocation (``python -m pytest``, ``pytest``), what it selects
(paths and node ids; ``-k``, ``-m``, ``--deselect``, ``--ignore``), the options that only
stop or order a run early (``-x``, ``--maxfail``, ``--sw``, ``--lf``, ``--ff``, ``--nf``:
turned off for a base record) or only change what it prints (``-q``, ``-v``, ``-r``,
``--tb``...), and everything else. A record of command R serves check C when both have the
same invocation and the same other options, C selects within R's paths, and C adds no
``--ignore`` of its own (an ignored file is not reported as deselected). Anything this reading
does not know makes the two commands different suites: the check gets a record of its own,
which costs a run and is never wrong.

Pure: no I/O.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from overnight.core.evidence import BaseTests, Scope

#: Options that take a value (``--opt value``, ``--opt=value``, ``-kvalue``).
_WITH_VALUE = frozenset(
    {
        "-k",
        "-m",
        "-p",
        "-c",
        "-o",
        "-W",
        "-r",
        "-n",
        "--rootdir",
        "--deselect",
        "--ignore",
        "--ignore-glob",
        "--maxfail",
        "--tb",
        "--durations",
        "--durations-min",
        "--junitxml",
        "--junit-xml",
        "--junit-prefix",
        "--basetemp",
        "--confcutdir",
        "--log-level",
        "--log-file",
        "--log-file-level",
        "--log-cli-level",
        "--import-mode",
        "--capture",
        "--color",
        "--code-highlight",
        "--pythonwarnings",
        "--override-ini",
        "--config-file",
        "--lfnf",
        "--last-failed-no-failures",
        "--numprocesses",
        "--dist",
        "--timeout",
        "--verbosity",
    }
)

#: Stop or reorder a run early: turned off for a base record, so no difference between two
#: commands.
_EARLY = frozenset(
    {
        "-x",
        "--exitfirst",
        "--maxfail",
        "--sw",
        "--stepwise",
        "--sw-skip",
        "--stepwise-skip",
        "--sw-reset",
        "--stepwise-reset",
        "--lf",
        "--last-failed",
        "--ff",
        "--failed-first",
        "--nf",
        "--new-first",
        "--lfnf",
        "--last-failed-no-failures",
    }
)

#: Change only what the run prints.
_OUTPUT = frozenset(
    {
        "-q",
        "--quiet",
        "-v",
        "--verbose",
        "--verbosity",
        "-r",
        "--tb",
        "--color",
        "--code-highlight",
        "--no-header",
        "--no-summary",
        "--durations",
        "--durations-min",
        "-l",
        "--showlocals",
        "--disable-warnings",
        "--disable-pytest-warnings",
        "--junitxml",
        "--junit-xml",
        "--junit-prefix",
    }
)

#: Select by keyword, mark or node id: what they leave out is reported as deselected.
_NARROW = frozenset({"-k", "-m", "--deselect"})
#: Leave files out at collection, unreported.
_IGNORE = frozenset({"--ignore", "--ignore-glob"})

_SHORT_FLAGS = frozenset("xqvsl")


@dataclass(frozen=True)
class PytestCall:
    invocation: tuple[str, ...]
    paths: tuple[str, ...]
    narrow: tuple[tuple[str, str], ...]
    ignore: tuple[tuple[str, str], ...]
    other: tuple[tuple[str, str], ...]


def read_call(command: str | Sequence[str]) -> PytestCall | None:
    """``command`` read as a pytest call; None when it is not one, or holds what this reading
    does not know (a shell, an option of unknown arity after a path)."""
    try:
        words = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError:
        return None
    start = _invocation_end(words)
    if start is None:
        return None
    options = _options(words[start:])
    if options is None:
        return None
    paths, narrow, ignore, other = [], [], [], []
    for name, value in options:
        if name == "":
            paths.append(_norm(value))
        elif name in _EARLY or name in _OUTPUT:
            continue
        elif name in _NARROW:
            narrow.append((name, value))
        elif name in _IGNORE:
            ignore.append((name, value))
        else:
            other.append((name, value))
    return PytestCall(
        tuple(words[:start]), tuple(paths), tuple(narrow), tuple(ignore), tuple(other)
    )


def scope_within(record: str | Sequence[str], check: str | Sequence[str]) -> Scope | None:
    """The part of ``record``'s suite that ``check`` runs, or None when ``check`` is not
    known to run within it."""
    r, c = read_call(record), read_call(check)
    if r is None or c is None or r.invocation != c.invocation or r.other != c.other:
        return None
    if r.ignore != c.ignore or not set(r.narrow) <= set(c.narrow):
        return None
    if r.paths and not (c.paths and all(_within(p, r.paths) for p in c.paths)):
        return None
    return Scope(paths=c.paths, narrowed=set(c.narrow) != set(r.narrow))


def record_for(
    records: Mapping[str, BaseTests], commit: str, key: str, command: str | Sequence[str]
) -> tuple[BaseTests, Scope] | None:
    """The base record a check (``key``: its command as the spec writes it) is judged
    against, and the part of it the check runs: its own, or a complete record of ``commit``
    whose suite holds it."""
    exact = records.get(key)
    if exact is not None and exact.commit == commit:
        return exact, Scope()
    for record in records.values():
        if record.commit != commit or not record.complete:
            continue
        scope = scope_within(record.command, command)
        if scope is not None:
            return record, scope
    return None


def _invocation_end(words: list[str]) -> int | None:
    for i, word in enumerate(words):
        name = word.rsplit("/", 1)[-1]
        if name in ("pytest", "py.test"):
            return i + 1
        if word == "-m" and i + 1 < len(words) and words[i + 1] in ("pytest", "py.test"):
            return i + 2
    return None


def _options(words: list[str]) -> list[tuple[str, str]] | None:
    """``(name, value)`` per option (``("", path)`` for a path), or None for what is not
    plainly read."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":
            out += [("", w) for w in words[i:]]
            break
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            if name in _WITH_VALUE and not eq:
                if i >= len(words):
                    return None
                value, i = words[i], i + 1
            out.append((name, value))
        elif word.startswith("-") and len(word) > 1:
            j = 1
            while j < len(word):
                flag = "-" + word[j]
                if flag in _WITH_VALUE:
                    value = word[j + 1 :]
                    if not value:
                        if i >= len(words):
                            return None
                        value, i = words[i], i + 1
                    out.append((flag, value))
                    break
                if word[j] not in _SHORT_FLAGS:
                    return None
                out.append((flag, ""))
                j += 1
        else:
            out.append(("", word))
    return out


def _norm(path: str) -> str:
    while path.startswith("./"):
        path = path[2:]
    return path.rstrip("/") or "."


def _within(path: str, roots: Sequence[str]) -> bool:
    return any(
        root == "." or path == root or path.startswith((root + "/", root + "::")) for root in roots
    )
