"""Glob patterns over ``/``-separated relative paths (``list_files``, ``search_text`` and the
protected paths of ``[predicate] protect``).

``*`` and ``?`` stay within one path component, ``**`` crosses components (``**/`` also
matches no directory at all), ``[abc]`` / ``[!abc]`` are classes and ``{a,b}`` alternatives.
A pattern without ``/`` is matched against the file name alone, so ``*.py`` or
``conftest.py`` match at any depth; a pattern with ``/`` is matched against the whole path.
"""

from __future__ import annotations

import re
from collections.abc import Callable


class GlobError(ValueError):
    """A pattern that cannot be used: empty, or not a valid expression once translated."""


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                if pattern.startswith("/", i + 2):
                    out.append("(?:.*/)?")
                    i += 3
                else:
                    out.append(".*")
                    i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
                continue
        elif c == "{":
            end = pattern.find("}", i)
            if end == -1 or "{" in pattern[i + 1 : end]:
                out.append(re.escape(c))
            else:
                options = pattern[i + 1 : end].split(",")
                out.append("(?:" + "|".join(_translate(o) for o in options) + ")")
                i = end + 1
                continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def normalize(pattern: str) -> str:
    """The pattern without surrounding blanks, leading ``./`` or ``/``."""
    text = pattern.strip()
    while text.startswith("./"):
        text = text[2:]
    return text.lstrip("/")


def compile_glob(pattern: str) -> re.Pattern[str]:
    text = normalize(pattern)
    if not text:
        raise GlobError("the glob pattern is empty")
    try:
        return re.compile(_translate(text) + r"\Z", re.DOTALL)
    except re.error as exc:
        raise GlobError(f"invalid glob pattern {pattern!r}: {exc}") from None


def glob_matcher(pattern: str) -> Callable[[str, str], bool]:
    """A test ``(path relative to the root, path relative to the listed directory) -> bool``
    (see the module docstring for how the two are used)."""
    regex = compile_glob(pattern)
    if "/" not in normalize(pattern):
        return lambda rel_root, _rel_base: regex.match(rel_root.rsplit("/", 1)[-1]) is not None
    return lambda rel_root, rel_base: bool(regex.match(rel_base) or regex.match(rel_root))


def path_matcher(pattern: str) -> Callable[[str], bool]:
    """A test of one path relative to the root."""
    matches = glob_matcher(pattern)
    return lambda rel: matches(rel, rel)
