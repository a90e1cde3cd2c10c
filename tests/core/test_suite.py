"""Which pytest commands run the same suite (``overnight.core.suite``): a base record serves a
check only when the check runs that suite or a part of it; anything else gets a record of
its own."""

from __future__ import annotations

import pytest

from overnight.core.evidence import BaseTests, Scope
from overnight.core.suite import read_call, record_for, scope_within

SUITE = "python -m pytest -q -x"


@pytest.mark.parametrize(
    "check",
    [
        "python -m pytest -q -x",
        "python -m pytest",
        "python -m pytest -v --tb=short -rA",
        "python -m pytest -q --maxfail=3 --lf --ff --nf --sw",
        "python -m pytest -qx",
        "python -m pytest --exitfirst -q",
    ],
)
def test_the_same_suite_whatever_stops_or_prints_it(check: str) -> None:
    assert scope_within(SUITE, check) == Scope()


@pytest.mark.parametrize(
    ("check", "paths", "narrowed"),
    [
        ("python -m pytest -q tests/test_keys.py", ("tests/test_keys.py",), False),
        ("python -m pytest ./tests/", ("tests",), False),
        ("python -m pytest tests/test_a.py::test_b", ("tests/test_a.py::test_b",), False),
        ("python -m pytest -q -k dictionary", (), True),
        ("python -m pytest -q test_six.py -k dictionary", ("test_six.py",), True),
        ("python -m pytest -m 'not slow'", (), True),
    ],
)
def test_a_part_of_the_suite_is_within_it(
    check: str, paths: tuple[str, ...], narrowed: bool
) -> None:
    assert scope_within(SUITE, check) == Scope(paths=paths, narrowed=narrowed)


@pytest.mark.parametrize(
    "check",
    [
        "pytest -q",  # another invocation
        "python3 -m pytest -q",
        "python -m pytest -p no:cacheprovider",  # another option that changes the run
        "python -m pytest --runslow",
        "python -m pytest -s",
        "python -m pytest --ignore=tests/slow",  # ignored files are not reported deselected
        "python -m pytest -q --unknown-option value",
        "python -m pytest -Z",  # an unknown short option: its arity is unknown
        "ruff check .",
        "python -m pytest 'unclosed",
    ],
)
def test_another_suite_or_what_cannot_be_read_is_not_shared(check: str) -> None:
    assert scope_within(SUITE, check) is None


def test_a_record_of_some_paths_serves_only_checks_within_them() -> None:
    record = "python -m pytest tests/unit"
    assert scope_within(record, "python -m pytest tests/unit/test_a.py") == Scope(
        paths=("tests/unit/test_a.py",)
    )
    assert scope_within(record, "python -m pytest tests/unit_extra") is None
    assert scope_within(record, "python -m pytest tests") is None
    assert scope_within(record, "python -m pytest") is None  # the whole suite is more
    narrowed = "python -m pytest -k fast"
    assert scope_within(narrowed, "python -m pytest -k fast tests/a.py") is not None
    assert scope_within(narrowed, "python -m pytest") is None  # the record left tests out


def test_a_scope_holds_the_node_ids_under_its_paths() -> None:
    scope = Scope(paths=("tests/test_a.py", "tests/unit"))
    assert scope.holds("tests/test_a.py::test_x")
    assert scope.holds("tests/test_a.py::TestC::test_y[1]")
    assert scope.holds("tests/unit/test_b.py::test_z")
    assert not scope.holds("tests/test_a.pyc::test_x")
    assert not scope.holds("tests/unit_extra/test_b.py::test_z")
    assert Scope().holds("anything")


def test_the_record_kept_for_a_check_is_its_own_or_a_complete_one_of_the_same_commit() -> None:
    whole = BaseTests(command=SUITE, commit="c1", complete=True)
    partial = BaseTests(command="python -m pytest -x tests", commit="c1", complete=False)
    other = BaseTests(command=SUITE, commit="c0", complete=True)
    part = "python -m pytest tests/test_a.py"
    assert record_for({SUITE: whole}, "c1", part, part) == (
        whole,
        Scope(paths=("tests/test_a.py",)),
    )
    assert record_for({SUITE: other}, "c1", part, part) is None  # another base commit
    # a record of a run stopped early knows only part of its suite: never shared
    assert record_for({"p": partial}, "c1", part, "python -m pytest tests/test_a.py") is None
    assert record_for({part: partial}, "c1", part, part) == (partial, Scope())


def test_a_call_reads_its_words() -> None:
    call = read_call(["python", "-m", "pytest", "-qx", "-k", "a and b", "tests", "--", "-x.py"])
    assert call is not None
    assert call.invocation == ("python", "-m", "pytest")
    assert call.paths == ("tests", "-x.py")
    assert call.narrow == (("-k", "a and b"),)
    assert read_call("echo pytest-like") is None
