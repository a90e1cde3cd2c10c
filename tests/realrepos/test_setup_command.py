"""A repository whose tests need a file git ignores: isodate 0.7.2 as released ignores its
generated ``src/isodate/version.py`` (setuptools-scm writes it), so a clean checkout cannot
import the package. With ``[predicate] setup`` writing the file in every clean checkout, the
correct fix is met; without it, the night is refused before anything is spent, and the
refusal names the file and the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.realrepos.corpus import ISODATE
from tests.realrepos.night import RealRepoNight, assert_landed_alone, assert_nothing_landed

pytestmark = pytest.mark.usefixtures("corpus")


def test_the_version_file_is_ignored_and_left_out_of_the_commit(tmp_path: Path) -> None:
    night = RealRepoNight(ISODATE, tmp_path)
    assert (night.repo / "src/isodate/version.py").is_file()
    assert "src/isodate/version.py" not in night.tracked()


def test_with_the_set_up_command_the_correct_fix_is_met(tmp_path: Path) -> None:
    night = RealRepoNight(ISODATE, tmp_path)
    outcome = night.play(night.steps(fix=ISODATE.good))
    assert_landed_alone(night, outcome)
    setup_logs = list((night.run_dir / "artifacts").glob("setup-*.log"))
    assert setup_logs, "the set-up command's output is kept like a verify's"


def test_with_the_set_up_command_a_wrong_fix_lands_nothing(tmp_path: Path) -> None:
    night = RealRepoNight(ISODATE, tmp_path)
    outcome = night.play(night.steps(fix=ISODATE.wrong))
    assert_nothing_landed(night, outcome)


def test_without_it_the_refusal_names_the_ignored_file_and_the_option(tmp_path: Path) -> None:
    night = RealRepoNight(ISODATE, tmp_path)
    night.with_setup = False
    outcome = night.play(night.steps(fix=ISODATE.good))
    assert outcome.exit_code == 64, outcome.stderr
    assert "src/isodate/version.py" in outcome.stderr
    assert "[predicate] setup" in outcome.stderr
    assert not night.run_dir.exists()
