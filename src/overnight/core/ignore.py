"""gitignore rules, evaluated by the harness in linear time (no regex, no backtracking).

A repository's ``.gitignore`` files are bytes the model may have written, so git is never
asked to read them outside the sandbox; this module reads them instead, and answers as git
does (``dir.c`` and ``wildmatch.c``), byte for byte:

* A file is split on LF only; one CR before the LF is dropped; a UTF-8 byte-order mark at
  the very start of the file is skipped; a line ends at its first NUL byte.
* Blank lines and lines starting with ``#`` are skipped. Trailing spaces (not tabs) are
  dropped back to the last character a backslash escapes (``\\ `` keeps its space; after
  ``\\\\``, an escaped backslash, the space goes).
* ``!`` negates; one trailing ``/`` makes the rule match directories only (a second one is
  part of the pattern, which then matches nothing). A pattern with a ``/`` left is anchored
  to its file's directory (one leading ``/`` is dropped: ``//x`` matches nothing), otherwise
  it matches the last name of a path at any depth.
* Patterns match bytes: ``?`` and a bracket expression match one byte (not one character of
  a non-ASCII name), ``[:alpha:]`` and the other named classes are ASCII, a range is of byte
  values and its first end is always in it; an unknown ``[:name:]``, an unclosed ``[`` or a
  trailing ``\\`` make the pattern match nothing. ``*``, ``?`` and ``[...]`` never match
  ``/``; ``**/``, ``/**/`` and a trailing ``/**`` cross directories, as do a ``**`` before
  ``\\/`` (but then at least one directory) and a ``**`` right after the pattern's leading
  run of plain characters (git compares that run before matching the rest); other ``**``
  act as ``*``.
* Within one file the last matching line wins; a deeper file's rules come before a
  shallower one's.

Where the harness differs on purpose: matching is case-sensitive, as git's is on a
case-sensitive file system (``core.ignoreCase`` is not read: this module reads no
configuration), and rules beyond the limits below are refused, never read in part.

Each pattern is compiled to a position automaton simulated bit-parallel: one step per byte
of the path, whatever the pattern, so no pattern a model writes can make a match take longer
than ``O(len(path))`` steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

#: Largest ignore file read (bytes); a larger one is refused, not read in part.
MAX_IGNORE_FILE_BYTES = 1 << 20
#: Most ignore patterns a candidate's rules may hold in all.
MAX_IGNORE_PATTERNS = 10_000
#: Longest pattern (bytes): longer than any path can be.
MAX_PATTERN_BYTES = 4096

_BOM = b"\xef\xbb\xbf"
_SLASH, _STAR, _QUESTION, _OPEN, _CLOSE = b"/", b"*", b"?", b"[", b"]"
_BACKSLASH, _BANG, _CARET, _DASH, _COLON = b"\\", b"!", b"^", b"-", b":"
_SPECIAL = frozenset(b"*?[\\")


def _bits(members: bytes) -> int:
    mask = 0
    for byte in members:
        mask |= 1 << byte
    return mask


_ALL = (1 << 256) - 1
_NOT_SLASH = _ALL & ~_bits(_SLASH)
_DIGITS = _bits(b"0123456789")
_UPPER = _bits(bytes(range(ord("A"), ord("Z") + 1)))
_LOWER = _bits(bytes(range(ord("a"), ord("z") + 1)))
_GRAPH = _bits(bytes(range(0x21, 0x7F)))
# git's own ASCII tables, not the C library's locale.
_CLASSES: dict[bytes, int] = {
    b"alnum": _DIGITS | _UPPER | _LOWER,
    b"alpha": _UPPER | _LOWER,
    b"blank": _bits(b" \t"),
    b"cntrl": _bits(bytes(range(0x20)) + b"\x7f"),
    b"digit": _DIGITS,
    b"graph": _GRAPH,
    b"lower": _LOWER,
    b"print": _GRAPH | _bits(b" "),
    b"punct": _GRAPH & ~(_DIGITS | _UPPER | _LOWER),
    b"space": _bits(b" \t\n\r"),
    b"upper": _UPPER,
    b"xdigit": _DIGITS | _bits(b"abcdefABCDEF"),
}

# Item kinds of a compiled pattern.
_ONE = 0  # one byte the mask accepts
_LOOP = 1  # zero or more bytes the mask accepts
_SKIP2 = 2  # a _LOOP that, with the '/' after it, may also be skipped: ``(.*/)?``


class PatternTooLarge(ValueError):
    """Ignore rules beyond what the harness evaluates (see the limits above)."""


def _bytes(text: str | bytes) -> bytes:
    if isinstance(text, bytes):
        return text
    return text.encode("utf-8", "surrogateescape")


@dataclass
class Glob:
    """One wildmatch pattern (``/`` matched only by ``/`` and ``**``), matched against a
    whole path; each item is a kind and the mask of the 256 byte values it accepts."""

    items: list[tuple[int, int]]
    literal: bytes | None = None
    suffix: bytes | None = None
    """``*suffix`` with a plain suffix: matched with ``endswith`` (names only)."""
    never: bool = False
    _masks: dict[int, tuple[int, int]] = field(default_factory=dict, repr=False)
    _eps: int = field(default=0, repr=False)
    _skip: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        for i, (kind, _) in enumerate(self.items):
            if kind in (_LOOP, _SKIP2):
                self._eps |= 1 << i
            if kind == _SKIP2:
                self._skip |= 1 << i

    def matches(self, text: str | bytes) -> bool:
        if self.never:
            return False
        data = _bytes(text)
        if self.literal is not None:
            return data == self.literal
        if self.suffix is not None and _SLASH not in data:
            return data.endswith(self.suffix)
        eps, skip = self._eps, self._skip
        state = _closure(1, eps, skip)
        for byte in data:
            masks = self._masks.get(byte)
            if masks is None:
                masks = self._masks[byte] = self._byte_masks(byte)
            advance, loop = masks
            state = _closure(((state & advance) << 1) | (state & loop), eps, skip)
            if not state:
                return False
        return bool(state >> len(self.items) & 1)

    def _byte_masks(self, byte: int) -> tuple[int, int]:
        advance = loop = 0
        for i, (kind, accepts) in enumerate(self.items):
            if not accepts >> byte & 1:
                continue
            if kind == _ONE:
                advance |= 1 << i
            else:
                loop |= 1 << (i + 1)  # the loop sits on the state after the item
        return advance, loop


def _closure(state: int, eps: int, skip: int) -> int:
    while True:
        grown = state | ((state & eps) << 1) | ((state & skip) << 2)
        if grown == state:
            return state
        state = grown


def _span(lo: int, hi: int) -> int:
    """The bytes ``lo..hi`` (none when reversed)."""
    return ((1 << (hi + 1)) - 1) & ~((1 << lo) - 1) if lo <= hi else 0


def _class(pattern: bytes, i: int) -> tuple[int, int] | None:
    """The bytes the bracket expression at ``pattern[i] == '['`` accepts and the index after
    it, read as git's wildmatch reads it; None where wildmatch gives up (unclosed, or an
    unknown ``[:name:]``), so that the pattern matches nothing."""
    n = len(pattern)

    def at(k: int) -> bytes:
        return pattern[k : k + 1]

    k = i + 1
    ch = at(k)
    negated = ch in (_BANG, _CARET)
    if negated:
        k += 1
        ch = at(k)
    mask = 0
    prev = b""  # the previous single byte, which a '-' may start a range from
    while True:
        if not ch:
            return None
        if ch == _BACKSLASH:
            k += 1
            ch = at(k)
            if not ch:
                return None
            mask |= _bits(ch)
        elif ch == _DASH and prev and k + 1 < n and at(k + 1) != _CLOSE:
            k += 1
            ch = at(k)
            if ch == _BACKSLASH:
                k += 1
                ch = at(k)
                if not ch:
                    return None
            mask |= _span(prev[0], ch[0])
            ch = b""
        elif ch == _OPEN and at(k + 1) == _COLON:
            start = end = k + 2
            while end < n and at(end) != _CLOSE:
                end += 1
            if end == n:
                return None
            if end == start or at(end - 1) != _COLON:
                mask |= _bits(_OPEN)  # no ":]": a plain '['
            else:
                named = _CLASSES.get(pattern[start : end - 1])
                if named is None:
                    return None
                mask |= named
                k = end
                ch = b""
        else:
            mask |= _bits(ch)
        prev = ch
        k += 1
        ch = at(k)
        if ch == _CLOSE:
            break
    if negated:
        mask = _ALL & ~mask
    return mask & _NOT_SLASH, k + 1


def compile_glob(pattern: str | bytes) -> Glob:
    """``pattern`` (gitignore wildmatch syntax, without ``!``, the trailing ``/`` or the
    leading ``/`` of an anchored rule)."""
    text = _bytes(pattern)
    n = len(text)
    if n > MAX_PATTERN_BYTES:
        raise PatternTooLarge(f"a pattern of {n} bytes")
    plain = next((k for k, byte in enumerate(text) if byte in _SPECIAL), n)
    if plain == n:
        return Glob(items=[], literal=text)
    items: list[tuple[int, int]] = []
    i = 0
    while i < n:
        ch = text[i : i + 1]
        if ch == _STAR:
            j = i
            while j < n and text[j : j + 1] == _STAR:
                j += 1
            # git compares the plain run itself and matches the rest from its start, where
            # a '**' counts as following a '/'.
            double = j - i >= 2 and (i in (0, plain) or text[i - 1 : i] == _SLASH)
            if double and text[j : j + 1] == _SLASH:
                items += [(_SKIP2, _ALL), (_ONE, _bits(_SLASH))]
                i = j + 1
            elif double and (j == n or text[j : j + 2] == b"\\/"):
                items.append((_LOOP, _ALL))
                i = j
            else:
                items.append((_LOOP, _NOT_SLASH))
                i = j
            continue
        if ch == _QUESTION:
            items.append((_ONE, _NOT_SLASH))
        elif ch == _OPEN:
            found = _class(text, i)
            if found is None:
                return Glob(items=[], never=True)
            items.append((_ONE, found[0]))
            i = found[1]
            continue
        else:
            if ch == _BACKSLASH:
                i += 1
                if i == n:  # a trailing backslash matches nothing
                    return Glob(items=[], never=True)
                ch = text[i : i + 1]
            items.append((_ONE, _bits(ch)))
        i += 1
    glob = Glob(items=items)
    rest = text[1:]
    if text[:1] == _STAR and not any(byte in _SPECIAL for byte in rest) and _SLASH not in rest:
        glob.suffix = rest
    return glob


def _trim_trailing_spaces(text: str) -> str:
    """``text`` without its trailing spaces, as git trims them: a backslash escapes the
    character after it, whatever it is."""
    last_space = -1
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == " ":
            if last_space < 0:
                last_space = i
        else:
            last_space = -1
            if ch == "\\":
                i += 1
                if i == len(text):
                    return text
        i += 1
    return text if last_space < 0 else text[:last_space]


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
    _under: bytes = field(default=b"", init=False, repr=False)

    def __post_init__(self) -> None:
        self._under = _bytes(self.base) + b"/" if self.base else b""

    def matches(self, path: str | bytes, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        data = _bytes(path)
        if self._under:
            if not data.startswith(self._under):
                return False
            data = data[len(self._under) :]
        if not self.anchored:
            data = data.rsplit(_SLASH, 1)[-1]
        return self.glob.matches(data)


def parse_line(line: str, base: str = "") -> Rule | None:
    """The rule a line states (the line without its LF), or None for a line that states
    none: blank, a comment, or a pattern left empty."""
    if not line or line.startswith("#"):
        return None
    text = line[:-1] if line.endswith("\r") else line
    pattern = _trim_trailing_spaces(text.split("\0", 1)[0])
    negated = pattern.startswith("!")
    if negated:
        pattern = pattern[1:]
    dir_only = pattern.endswith("/")
    if dir_only:
        pattern = pattern[:-1]
    anchored = "/" in pattern
    if anchored and pattern.startswith("/"):
        pattern = pattern[1:]
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
    """The rules of lines already split (a spec's list); a file's bytes go to
    :func:`read_rules`, which splits them as git does."""
    rules = []
    for line in lines:
        rule = parse_line(line, base)
        if rule is not None:
            rules.append(rule)
    return rules


def read_rules(data: bytes, base: str = "") -> list[Rule]:
    """The rules of one ignore file, given its bytes: lines end at LF only (a CR alone, a
    form feed or a Unicode line separator is part of a pattern), and a UTF-8 byte-order mark
    at the start is skipped."""
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return parse_rules((line.decode("utf-8", "surrogateescape") for line in lines), base)


def decide(rules: Sequence[Rule], path: str | bytes, is_dir: bool) -> Rule | None:
    """The rule that decides ``path`` (the last that matches), or None."""
    data = _bytes(path)
    for rule in reversed(rules):
        if rule.matches(data, is_dir):
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

    def ignored(self, path: str | bytes, is_dir: bool) -> bool:
        data = _bytes(path)
        for rules in (*self.levels, self.fallback):
            rule = decide(rules, data, is_dir)
            if rule is not None:
                return not rule.negated
        return False
