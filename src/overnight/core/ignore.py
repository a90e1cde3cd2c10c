"""gitignore rules, evaluated by the harness in linear time (no regex, no backtracking).

A repository's ``.gitignore`` files are bytes the model may have written, so git is never
asked to read them outside the sandbox; this module reads them instead. Syntax and
precedence follow gitignore(5): blank and ``#`` lines skipped, ``\\`` escapes, trailing
blanks dropped, ``!`` negates, a trailing ``/`` matches directories only, a pattern with a
``/`` before its end is anchored to its file's directory, otherwise it matches the name at
any depth; ``*``, ``?`` and ``[...]`` never match ``/``; ``**/``, ``/**/`` and a trailing
``/**`` cross directories; other ``**`` act as ``*``. Within one file the last matching line
wins; a deeper file's rules come before a shallower one's.

Each pattern is compiled to a position automaton simulated bit-parallel: one step per
character of the path, whatever the pattern, so no pattern a model writes can make a match
take longer than ``O(len(path))`` steps.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

#: Largest ignore file read (bytes); a larger one is refused, not read in part.
MAX_IGNORE_FILE_BYTES = 1 << 20
#: Most ignore patterns a candidate's rules may hold in all.
MAX_IGNORE_PATTERNS = 10_000
#: Longest pattern (characters): longer than any path can be.
MAX_PATTERN_CHARS = 4096

_CLASSES: dict[str, Callable[[str], bool]] = {
    "alnum": str.isalnum,
    "alpha": str.isalpha,
    "blank": lambda c: c in " \t",
    "cntrl": lambda c: ord(c) < 32 or ord(c) == 127,
    "digit": lambda c: c in string.digits,
    "graph": lambda c: c.isprintable() and not c.isspace(),
    "lower": str.islower,
    "print": str.isprintable,
    "punct": lambda c: c in string.punctuation,
    "space": str.isspace,
    "upper": str.isupper,
    "xdigit": lambda c: c in string.hexdigits,
}

# Item kinds of a compiled pattern.
_ONE = 0  # one character the predicate accepts
_STAR = 1  # zero or more characters the predicate accepts (a loop)
_SKIP2 = 2  # a _STAR that, with the '/' after it, may also be skipped: ``(.*/)?``


class PatternTooLarge(ValueError):
    """Ignore rules beyond what the harness evaluates (see the limits above)."""


@dataclass
class Glob:
    """One wildmatch pattern (``/`` matched only by ``/`` and ``**``), matched against a
    whole string."""

    items: list[tuple[int, Callable[[str], bool]]]
    literal: str | None = None
    suffix: str | None = None
    """``*suffix`` with a literal suffix: matched with ``endswith`` (names only)."""
    never: bool = False
    _masks: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)
    _eps: int = field(default=0, repr=False)
    _skip: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        for i, (kind, _) in enumerate(self.items):
            if kind in (_STAR, _SKIP2):
                self._eps |= 1 << i
            if kind == _SKIP2:
                self._skip |= 1 << i

    def matches(self, text: str) -> bool:
        if self.never:
            return False
        if self.literal is not None:
            return text == self.literal
        if self.suffix is not None and "/" not in text:
            return text.endswith(self.suffix)
        items, eps, skip = self.items, self._eps, self._skip
        state = _closure(1, eps, skip)
        for c in text:
            masks = self._masks.get(c)
            if masks is None:
                masks = self._masks[c] = self._char_masks(c)
            advance, loop = masks
            state = _closure(((state & advance) << 1) | (state & loop), eps, skip)
            if not state:
                return False
        return bool(state >> len(items) & 1)

    def _char_masks(self, c: str) -> tuple[int, int]:
        advance = loop = 0
        for i, (kind, accepts) in enumerate(self.items):
            if kind == _ONE and accepts(c):
                advance |= 1 << i
            elif kind != _ONE and accepts(c):
                loop |= 1 << (i + 1)  # the loop sits on the state after the item
        return advance, loop


def _closure(state: int, eps: int, skip: int) -> int:
    while True:
        grown = state | ((state & eps) << 1) | ((state & skip) << 2)
        if grown == state:
            return state
        state = grown


def _not_slash(c: str) -> bool:
    return c != "/"


def _any(_c: str) -> bool:
    return True


def _is(ch: str) -> Callable[[str], bool]:
    return lambda c: c == ch


def _class(pattern: str, i: int) -> tuple[Callable[[str], bool], int] | None:
    """The class starting at ``pattern[i] == '['`` and the index after it, or None when it
    is not closed."""
    j = i + 1
    negate = j < len(pattern) and pattern[j] in "!^"
    if negate:
        j += 1
    singles: set[str] = set()
    ranges: list[tuple[str, str]] = []
    named: list[Callable[[str], bool]] = []
    first = True
    while j < len(pattern):
        c = pattern[j]
        if c == "]" and not first:
            break
        first = False
        if c == "[" and pattern.startswith("[:", j):
            end = pattern.find(":]", j + 2)
            if end != -1 and pattern[j + 2 : end] in _CLASSES:
                named.append(_CLASSES[pattern[j + 2 : end]])
                j = end + 2
                continue
        if c == "\\" and j + 1 < len(pattern):
            j += 1
            c = pattern[j]
        if j + 2 < len(pattern) and pattern[j + 1] == "-" and pattern[j + 2] != "]":
            hi = pattern[j + 2]
            if hi == "\\" and j + 3 < len(pattern):
                hi = pattern[j + 3]
                j += 1
            ranges.append((c, hi))
            j += 3
            continue
        singles.add(c)
        j += 1
    else:
        return None

    def accepts(ch: str) -> bool:
        if ch == "/":
            return False
        hit = ch in singles or any(lo <= ch <= hi for lo, hi in ranges)
        hit = hit or any(f(ch) for f in named)
        return hit != negate

    return accepts, j + 1


def compile_glob(pattern: str) -> Glob:
    """``pattern`` (gitignore wildmatch syntax, without ``!`` or a trailing ``/``)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternTooLarge(f"a pattern of {len(pattern)} characters")
    items: list[tuple[int, Callable[[str], bool]]] = []
    i, n = 0, len(pattern)
    wild = False
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            double = j - i >= 2 and (i == 0 or pattern[i - 1] == "/")
            wild = True
            if double and j < n and pattern[j] == "/":
                items.append((_SKIP2, _any))
                items.append((_ONE, _is("/")))
                i = j + 1
                continue
            if double and j == n:
                items.append((_STAR, _any))
                i = j
                continue
            items.append((_STAR, _not_slash))
            i = j
            continue
        if c == "?":
            wild = True
            items.append((_ONE, _not_slash))
        elif c == "[":
            found = _class(pattern, i)
            if found is None:  # git's wildmatch gives up on an unclosed class
                return Glob(items=[], never=True)
            wild = True
            items.append((_ONE, found[0]))
            i = found[1]
            continue
        else:
            if c == "\\":
                if i + 1 >= n:  # a trailing backslash matches nothing
                    return Glob(items=[], never=True)
                i += 1
                c = pattern[i]
            items.append((_ONE, _is(c)))
        i += 1
    glob = Glob(items=items)
    if not wild:
        glob.literal = _unescape(pattern)
    elif (
        pattern.startswith("*")
        and not pattern.startswith("**")
        and not any(ch in pattern[1:] for ch in "*?[\\")
    ):
        glob.suffix = pattern[1:]
    return glob


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            i += 1
        out.append(text[i])
        i += 1
    return "".join(out)


@dataclass
class Rule:
    """One line of an ignore file (or of a spec's list, in the same syntax)."""

    text: str
    """The line as written (for notes)."""
    glob: Glob
    negated: bool
    dir_only: bool
    anchored: bool
    base: str
    """The directory the rule's file is in, relative to the top (``""`` at the top)."""

    def matches(self, path: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        if self.base:
            if not path.startswith(self.base + "/"):
                return False
            path = path[len(self.base) + 1 :]
        if not self.anchored:
            path = path.rsplit("/", 1)[-1]
        return self.glob.matches(path)


def parse_line(line: str, base: str = "") -> Rule | None:
    """The rule a line states, or None for a blank or comment line."""
    text = line.rstrip("\r")
    if not text or text.startswith("#"):
        return None
    # Trailing blanks go, unless escaped.
    end = len(text)
    while end > 0 and text[end - 1] in " \t":
        if end >= 2 and text[end - 2] == "\\":
            break
        end -= 1
    pattern = text[:end]
    negated = pattern.startswith("!")
    if negated:
        pattern = pattern[1:]
    dir_only = pattern.endswith("/") and not pattern.endswith("\\/")
    if dir_only:
        pattern = pattern.rstrip("/")
    if not pattern:
        return None
    anchored = "/" in pattern
    pattern = pattern.lstrip("/") if anchored else pattern
    if not pattern:
        return None
    return Rule(
        text=line,
        glob=compile_glob(pattern),
        negated=negated,
        dir_only=dir_only,
        anchored=anchored,
        base=base,
    )


def parse_rules(lines: Iterable[str], base: str = "") -> list[Rule]:
    rules = []
    for line in lines:
        rule = parse_line(line, base)
        if rule is not None:
            rules.append(rule)
    return rules


def decide(rules: Sequence[Rule], path: str, is_dir: bool) -> Rule | None:
    """The rule that decides ``path`` (the last that matches), or None."""
    for rule in reversed(rules):
        if rule.matches(path, is_dir):
            return rule
    return None


@dataclass
class IgnoreStack:
    """The ignore files in force at one directory of a walk: the deepest first."""

    levels: list[list[Rule]] = field(default_factory=list)
    fallback: list[Rule] = field(default_factory=list)
    """The repository's own ``info/exclude`` (lowest precedence)."""
    count: int = 0

    def push(self, rules: list[Rule]) -> IgnoreStack:
        count = self.count + len(rules)
        if count > MAX_IGNORE_PATTERNS:
            raise PatternTooLarge(f"more than {MAX_IGNORE_PATTERNS} ignore patterns in all")
        return IgnoreStack([rules, *self.levels], self.fallback, count)

    def ignored(self, path: str, is_dir: bool) -> bool:
        for rules in (*self.levels, self.fallback):
            rule = decide(rules, path, is_dir)
            if rule is not None:
                return not rule.negated
        return False
