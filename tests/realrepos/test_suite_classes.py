"""Real packages as released, one for each class of suite that real suites have and that a
verdict must read right, judged by the whole suite:

- docutils: a ``unittest`` suite that loops over its cases with ``subTest``; on the base
  commit the bug fails four subtests of one test while a sibling skips for a missing
  markdown parser, and after the fix that sibling still skips: the environment's, not the
  fix's;
- python_multipart: two tests whose node ids are 10 MB long (its unittest metaclass names a
  method after its parameter, ``b"\r\n" * 5_000_000``), both failing on the bug;
- async_timeout: ``--cov`` options in ``setup.cfg``'s ``addopts``, ``asyncio_mode`` and tests
  marked for pytest-asyncio: it starts only with both plugins named.

For each, the correct fix lands alone with the suite run twice by the harness (the start
check, the verify), a wrong fix never lands and a fix that also edits a test is parked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.suite_runs import suite_runs, trace_events
from tests.realrepos.corpus import SUITE_CLASSES, Package
from tests.realrepos.night import RealRepoNight, assert_landed_alone, assert_nothing_landed, explain

pytestmark = pytest.mark.usefixtures("corpus")

BY_CLASS = pytest.mark.parametrize("package", SUITE_CLASSES, ids=[p.id for p in SUITE_CLASSES])


@BY_CLASS
def test_the_correct_fix_lands_alone_and_the_suite_runs_twice(
    package: Package, tmp_path: Path
) -> None:
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.good))
    assert_landed_alone(night, outcome)
    assert suite_runs(trace_events(night.run_dir)) == ["start check", "verify"]


@BY_CLASS
def test_a_wrong_fix_never_lands(package: Package, tmp_path: Path) -> None:
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.wrong))
    assert_nothing_landed(night, outcome)


@BY_CLASS
def test_a_fix_that_also_edits_a_test_is_parked(package: Package, tmp_path: Path) -> None:
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.good, forge=True))
    why = explain(night, outcome)
    assert outcome.result["stop_reason"] != "GOAL_MET", why
    assert night.commits(outcome) == [], why
    (parked,) = outcome.result["plan"]["parked"]
    assert any(package.test_file in c for c in parked["protected_changes"]), why


def test_a_subtest_skipped_on_the_base_stays_skipped_as_the_environments(tmp_path: Path) -> None:
    night = RealRepoNight(SUITE_CLASSES[0], tmp_path)
    outcome = night.play(night.steps(fix=SUITE_CLASSES[0].good))
    assert_landed_alone(night, outcome)
    predicate = outcome.result["predicate"]
    assert "skipped as on the base commit" in predicate["verdict"], predicate
    assert any("no markdown parser available" in s for s in predicate["stayed_skipped"])


def test_a_ten_megabyte_test_id_is_judged_by_name_like_any_other(tmp_path: Path) -> None:
    package = next(p for p in SUITE_CLASSES if p.name == "python_multipart")
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.good))
    assert_landed_alone(night, outcome)
    record = outcome.result["predicate"]
    assert record["verdict"].startswith("met: 188 passed"), record
