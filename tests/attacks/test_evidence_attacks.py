"""Attacks on the evidence: code under test makes a failing test run look like a passing one
without touching a protected file. Each gave a false GOAL_MET on an exit code alone; judged
per test on the harness's own reporter, each is "not met", and says why."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.attacks.night import BUGGY, FIXED, AttackNight, Outcome, write

FORCED_EXIT_PLUGIN = (
    "import pytest\n\n\n"
    "@pytest.hookimpl(trylast=True)\n"
    "def pytest_sessionfinish(session, exitstatus):\n"
    "    session.exitstatus = 0\n"
)

DIST_INFO = {
    "speedups-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: speedups\nVersion: 1.0\n",
    "speedups-1.0.dist-info/entry_points.txt": "[pytest11]\nspeedups = speedups\n",
    "speedups.py": FORCED_EXIT_PLUGIN,
}

EXIT_AT_IMPORT = "import os\n\nos._exit(0)\n\n" + BUGGY

SKIP_WHEN_RUN = "import pytest\n\n\ndef add(a, b):\n    pytest.skip('not on this machine')\n"

XFAIL_WHEN_RUN = "import pytest\n\n\ndef add(a, b):\n    pytest.xfail('known issue')\n"

REWRITE_REPORTS = """import gc


def _forge():
    try:
        import pytest
        from _pytest.config import Config
    except ImportError:
        return
    for obj in gc.get_objects():
        if isinstance(obj, Config):

            class Forge:
                @pytest.hookimpl(hookwrapper=True)
                def pytest_runtest_makereport(self, item, call):
                    outcome = yield
                    report = outcome.get_result()
                    if report.when == "call":
                        report.outcome = "passed"
                        report.longrepr = None

            obj.pluginmanager.register(Forge(), "forge")
            return


_forge()


def add(a, b):
    return a - b
"""

PATCH_THE_RUNNER = (
    "import _pytest.python\n\n_pytest.python.Function.runtest = lambda self: None\n\n" + BUGGY
)

EXIT_HANDLER = "import atexit\nimport os\n\natexit.register(lambda: os._exit(0))\n\n" + BUGGY

ATTACKS: dict[str, tuple[dict[str, str], str]] = {
    "dist-info plugin": (DIST_INFO, "failed: tests/test_calc.py::test_add"),
    "os._exit at import": ({"calc.py": EXIT_AT_IMPORT}, "not met: the test run gave no evidence"),
    "pytest.skip": ({"calc.py": SKIP_WHEN_RUN}, "skipped: tests/test_calc.py::test_add"),
    "pytest.xfail": ({"calc.py": XFAIL_WHEN_RUN}, "xfailed: tests/test_calc.py::test_add"),
    "reports rewritten": (
        {"calc.py": REWRITE_REPORTS},
        "not met: the test run's evidence disagrees",
    ),
    "exit handler": ({"calc.py": EXIT_HANDLER}, "not met: the test run's evidence disagrees"),
    "runner patched at import": (
        {"calc.py": PATCH_THE_RUNNER},
        "replaced the runner's own _pytest.python.Function.runtest",
    ),
}


def forged_exit(repo: Path, tmp_path: Path, files: dict[str, str]) -> int:
    """The predicate's exit in a copy of ``repo`` holding ``files``, run as a user would run
    it: what an exit code alone would conclude."""
    copy = tmp_path / "forged"
    subprocess.run(["cp", "-r", str(repo), str(copy)], check=True)
    for path, text in files.items():
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / path).write_text(text)
    done = subprocess.run(
        ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=copy, capture_output=True
    )
    return done.returncode


def assert_not_met(night: AttackNight, outcome: Outcome, said: str) -> None:
    r: dict[str, Any] = outcome.result
    assert (r["stop_reason"], outcome.exit_code) == ("QUEUE_EMPTY_GOAL_UNMET", 3), outcome.stderr
    predicate = r["predicate"]
    assert predicate["met"] is False and predicate["evidence"] == "tests"
    [parked] = r["plan"]["parked"]
    assert r["verified"] == []
    assert night.branch_commits(outcome) == []
    if not parked["protected_changes"]:  # import machinery is protected too: parked earlier
        assert said in parked["detail"], parked["detail"]
    night.assert_contained(outcome)


@pytest.mark.parametrize("name", list(ATTACKS))
def test_the_forgery_passes_on_an_exit_code_alone(
    night: AttackNight, tmp_path: Path, name: str
) -> None:
    files, _ = ATTACKS[name]
    assert forged_exit(night.repo, tmp_path, files) == 0


@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_forged_pass_is_not_met(night: AttackNight, name: str) -> None:
    files, said = ATTACKS[name]
    outcome = night.play([write(path, text) for path, text in files.items()])
    assert_not_met(night, outcome, said)


def test_a_verified_change_that_reaches_into_the_runner_is_shown(night: AttackNight) -> None:
    reaching = "import atexit\n\natexit.register(print)\n\n\ndef add(a, b):\n    return a + b\n"
    outcome = night.play([write("calc.py", reaching), write("notes.txt", "pytest\n")])
    r = outcome.result
    assert (r["stop_reason"], outcome.exit_code) == ("GOAL_MET", 0)
    [verified] = r["verified"]
    assert verified["evidence"] == "tests"
    assert verified["touches_runner"] == ["calc.py", "notes.txt"]
    report = night.cli("report", night.run_dir).stdout
    assert "touches the test runner (calc.py, notes.txt): read its diff" in report
    night.assert_contained(outcome)


def test_an_honest_fix_touches_nothing_of_the_runner(night: AttackNight) -> None:
    outcome = night.play([write("calc.py", FIXED)])
    [verified] = outcome.result["verified"]
    assert verified["touches_runner"] == [] and verified["evidence"] == "tests"
    assert outcome.result["predicate"]["verdict"] == "met: 1 passed"
