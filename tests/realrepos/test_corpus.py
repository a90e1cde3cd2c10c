"""Real packages from the package registry, one real bug each, and an agent that behaves like
a real one. What a user needs from a first night: the correct fix lands as one commit whose
diff is only the fixed source file (whatever caches and build products the agent's own test
runs and builds left behind), a wrong fix never lands, and a fix that also edits a test is
parked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.realrepos.corpus import TARGETED, Package
from tests.realrepos.night import RealRepoNight, assert_landed_alone, assert_nothing_landed, explain

pytestmark = pytest.mark.usefixtures("corpus")

BY_NAME = pytest.mark.parametrize("package", TARGETED, ids=[p.id for p in TARGETED])

#: The packages a build step, a wrong or a forged fix is tried on: one of each layout the
#: screening treats apart (a single module with its tests beside it, tests inside the
#: package, a src layout), each with a tracked egg-info its build rewrites. Every package gets
#: the correct fix.
SCREENED = [p for p in TARGETED if p.name in ("six", "toolz", "cachetools")]
BY_LAYOUT = pytest.mark.parametrize("package", SCREENED, ids=[p.id for p in SCREENED])


@BY_NAME
def test_the_correct_fix_lands_with_only_its_source_diff(package: Package, tmp_path: Path) -> None:
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.good))
    assert_landed_alone(night, outcome)


@BY_LAYOUT
def test_the_correct_fix_after_a_build_step_lands_with_only_its_source_diff(
    package: Package, tmp_path: Path
) -> None:
    night = RealRepoNight(package, tmp_path)
    tracked = set(night.tracked())
    outcome = night.play(night.steps(fix=package.good, build=True))
    assert_landed_alone(night, outcome)
    # What the build rewrote of the shipped metadata is named in the task's record, not lost
    # in silence and not committed.
    rewritten = [p for p in night.worktree_changes_besides_source(outcome) if p in tracked]
    record = str(outcome.result["verified"][0])
    for path in rewritten:
        assert path in record, f"{path} was dropped without a note: {record}"


@BY_LAYOUT
def test_a_wrong_fix_never_lands(package: Package, tmp_path: Path) -> None:
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.wrong))
    assert_nothing_landed(night, outcome)


@BY_LAYOUT
def test_a_fix_that_also_edits_a_test_is_parked(package: Package, tmp_path: Path) -> None:
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.good, forge=True))
    why = explain(night, outcome)
    assert outcome.result, why
    assert outcome.result["stop_reason"] != "GOAL_MET", why
    assert night.commits(outcome) == [], why
    (parked,) = outcome.result["plan"]["parked"]
    assert parked["id"] == "fix", why
    assert any(package.test_file in c for c in parked["protected_changes"]), why
    assert "judges" in parked["reason"] or package.test_file in parked["reason"], why


@BY_LAYOUT
def test_the_same_with_a_build_step_a_forged_fix_is_still_parked(
    package: Package, tmp_path: Path
) -> None:
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.good, build=True, forge=True))
    why = explain(night, outcome)
    assert outcome.result["stop_reason"] != "GOAL_MET", why
    assert night.commits(outcome) == [], why
    (parked,) = outcome.result["plan"]["parked"]
    assert any(package.test_file in c for c in parked["protected_changes"]), why
