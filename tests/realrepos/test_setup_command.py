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


def test_init_writes_the_set_up_that_makes_the_ignored_version_file(tmp_path: Path) -> None:
    # setuptools-scm's write_to names the file; the checkout holds it, git does not: init
    # writes a set-up that makes it with the same text, and the night's start check passes.
    import tomllib

    from tests.helpers.project import overnight

    repo = RealRepoNight(ISODATE, tmp_path).repo
    goal = "Fix the bug in isodate so that the whole suite passes, without editing tests."
    done = overnight("init", str(repo), "--goal", goal, "--provider", "script")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "src/isodate/version.py is generated and untracked" in done.stdout
    spec = tomllib.loads((repo / "night.toml").read_text())
    assert "src/isodate/version.py" in spec["predicate"]["setup"]
    checked = overnight("check", str(repo / "night.toml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # without the version file in the checkout, the comment asks for the command
    (repo / "src/isodate/version.py").unlink()
    again = overnight("init", str(repo), "--goal", goal, "--provider", "script", "--force")
    spec = tomllib.loads((repo / "night.toml").read_text())
    assert "setup" not in spec["predicate"]
    assert "name the command that writes it" in (repo / "night.toml").read_text()
    assert again.returncode != 0  # the check it runs refuses, naming the file
    assert "src/isodate/version.py" in again.stdout + again.stderr
