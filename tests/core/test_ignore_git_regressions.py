"""Ignore lines where the reader once disagreed with git, one test per kind: each writes a
minimal tree and ``.gitignore``, asks git which files it leaves in, and checks the reader
leaves in the same ones (named here, so that a change in either side shows)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.ignore_oracle import Case, Oracle, Tree, disagreement


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracle]:
    yield Oracle.create(tmp_path_factory.mktemp("ignore-oracle"))


def agrees(oracle: Oracle, tree: Tree, ignore: bytes, kept: set[str]) -> None:
    """The reader leaves in what git does, and that is ``kept`` (with the ignore file)."""
    assert disagreement(oracle, Case(tree, {"": ignore})) is None
    expected = {p.encode("utf-8", "surrogateescape") for p in kept | {".gitignore"}}
    assert oracle.reader_untracked() == expected


FILES: Tree = {"notes": None, "notes\r": None, "x": None, "x\rnotes": None}


@pytest.mark.parametrize(
    ("ignore", "kept"),
    [
        (b"x\rnotes\n", {"notes", "notes\r", "x"}),
        (b"x\x0cnotes\n", {"notes", "notes\r", "x", "x\rnotes"}),
        ("x\u2028notes\n".encode(), {"notes", "notes\r", "x", "x\rnotes"}),
        (b"notes\r\n", {"notes\r", "x", "x\rnotes"}),
        (b"notes\r\r\n", {"notes", "x", "x\rnotes"}),
        (b"notes\r", {"notes\r", "x", "x\rnotes"}),
    ],
)
def test_lines_end_at_lf_only_and_one_cr_before_it_goes(
    oracle: Oracle, ignore: bytes, kept: set[str]
) -> None:
    agrees(oracle, FILES, ignore, kept)


@pytest.mark.parametrize(
    ("ignore", "kept"),
    [
        (b"\xef\xbb\xbfnotes\n", {"x"}),
        (b"\xef\xbb\xbf#notes\nx\n", {"notes"}),
        (b"x\n\xef\xbb\xbfnotes\n", {"notes"}),
    ],
)
def test_a_byte_order_mark_is_skipped_at_the_start_of_the_file_only(
    oracle: Oracle, ignore: bytes, kept: set[str]
) -> None:
    agrees(oracle, {"notes": None, "x": None}, ignore, kept)


def test_a_trailing_tab_is_part_of_the_pattern(oracle: Oracle) -> None:
    agrees(oracle, {"notes": None, "notes\t": None}, b"notes\t\n", {"notes"})


@pytest.mark.parametrize(
    ("ignore", "kept"),
    [
        (b"notes\\\\ \n", {"notes\\ ", "notes "}),  # an escaped backslash: the space goes
        (b"notes\\ \n", {"notes\\", "notes\\ "}),  # an escaped space stays
        (b"notes\\\\\\ \n", {"notes\\", "notes "}),
    ],
)
def test_trailing_spaces_go_unless_escaped(oracle: Oracle, ignore: bytes, kept: set[str]) -> None:
    agrees(oracle, {"notes\\": None, "notes\\ ": None, "notes ": None}, ignore, kept)


@pytest.mark.parametrize("ignore", [b"//notes\n", b"notes//\n", b"//notes//\n"])
def test_a_doubled_leading_or_trailing_slash_matches_nothing(oracle: Oracle, ignore: bytes) -> None:
    tree: Tree = {"notes": {"f": None}, "d": {"notes": None}}
    agrees(oracle, tree, ignore, {"notes/f", "d/notes"})


@pytest.mark.parametrize(
    ("ignore", "kept"),
    [
        (b"n?\n", {"né", "nß"}),
        (b"n??\n", {"nx"}),
        ("n[é]\n".encode(), {"né", "nß", "nx"}),
        ("n[é][é]\n".encode(), {"nß", "nx"}),
        (b"n[[:alpha:]]\n", {"né", "nß"}),
        (b"n[!x]\n", {"né", "nß", "nx"}),
        (b"n[!x][!x]\n", {"nx"}),
    ],
)
def test_patterns_match_the_bytes_of_non_ascii_names(
    oracle: Oracle, ignore: bytes, kept: set[str]
) -> None:
    agrees(oracle, {"né": None, "nß": None, "nx": None}, ignore, kept)


@pytest.mark.parametrize(
    ("ignore", "kept"),
    [(b"**\\/b\n", {"b"}), (b"x/**\\/b\n", {"b", "x/b"})],
)
def test_a_double_star_before_an_escaped_slash_crosses_directories(
    oracle: Oracle, ignore: bytes, kept: set[str]
) -> None:
    tree: Tree = {"b": None, "x": {"b": None, "y": {"b": None}}}
    agrees(oracle, tree, ignore, kept)


@pytest.mark.parametrize("ignore", [b"n[[:foo:]]\n", b"n[[:ALPHA:]]\n", b"n[[::]]\n"])
def test_an_unknown_class_name_matches_nothing(oracle: Oracle, ignore: bytes) -> None:
    tree: Tree = {"n:]": None, "nf]": None, "n[]": None, "nA": None, "no]": None}
    agrees(oracle, tree, ignore, set(tree))


DETAILS: Tree = {
    "a": {"b": None, "x": {"b": None}},
    "ab": {"b": None, "x": {"b": None}},
    "a.txt": None,
    "b": None,
    "z.txt": None,
    "\x0c": None,
    "\t": None,
}


@pytest.mark.parametrize(
    ("ignore", "ignored"),
    [
        # A '**' right after the pattern's leading plain run crosses directories...
        (b"a**/b\n", {"a/b", "a/x/b", "ab/b", "ab/x/b"}),
        (b"/a**\n", {"a/b", "a/x/b", "ab/b", "ab/x/b", "a.txt"}),
        # ...one after a wildcard does not.
        (b"a?**/b\n", {"ab/b"}),
        (b"[z-a].txt\n", {"z.txt"}),  # a range's first end is in it, even reversed
        (b"[[:space:]]\n", {"\t"}),  # git's own table: no form feed
    ],
)
def test_other_wildmatch_details(oracle: Oracle, ignore: bytes, ignored: set[str]) -> None:
    every = {"a/b", "a/x/b", "ab/b", "ab/x/b", "a.txt", "b", "z.txt", "\x0c", "\t"}
    agrees(oracle, DETAILS, ignore, every - ignored)
