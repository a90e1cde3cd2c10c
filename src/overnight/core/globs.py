"""Glob patterns over ``/``-separated relative paths (``list_files``, ``search_text`` and the
protected paths of ``[predicate] protect``).

``*`` and ``?`` stay within one path component, ``**`` crosses components (``**/`` also
matches no directory at all), ``[abc]`` / ``[!abc]`` are classes (``a-z`` ranges, ``^`` also
negates) and ``{a,b}`` alternatives. A pattern without ``/`` is matched against the file name
alone, so ``*.py`` or ``conftest.py`` match at any depth; a pattern with ``/`` is matched
against the whole path.

Patterns come from the model (``list_files``, ``search_text``), so they are never handed to
``re`` or ``fnmatch``, whose backtracking takes exponential time on patterns such as
``*a*a*a*a*b`` against a long name. A pattern is compiled to a small non-deterministic
automaton and simulated over the path one character at a time, keeping the set of states
alive: the work is at most the path's length times the pattern's, whatever the pattern.
Sets already met are memoized (a lazy DFA) so that matching many paths stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

#: A longer pattern is refused (the matching work grows with the pattern's length).
MAX_PATTERN_CHARS = 1024

#: The memo of (state set, character) steps is emptied when it grows past this many entries.
_MEMO_LIMIT = 65_536


class GlobError(ValueError):
    """A pattern that cannot be used: empty, too long, or with a bad character range."""


#: An edge's test: (negated, code point ranges); a character passes when it lies in one of
#: the ranges, or in none of them when negated.
_Test = tuple[bool, tuple[tuple[int, int], ...]]
_SLASH = ord("/")
_NOT_SLASH: _Test = (True, ((_SLASH, _SLASH),))
_ANY: _Test = (True, ())


def _literal(ch: str) -> _Test:
    return (False, ((ord(ch), ord(ch)),))


@dataclass
class _Nfa:
    edges: list[list[tuple[_Test, int]]] = field(default_factory=list)
    eps: list[list[int]] = field(default_factory=list)

    def state(self) -> int:
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def edge(self, src: int, test: _Test, dst: int) -> None:
        self.edges[src].append((test, dst))


def _passes(test: _Test, ch: str) -> bool:
    code = ord(ch)
    negated, ranges = test
    return any(lo <= code <= hi for lo, hi in ranges) != negated


def _class_items(body: str, pattern: str) -> tuple[tuple[int, int], ...]:
    items: list[tuple[int, int]] = []
    j = 0
    while j < len(body):
        if j + 2 < len(body) and body[j + 1] == "-":
            lo, hi = ord(body[j]), ord(body[j + 2])
            if hi < lo:
                raise GlobError(
                    f"invalid glob pattern {pattern!r}: bad character range {body[j : j + 3]}"
                )
            items.append((lo, hi))
            j += 3
        else:
            items.append((ord(body[j]), ord(body[j])))
            j += 1
    return tuple(items)


def _compile_seq(nfa: _Nfa, pattern: str, cur: int, whole: str) -> int:
    """Add ``pattern``'s states after state ``cur``; the state reached at its end."""
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            loop = nfa.state()
            nfa.eps[cur].append(loop)
            if pattern.startswith("**", i):
                if pattern.startswith("/", i + 2):  # (.*/)? : no directory, or some
                    join = nfa.state()
                    nfa.eps[cur].append(join)
                    nfa.edge(loop, _ANY, loop)
                    nfa.edge(loop, _literal("/"), join)
                    cur = join
                    i += 3
                else:
                    nfa.edge(loop, _ANY, loop)
                    cur = loop
                    i += 2
                continue
            nfa.edge(loop, _NOT_SLASH, loop)
            cur = loop
        elif c == "?":
            nxt = nfa.state()
            nfa.edge(cur, _NOT_SLASH, nxt)
            cur = nxt
        elif c == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            negated = body[:1] in ("!", "^")
            if negated:
                body = body[1:]
            if not body:
                raise GlobError(f"invalid glob pattern {whole!r}: empty character class")
            nxt = nfa.state()
            nfa.edge(cur, (negated, _class_items(body, whole)), nxt)
            cur = nxt
            i = end + 1
            continue
        elif c == "{" and (end := pattern.find("}", i)) != -1 and "{" not in pattern[i + 1 : end]:
            join = nfa.state()
            for option in pattern[i + 1 : end].split(","):
                start = nfa.state()
                nfa.eps[cur].append(start)
                nfa.eps[_compile_seq(nfa, option, start, whole)].append(join)
            cur = join
            i = end + 1
            continue
        else:
            nxt = nfa.state()
            nfa.edge(cur, _literal(c), nxt)
            cur = nxt
        i += 1
    return cur


class Glob:
    """One compiled pattern; ``match`` tests a whole string against it."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._nfa = _Nfa()
        start = self._nfa.state()
        self._accept = _compile_seq(self._nfa, pattern, start, pattern)
        self._start = self._closure({start})
        self._memo: dict[tuple[frozenset[int], str], frozenset[int]] = {}

    def _closure(self, states: set[int]) -> frozenset[int]:
        todo = list(states)
        seen = set(states)
        while todo:
            for nxt in self._nfa.eps[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return frozenset(seen)

    def _step(self, states: frozenset[int], ch: str) -> frozenset[int]:
        key = (states, ch)
        found = self._memo.get(key)
        if found is None:
            reached = {dst for s in states for test, dst in self._nfa.edges[s] if _passes(test, ch)}
            found = self._closure(reached)
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[key] = found
        return found

    def match(self, text: str) -> bool:
        states = self._start
        for ch in text:
            states = self._step(states, ch)
            if not states:
                return False
        return self._accept in states


def normalize(pattern: str) -> str:
    """The pattern without surrounding blanks, leading ``./`` or ``/``."""
    text = pattern.strip()
    while text.startswith("./"):
        text = text[2:]
    return text.lstrip("/")


def compile_glob(pattern: str) -> Glob:
    text = normalize(pattern)
    if not text:
        raise GlobError("the glob pattern is empty")
    if len(text) > MAX_PATTERN_CHARS:
        raise GlobError(f"the glob pattern is longer than {MAX_PATTERN_CHARS} characters")
    return Glob(text)


def glob_matcher(pattern: str) -> Callable[[str, str], bool]:
    """A test ``(path relative to the root, path relative to the listed directory) -> bool``
    (see the module docstring for how the two are used)."""
    glob = compile_glob(pattern)
    if "/" not in normalize(pattern):
        return lambda rel_root, _rel_base: glob.match(rel_root.rsplit("/", 1)[-1])
    return lambda rel_root, rel_base: glob.match(rel_base) or glob.match(rel_root)


def path_matcher(pattern: str) -> Callable[[str], bool]:
    """A test of one path relative to the root."""
    matches = glob_matcher(pattern)
    return lambda rel: matches(rel, rel)
