"""Real packages judged by their whole suite as released, with ``-x``: tests that call
pytest.skip() in their body when an optional module is missing (tabulate without numpy,
pandas or wcwidth), parametrized cases skipping for a missing dbm module (six), unittest
skips for another platform or a missing tty (colorama); and the same suites with the ``-x``
in the project's own setup.cfg, pyproject.toml or pytest.ini instead of on the command line.
A suite that passes with skips is a pass: the correct fix lands alone, a wrong one never."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.nights import git
from tests.helpers.suite_runs import suite_runs, trace_events
from tests.realrepos.corpus import WHOLE_SUITES, Package
from tests.realrepos.night import RealRepoNight, assert_landed_alone, assert_nothing_landed

pytestmark = pytest.mark.usefixtures("corpus")

BY_ID = pytest.mark.parametrize("package", WHOLE_SUITES, ids=[p.id for p in WHOLE_SUITES])
#: A wrong fix is tried with the ``-x`` in the project's own config: the harder place for the
#: harness to read it (on the command line it is the same suite failing the same way).
CONFIGURED = [p for p in WHOLE_SUITES if p.config]
BY_CONFIG = pytest.mark.parametrize("package", CONFIGURED, ids=[p.id for p in CONFIGURED])


def _suite(package: Package, repo: Path) -> subprocess.CompletedProcess[str]:
    """The package's test command run the way the harness runs it, without its sandbox: this
    interpreter, the checkout on PYTHONPATH, no plugins loaded from the environment."""
    argv = shlex.split(package.tests)
    assert argv[0] == "python", package.tests
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(repo.parent),
        "PYTHONPATH": str(repo),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [sys.executable, *argv[1:], "-p", "no:cacheprovider", "-rs"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@BY_ID
def test_the_suite_passes_with_skips_as_released_and_stops_at_the_bug(
    package: Package, tmp_path: Path
) -> None:
    """What the nights below rely on, without the harness: a failure here is the corpus's."""
    night = RealRepoNight(package, tmp_path)
    if package.config:
        name, text = package.config
        committed = git(night.repo, "show", f"{night.base}:{name}")
        assert all(line in committed for line in text.splitlines()), committed
    buggy = _suite(package, night.repo)
    assert buggy.returncode == 1, buggy.stdout[-3000:]
    # -x, from the command line or from the project's config
    assert "stopping after 1 failures" in buggy.stdout, buggy.stdout[-3000:]
    source = night.repo / package.source
    source.write_text(source.read_text().replace(package.bad, package.good))
    fixed = _suite(package, night.repo)
    assert fixed.returncode == 0, fixed.stdout[-3000:]
    assert re.search(r"\d+ passed, \d+ skipped", fixed.stdout), fixed.stdout[-3000:]
    source.write_text(source.read_text().replace(package.good, package.wrong))
    wrong = _suite(package, night.repo)
    assert wrong.returncode == 1, wrong.stdout[-3000:]


@BY_ID
def test_the_correct_fix_lands_with_only_its_source_diff(package: Package, tmp_path: Path) -> None:
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.good))
    assert_landed_alone(night, outcome)
    # the start check's run on the base commit and the verify's on the candidate; the goal's
    # verdict on the landed tree is the verify's evidence, not a third run
    assert suite_runs(trace_events(night.run_dir)) == ["start check", "verify"]


@BY_CONFIG
def test_a_wrong_fix_never_lands(package: Package, tmp_path: Path) -> None:
    night = RealRepoNight(package, tmp_path)
    outcome = night.play(night.steps(fix=package.wrong))
    assert_nothing_landed(night, outcome)
