"""Real packages from the package registry, one real bug each, and an agent that behaves like
a real one. What a user needs from a first night: the correct fix lands as one commit whose
diff is only the fixed source file (whatever caches and build products the agent's own test
runs and builds left behind), a wrong fix never lands, and a fix that also edits a test is
parked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.realrepos.corpus import PACKAGES, Package
from tests.realrepos.night import Outcome, RealRepoNight

pytestmark = pytest.mark.usefixtures("corpus")

BY_NAME = pytest.mark.parametrize("package", PACKAGES, ids=[p.name for p in PACKAGES])


def _explain(night: RealRepoNight, outcome: Outcome) -> str:
    parked = outcome.result.get("plan", {}).get("parked")
    return (
        f"{night.package.name} ({night.package.layout}): exit {outcome.exit_code}, "
        f"{outcome.result.get('stop_reason')}, parked {parked}\n{outcome.stderr[-3000:]}"
    )


def _assert_landed_alone(night: RealRepoNight, outcome: Outcome) -> None:
    why = _explain(night, outcome)
    assert outcome.exit_code == 0, why
    assert outcome.result["stop_reason"] == "GOAL_MET", why
    assert [t["id"] for t in outcome.result["verified"]] == ["fix"], why
    assert len(night.commits(outcome)) == 1, why
    assert night.changed(outcome) == [night.package.source], why
    assert night.fixed_on_branch(outcome)


@BY_NAME
def test_the_correct_fix_lands_with_only_its_source_diff(package: Package, tmp_path: Path) -> None:
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.good))
    _assert_landed_alone(night, outcome)


@BY_NAME
def test_the_correct_fix_after_a_build_step_lands_with_only_its_source_diff(
    package: Package, tmp_path: Path
) -> None:
    night = RealRepoNight(package, tmp_path)
    tracked = set(night.tracked())
    outcome = night.play(night.steps(fix=package.good, build=True))
    _assert_landed_alone(night, outcome)
    # What the build rewrote of the shipped metadata is named in the task's record, not lost
    # in silence and not committed.
    rewritten = [p for p in night.worktree_changes_besides_source(outcome) if p in tracked]
    record = str(outcome.result["verified"][0])
    for path in rewritten:
        assert path in record, f"{path} was dropped without a note: {record}"


@BY_NAME
def test_a_wrong_fix_never_lands(package: Package, tmp_path: Path) -> None:
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.wrong))
    why = _explain(night, outcome)
    assert outcome.result, why
    assert outcome.result["stop_reason"] != "GOAL_MET", why
    assert outcome.exit_code != 0, why
    assert night.commits(outcome) == [], why
    assert [t["id"] for t in outcome.result["plan"]["parked"]] == ["fix"], why


@BY_NAME
def test_a_fix_that_also_edits_a_test_is_parked(package: Package, tmp_path: Path) -> None:
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.good, forge=True))
    why = _explain(night, outcome)
    assert outcome.result, why
    assert outcome.result["stop_reason"] != "GOAL_MET", why
    assert night.commits(outcome) == [], why
    (parked,) = outcome.result["plan"]["parked"]
    assert parked["id"] == "fix", why
    assert any(package.test_file in c for c in parked["protected_changes"]), why
    assert "judges" in parked["reason"] or package.test_file in parked["reason"], why


@BY_NAME
def test_the_same_with_a_build_step_a_forged_fix_is_still_parked(
    package: Package, tmp_path: Path
) -> None:
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.good, build=True, forge=True))
    why = _explain(night, outcome)
    assert outcome.result["stop_reason"] != "GOAL_MET", why
    assert night.commits(outcome) == [], why
    (parked,) = outcome.result["plan"]["parked"]
    assert any(package.test_file in c for c in parked["protected_changes"]), why
