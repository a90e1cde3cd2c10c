"""Real layouts verify without PYTHONPATH set by hand, and the goal predicate is checked on a
clean checkout of the base commit before anything is spent (CLI nights, real git, real
bubblewrap, the scripted model)."""

from __future__ import annotations

import subprocess

import pytest

from tests.attacks.night import TEST, AttackNight, write
from tests.helpers.nights import git

SRC_BUGGY = "def add(a, b):\n    return a - b\n"
SRC_FIXED = "def add(a, b):\n    return a + b\n"
SRC_TEST = "from calcpkg import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
NS_TEST = "from acme.calcpkg import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
GITIGNORE = "__pycache__/\n.pytest_cache/\n"

LAYOUTS = {
    "src package, python -m pytest": (
        {"src/calcpkg/__init__.py": SRC_BUGGY, "tests/test_calc.py": SRC_TEST},
        "src/calcpkg/__init__.py",
        "python3 -m pytest -q -p no:cacheprovider",
    ),
    "src namespace package, pytest": (
        {"src/acme/calcpkg/__init__.py": SRC_BUGGY, "tests/test_calc.py": NS_TEST},
        "src/acme/calcpkg/__init__.py",
        "pytest -q -p no:cacheprovider",
    ),
    "flat package, pytest": (
        {"calcpkg/__init__.py": SRC_BUGGY, "tests/test_calc.py": SRC_TEST},
        "calcpkg/__init__.py",
        "pytest -q -p no:cacheprovider",
    ),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_correct_fix_lands_on_each_layout(
    tmp_path_factory: pytest.TempPathFactory, layout: str
) -> None:
    files, source, predicate = LAYOUTS[layout]
    night = AttackNight(
        tmp_path_factory.mktemp("layout"),
        files={**files, ".gitignore": GITIGNORE},
        predicate=predicate,
        commands=["python3", "pytest"],
        sandbox={"mode": "on"},
        goal="Make add return the sum of its arguments, without editing the tests.",
    )
    outcome = night.play([write(source, SRC_FIXED)])
    r = outcome.result
    assert (r["stop_reason"], outcome.exit_code) == ("GOAL_MET", 0), r.get("plan")
    assert night.branch_changed_paths(outcome) == [source]
    assert [v["evidence"] for v in r["verified"]] == ["tests"]
    assert r["predicate"]["evidence"] == "tests"
    assert r["predicate"]["verdict"] == "met: 1 passed"
    assert r["sandbox"]["unsandboxed_commands"] == 0
    audit = night.cli("audit", night.run_dir)  # re-runs the verify the same way: it agrees
    assert audit.exit_code == 0, audit.stdout[-2000:]


def test_a_misspelt_predicate_refuses_the_night_before_any_model_call(
    night: AttackNight,
) -> None:
    night.predicate = "pytset -q"
    outcome = night.play([write("calc.py", "def add(a, b):\n    return a + b\n")])
    assert outcome.exit_code == 64, outcome.stderr
    assert "predicate.command" in outcome.stderr and "`pytset -q`" in outcome.stderr
    assert "exit 127" in outcome.stderr and "fix: check the command's spelling" in outcome.stderr
    assert night.requests() == []  # no model call
    assert not night.run_dir.exists()
    assert not (night.home / "runs").exists()
    assert git(night.repo, "branch", "--list", "overnight/*") == ""
    assert night.repo_state() == night._before_repo


GENERATED = {
    "calcpkg/__init__.py": "from calcpkg._version import version\n\n" + SRC_BUGGY,
    "tests/test_calc.py": SRC_TEST,
    ".gitignore": GITIGNORE + "calcpkg/_version.py\n",
}


def test_an_ignored_generated_module_is_named_before_the_night(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    night = AttackNight(
        tmp_path_factory.mktemp("generated"),
        files=GENERATED,
        predicate="python3 -m pytest -q -p no:cacheprovider",
    )
    # What the package's build generates in the user's checkout, and git ignores.
    (night.repo / "calcpkg" / "_version.py").write_text("version = '1.0'\n")
    night._before_repo = night.repo_state()
    outcome = night.play([write("calcpkg/__init__.py", SRC_FIXED)])
    assert outcome.exit_code == 64, outcome.stderr
    err = outcome.stderr
    assert "cannot run on a clean checkout of the base commit" in err
    assert "errors collecting tests/test_calc.py" in err or "exit 2" in err
    assert "calcpkg/_version.py" in err  # the file the workspace has and the commit lacks
    assert "different outcome in your checkout (exit 1)" in err
    assert "fix: commit what the tests need" in err
    assert night.requests() == [] and not night.run_dir.exists()
    assert night.repo_state() == night._before_repo  # the check wrote nothing there


def test_a_predicate_that_collects_no_test_refuses_the_night(night: AttackNight) -> None:
    night.predicate = "python3 -m pytest -q -p no:cacheprovider -k no_such_test"
    outcome = night.play([])
    assert outcome.exit_code == 64, outcome.stderr
    assert "pytest" in outcome.stderr and "no tests" in outcome.stderr
    assert night.requests() == [] and not night.run_dir.exists()


def test_the_reporter_is_unreadable_to_the_checkout_and_lost_with_the_run(
    night: AttackNight,
) -> None:
    # Nothing of the harness's reporter is left in the worktree, the checkout or the
    # harness's temporary directory (its own here: other nights may share the machine's /tmp).
    night.harness_tmp = night.tmp / "harness-tmp"
    night.harness_tmp.mkdir()
    outcome = night.play([write("calc.py", SRC_FIXED)])
    assert outcome.result["stop_reason"] == "GOAL_MET"
    assert "verify_evidence" in (night.run_dir / "trace.jsonl").read_text()  # the reporter ran
    assert not [p.name for p in night.harness_tmp.iterdir() if "evidence" in p.name]
    assert TEST in (night.repo / "tests" / "test_calc.py").read_text()


def test_a_predicate_passing_only_in_the_users_checkout_is_named_and_the_night_goes_on(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    fallback = (
        "try:\n    from _local import add\nexcept ImportError:\n\n"
        "    def add(a, b):\n        return a - b\n"
    )
    night = AttackNight(
        tmp_path_factory.mktemp("local"),
        files={
            "calc.py": fallback,
            "tests/test_calc.py": TEST,
            ".gitignore": GITIGNORE + "_local.py\n",
        },
    )
    (night.repo / "_local.py").write_text(SRC_FIXED)  # ignored: the night never sees it
    night._before_repo = night.repo_state()
    outcome = night.play([write("calc.py", SRC_FIXED)])
    r = outcome.result
    assert (r["stop_reason"], outcome.exit_code) == ("GOAL_MET", 0)
    [note] = r["predicate"]["at_start"]
    assert "different outcome in your checkout (met (exit 0))" in note
    assert "(exit 1)" in note and "_local.py" in note
    assert "before the night:" in night.cli("report", night.run_dir).stdout
    night.assert_contained(outcome)


def test_tests_that_need_an_installed_plugin_are_named_before_the_night(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    have = subprocess.run(["python3", "-c", "import anyio.pytest_plugin"], capture_output=True)
    if have.returncode != 0:
        pytest.skip("python3 has no anyio (an installed pytest plugin with a fixture)")
    backend = "def test_backend(anyio_backend):\n    assert anyio_backend == 'asyncio'\n"
    night = AttackNight(
        tmp_path_factory.mktemp("plugin"),
        files={
            "calc.py": SRC_BUGGY,
            "tests/test_calc.py": TEST,
            "tests/test_backend.py": backend,
            ".gitignore": GITIGNORE,
        },
    )
    outcome = night.play([write("calc.py", SRC_FIXED)])
    r = outcome.result
    assert r["stop_reason"] != "GOAL_MET"  # its fixture's plugin never loads: not passed
    [note] = r["predicate"]["at_start"]
    assert "installed pytest plugins that did not load" in note and "anyio" in note
    assert "1 test(s) errored at set-up" in note and "[predicate] pytest_plugins" in note
