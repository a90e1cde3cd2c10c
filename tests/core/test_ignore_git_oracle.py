"""The ignore reader against git on generated trees and ignore files: the files it leaves in
are the files ``git ls-files --others --exclude-standard`` lists.

OVERNIGHT_IGNORE_EXAMPLES sets how many cases are tried (a few hundred by default); the cases
are the same on every run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.ignore_oracle import Case, Oracle, Tree, directories, disagreement, paths

EXAMPLES = int(os.environ.get("OVERNIGHT_IGNORE_EXAMPLES", "250"))

# "\udcff" is the byte 0xff, which no UTF-8 name holds.
NAME_PIECES = (
    "a", "b", "é", "ß", ".", "-", " ", "\t", "\\", "*", "?", "[", "]", "!", "#", "^", ":",
    "\r", "\x0c", "\u2028", "\udcff",
)  # fmt: skip
TOKENS = (
    "*", "**", "?", "/", "[", "]", "[!", "[^", "-", "[a-z]", "[é]", "[[:alpha:]]",
    "[[:space:]]", "[[:punct:]]", "[[:foo:]]", "[:", ":]", "\\", "\\\\", "\\/", "\\*",
    "\\[", "\\ ", " ", "\t", "\r", "\x00", "\x0c", "\u2028", "\ufeff", "é", ".", "a", "b",
)  # fmt: skip
LEADS = ("/", "!/", "//", "**/", "**\\/", "*/", "\\!", "\\#", "#", "\ufeff")
TAILS = ("/", "//", "/**", "**", " ", " ", "\t", "\\ ", "\\\\ ", "\\", " \t")
ENDS = ("\r\n", "\r\r\n", "\r", "\x0c", "\u2028", "\x00\n")
# What one character (or one byte) of a name may be written as in a pattern, "{c}" being
# itself: wildcards that may or may not match it.
SPELLINGS = (
    "?", "*", "**", "[{c}]", "[!{c}]", "[^{c}]", "[{c}-z]", "[{c}-!]", "[a-{c}]", "\\{c}",
    "[[:alpha:]]", "[[:punct:]]", "[[:space:]]", "[[:foo:]]", "[{c}[:foo:]]",
    "[[:alpha:]{c}]", "*{c}", "{c}**", "{c}/", "/{c}",
)  # fmt: skip
SLASH_SPELLINGS = ("/**/", "**/", "/**", "\\/", "/**\\/", "**\\/", "//", "/*/", "*/")

plain_names = st.text("abé", min_size=1, max_size=2)
edge_names = st.text("a \t\\", min_size=1, max_size=3)
odd_names = (
    st.lists(st.sampled_from(NAME_PIECES), min_size=1, max_size=4)
    .map("".join)
    .filter(lambda name: name not in (".", ".."))
)


@st.composite
def trees(draw: st.DrawFn, depth: int = 0) -> Tree:
    """A directory of one to three entries, four levels deep at most."""
    tree: Tree = {}
    for name in draw(
        st.lists(st.one_of(plain_names, plain_names, edge_names, odd_names), min_size=1, max_size=3)
    ):
        deeper = depth < 3 and draw(st.booleans())
        tree[name] = draw(trees(depth + 1)) if deeper else None
    return tree


@st.composite
def spelled(draw: st.DrawFn, words: list[str]) -> str:
    """A name or path of the tree with one or two of its characters, or of its bytes,
    spelled as wildcards."""
    word = draw(st.sampled_from(words))
    units = list(word)
    if draw(st.booleans()):
        units = [chr(b if b < 0x80 else 0xDC00 + b) for b in word.encode(errors="surrogateescape")]
    where = st.integers(0, len(units) - 1)
    for i in draw(st.lists(where, min_size=1, max_size=2, unique=True)):
        spellings = SLASH_SPELLINGS if units[i] == "/" else SPELLINGS
        units[i] = draw(st.sampled_from(spellings)).format(c=units[i])
    return "".join(units)


def escaped(word: str) -> str:
    """``word`` as a pattern that names it literally."""
    out = "".join("\\" + c if c in "*?[\\" else c for c in word)
    if out.startswith(("#", "!")):
        out = "\\" + out
    if out.endswith(" "):
        out = out[:-1] + "\\ "
    return out


@st.composite
def lines(draw: st.DrawFn, words: list[str]) -> str:
    """One line and its end: a name, path or pattern of the tree with at most one oddity
    around it (a lead, a tail, a line end other than LF), or a line of loose tokens."""
    named = st.sampled_from(words)
    body = draw(st.one_of(spelled(words), spelled(words), named, named, named.map(escaped)))
    end = "\n"
    oddity = draw(st.integers(0, 4))
    if oddity == 0:
        body = "".join(draw(st.lists(st.sampled_from(TOKENS) | named, min_size=1, max_size=3)))
    elif oddity == 1:
        body = draw(st.sampled_from(LEADS)) + body
    elif oddity == 2:
        body += draw(st.sampled_from(TAILS))
    elif oddity == 3:
        end = draw(st.sampled_from(ENDS))
    if draw(st.integers(0, 4)) == 0:
        body = "!" + body
    return body + end


@st.composite
def ignore_files(draw: st.DrawFn, words: list[str]) -> bytes:
    text = draw(st.sampled_from(("", "", "", "\ufeff")))
    text += "".join(draw(st.lists(lines(words), min_size=1, max_size=6)))
    if draw(st.booleans()):
        text = text[:-1]  # no newline at the end of the file
    return text.encode("utf-8", "surrogateescape")


@st.composite
def cases(draw: st.DrawFn) -> Case:
    tree = draw(trees())
    where = draw(st.lists(st.sampled_from(directories(tree)), unique=True, min_size=1, max_size=3))
    ignores = {rel: draw(ignore_files(words(tree, rel))) for rel in where}
    exclude = draw(st.one_of(st.just(b""), ignore_files(words(tree, ""))))
    return Case(tree, ignores, exclude)


def words(tree: Tree, rel: str) -> list[str]:
    """The paths below ``rel`` as its ignore file would name them, and every name."""
    every = paths(tree)
    below = [p[len(rel) + 1 :] for p in every if p.startswith(rel + "/")] if rel else every
    return sorted(set(below) | {p.rsplit("/", 1)[-1] for p in every})


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracle]:
    yield Oracle.create(tmp_path_factory.mktemp("ignore-oracle"))


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases())
def test_the_reader_leaves_in_exactly_the_files_git_lists(oracle: Oracle, case: Case) -> None:
    assert disagreement(oracle, case) is None
