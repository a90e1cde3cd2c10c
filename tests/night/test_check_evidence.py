"""Real pytest runs under the harness's reporter (``overnight.night.testrun``), judged per test,
unsandboxed and in real bubblewrap."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from overnight.config.sandbox import SandboxSpec
from overnight.core.evidence import BaseTests, Judgement, base_tests, judge
from overnight.night.testrun import check_env, pytest_evidence, with_check_additions
from overnight.process import Confinement, run_command, scrubbed_env
from overnight.sandbox.bwrap import build_sandbox
from tests.attacks.test_evidence_attacks import DIST_INFO
from tests.helpers.sandbox import require_bwrap

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = (
    "import sys\n\nimport pytest\n\nfrom calc import add\n\n\n"
    "def test_add():\n    assert add(2, 2) == 4\n\n\n"
    "def test_zero():\n    assert add(0, 0) == 0\n\n\n"
    "@pytest.mark.skipif(sys.platform != 'nowhere', reason='only on nowhere')\n"
    "def test_elsewhere():\n    assert False\n"
)
PYTEST = "python3 -m pytest -q -p no:cacheprovider"


def project(root: Path, calc: str, extra: dict[str, str] | None = None) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text(calc)
    (root / "tests" / "test_calc.py").write_text(TESTS)
    for path, text in (extra or {}).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def check(
    root: Path,
    command: str = PYTEST,
    base: BaseTests | None = None,
    plugins: tuple[str, ...] = (),
    sandbox: Confinement | None = None,
    complete: bool = False,
) -> tuple[int | None, Judgement, BaseTests]:
    with pytest_evidence(plugins, complete=complete) as evidence:
        if sandbox is not None:
            result = run_command(
                command,
                cwd=root,
                timeout_s=120,
                confine=with_check_additions(sandbox, [root], evidence),
                pass_fds=(evidence.fd,),
            )
        else:
            env = check_env(scrubbed_env(), [root], evidence)
            result = run_command(command, cwd=root, timeout_s=120, env=env, pass_fds=(evidence.fd,))
        run = evidence.read()
    return result.exit_code, judge(run, result.exit_code, base), base_tests(command, "c", run)


def test_a_fix_is_met_and_a_platform_skip_on_the_base_stays_allowed(tmp_path: Path) -> None:
    code, judged, base = check(project(tmp_path / "base", BUGGY))
    assert code == 1 and not judged.met and "test_add" in judged.verdict
    assert {n: s.said() for n, s in base.skipped.items()} == {
        "tests/test_calc.py::test_elsewhere": "skipped at a mark: only on nowhere"
    }
    code, judged, _ = check(project(tmp_path / "fixed", FIXED), base=base)
    assert code == 0 and judged.met
    assert judged.verdict == "met: 2 passed; 1 skipped as on the base commit (1: only on nowhere)"


def test_a_planted_dist_info_plugin_forcing_exit_0_is_not_met_on_its_own(tmp_path: Path) -> None:
    root = project(tmp_path / "p", BUGGY, DIST_INFO)
    plain = subprocess.run(PYTEST.split(), cwd=root, capture_output=True)
    assert plain.returncode == 0  # the entry point loads, and forces exit 0
    code, judged, _ = check(root)  # autoload off: the plugin never loads
    assert code == 1 and not judged.met
    # Loaded all the same (listed as a plugin the night needs): exit 0, and still not met.
    code, judged, _ = check(root, plugins=("speedups",))
    assert code == 0 and not judged.met
    assert judged.verdict.startswith("not met: the test run's evidence disagrees")


def test_stopping_at_the_first_failure_leaves_the_rest_missing(tmp_path: Path) -> None:
    _, _, base = check(project(tmp_path / "base", BUGGY), PYTEST + " -x")
    assert len(base.collected) == 3  # collection finished before -x stopped the run
    half = "def add(a, b):\n    return 0 if a == 0 else a - b\n"
    code, judged, _ = check(project(tmp_path / "half", half), PYTEST + " -x", base)
    assert code == 1 and "failed: tests/test_calc.py::test_add" in judged.verdict


def test_the_reporter_works_in_the_sandbox(tmp_path: Path) -> None:
    require_bwrap()
    root = project(tmp_path / "fixed", FIXED)
    sandbox = build_sandbox(SandboxSpec(), sealed=[tmp_path / "sealed"])
    code, judged, base = check(root, sandbox=sandbox)
    assert code == 0 and len(base.collected) == 3
    # Without the base commit's record, a skip is not allowed; with it, it is.
    assert judged.verdict.endswith("(skipped: tests/test_calc.py::test_elsewhere)")
    code, judged, _ = check(root, sandbox=sandbox, base=base)
    assert code == 0 and judged.met, judged.verdict


@pytest.mark.parametrize(
    "command", ["python3 -m pytest -q -p no:cacheprovider tests", "pytest -q -p no:cacheprovider"]
)
def test_a_src_layout_imports_from_the_checkout(tmp_path: Path, command: str) -> None:
    root = tmp_path / "src-layout"
    (root / "src" / "calcpkg").mkdir(parents=True)
    (root / "src" / "calcpkg" / "__init__.py").write_text(FIXED)
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(
        "from calcpkg import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
    )
    plain = subprocess.run(command.split(), cwd=root, capture_output=True)
    assert plain.returncode != 0  # without the layout on the path it cannot import
    # The layout joins sys.path after start-up: a sitecustomize or a pytest.py under src/
    # is never run in place of the interpreter's own start or the installed runner.
    marker = tmp_path / "sitecustomize-ran"
    (root / "src" / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (root / "src" / "pytest.py").write_text("raise SystemExit(0)\n")
    code, judged, _ = check(root, command)
    assert code == 0 and judged.verdict == "met: 1 passed"
    assert not marker.exists()


def test_a_plugin_the_tests_need_loads_only_when_listed(tmp_path: Path) -> None:
    have = subprocess.run(["python3", "-c", "import anyio.pytest_plugin"], capture_output=True)
    if have.returncode != 0:
        pytest.skip("python3 has no anyio (an installed pytest plugin with a fixture)")
    root = project(tmp_path / "p", FIXED)
    (root / "tests" / "test_backend.py").write_text(
        "def test_backend(anyio_backend):\n    assert anyio_backend == 'asyncio'\n"
    )
    with pytest_evidence() as evidence:
        env = check_env(scrubbed_env(), [root], evidence)
        result = run_command(PYTEST, cwd=root, timeout_s=120, env=env, pass_fds=(evidence.fd,))
        run = evidence.read()
    assert result.exit_code == 1  # autoload off: fixture 'anyio_backend' not found
    assert run.errored_at_setup() == ["tests/test_backend.py::test_backend"]
    assert "anyio" in run.plugins_off
    _, _, base = check(root, plugins=("anyio",))
    code, judged, _ = check(root, plugins=("anyio",), base=base)
    assert code == 0 and judged.verdict.startswith("met: 3 passed"), judged.verdict


# A suite as real ones are: skips in the test body for a missing optional module (a skip after
# a failed import, importorskip, a parametrized case), and the bug caught by the first test.
SUITE = """import importlib

import pytest

from calc import add


def test_add():
    assert add(2, 2) == 4


def test_numpy_sum():
    try:
        import numpy_missing_here
    except ImportError:
        pytest.skip("numpy is not installed")
    assert numpy_missing_here


def test_pandas_frame():
    pandas = pytest.importorskip("pandas_missing_here")
    assert pandas


@pytest.mark.parametrize("name", ["json", "dbm_missing_gnu"])
def test_modules(name):
    try:
        importlib.import_module(name)
    except ImportError:
        pytest.skip(f"no module {name}")
    assert add(1, 1) == 2


def test_last():
    assert add(0, 0) == 0
"""


def suite(root: Path, calc: str, extra: dict[str, str] | None = None) -> Path:
    root.mkdir(parents=True)
    (root / "calc.py").write_text(calc)
    (root / "test_suite.py").write_text(SUITE)
    for path, text in (extra or {}).items():
        (root / path).write_text(text)
    return root


BODY_SKIPS = {
    "test_suite.py::test_numpy_sum",
    "test_suite.py::test_pandas_frame",
    "test_suite.py::test_modules[dbm_missing_gnu]",
}


@pytest.mark.parametrize(
    ("command", "config"),
    [
        (PYTEST + " -x", None),
        (PYTEST + " --maxfail=1", None),
        ("python3 -m pytest -q --sw", None),
        (PYTEST, ("pytest.ini", "[pytest]\naddopts = -x\n")),
        (PYTEST, ("setup.cfg", "[tool:pytest]\naddopts = --exitfirst\n")),
        (PYTEST, ("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-x'\n")),
    ],
)
def test_the_base_record_is_complete_whatever_stops_the_run_early(
    tmp_path: Path, command: str, config: tuple[str, str] | None
) -> None:
    extra = dict([config]) if config else None
    base_root = suite(tmp_path / "base", BUGGY, extra)
    # As written, the run stops at the bug: every test after it is unknown.
    _, _, partial = check(base_root, command)
    assert not partial.complete and partial.ran == ["test_suite.py::test_add"]
    _, judged, base = check(base_root, command, complete=True)
    assert not judged.met and base.complete and base.neutralized
    assert set(base.skipped) == BODY_SKIPS
    assert set(base.ran) == {
        "test_suite.py::test_add",
        "test_suite.py::test_modules[json]",
        "test_suite.py::test_last",
    }
    code, judged, _ = check(suite(tmp_path / "fixed", FIXED, extra), command, base)
    assert code == 0 and judged.met, judged.verdict
    assert judged.verdict.startswith("met: 3 passed; 3 skipped as on the base commit (")
    assert "1: numpy is not installed" in judged.verdict
    assert "1: no module dbm_missing_gnu" in judged.verdict


def test_a_test_that_failed_on_the_base_taking_the_suites_own_skip_path_is_not_met(
    tmp_path: Path,
) -> None:
    # The agent makes an import fail so that a test that failed on the base skips "for the
    # environment": test_modules[json] imports a module of the project here.
    tests = SUITE.replace('["json", "dbm_missing_gnu"]', '["calc", "dbm_missing_gnu"]')
    tests = tests.replace("from calc import add", "add = int.__add__")
    buggy = BUGGY + "assert add(1, 1) == 2\n"  # importing calc fails its check on the base
    base_root = suite(tmp_path / "base", buggy)
    (base_root / "test_suite.py").write_text(tests)
    _, _, base = check(base_root, PYTEST + " -x", complete=True)
    assert "test_suite.py::test_modules[calc]" in base.ran
    forged = suite(tmp_path / "forged", FIXED + "raise ImportError('calc is unavailable')\n")
    (forged / "test_suite.py").write_text(tests)
    code, judged, _ = check(forged, PYTEST + " -x", base)
    assert code == 0 and not judged.met
    assert "test_suite.py::test_modules[calc]" in judged.verdict
    assert "ran on the base commit" in judged.verdict


UNITTEST_SUITE = """import sys
import unittest

from calc import add


class TestCalc(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 2), 4)

    @unittest.skipIf(sys.platform != "nowhere", "only on nowhere")
    def test_platform(self):
        self.fail()

    @unittest.skipUnless(sys.platform == "nowhere", "needs nowhere")
    def test_unless(self):
        self.fail()

    def test_optional(self):
        try:
            import numpy_missing_here  # noqa: F401
        except ImportError:
            self.skipTest("numpy is not installed")

    @unittest.expectedFailure
    def test_known_bug(self):
        self.assertEqual(1, 2)


@unittest.skip("the whole class is for another platform")
class TestElsewhere(unittest.TestCase):
    def test_x(self):
        self.fail()
"""


def test_a_unittest_suite_run_by_pytest_keeps_its_own_skips_and_expected_failures(
    tmp_path: Path,
) -> None:
    base_root = suite(tmp_path / "base", BUGGY)
    (base_root / "test_suite.py").write_text(UNITTEST_SUITE)
    _, judged, base = check(base_root, PYTEST + " -x", complete=True)
    assert not judged.met
    assert base.ran == ["test_suite.py::TestCalc::test_add"]
    assert {n.rsplit("::", 1)[1]: s.where for n, s in base.skipped.items()} == {
        "test_platform": "mark",
        "test_unless": "mark",
        "test_optional": "test_suite.py:23",
        "test_known_bug": "mark",
        "test_x": "mark",
    }
    fixed = suite(tmp_path / "fixed", FIXED)
    (fixed / "test_suite.py").write_text(UNITTEST_SUITE)
    code, judged, _ = check(fixed, PYTEST + " -x", base)
    assert code == 0 and judged.met, judged.verdict
    assert "1 xfailed as on the base commit" in judged.verdict
    # skipTest moved to another line (or for another reason): not the base's skip
    moved = suite(tmp_path / "moved", FIXED)
    (moved / "test_suite.py").write_text(
        UNITTEST_SUITE.replace("    def test_optional(self):\n", "    def test_optional(self):\n\n")
    )
    code, judged, _ = check(moved, PYTEST + " -x", base)
    assert code == 0 and not judged.met and "test_optional" in judged.verdict


SET_ORDER = """import pytest

CASES = [(name, object()) for name in {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}]


@pytest.mark.parametrize(("name", "obj"), CASES)
def test_case(name, obj):
    assert name
"""


def test_test_ids_built_from_a_sets_order_are_the_same_in_every_run(tmp_path: Path) -> None:
    # isodate's parametrized ids come from a set's order, which the hash seed decides: the
    # base record's ids must be the candidate's, or every such test is "missing".
    root = project(tmp_path / "p", FIXED, {"tests/test_order.py": SET_ORDER})
    runs = [check(root)[2].collected for _ in range(4)]
    assert all(ids == runs[0] for ids in runs), runs
    assert any("-obj" in n for n in runs[0])


NONE_IN_A_SET = """from datetime import date

import pytest

CASES = {(n, date(2000 + n, 1, 1) if n % 2 else None, f"c{n}") for n in range(12)}


@pytest.mark.parametrize(("n", "when", "name"), CASES)
def test_case(n, when, name):
    assert name == f"c{n}"
"""


def test_a_case_numbered_otherwise_in_another_process_is_the_same_test(tmp_path: Path) -> None:
    # A set of tuples holding None is ordered by addresses (hash(None) before Python 3.12):
    # pytest's ids (when0, when1...) change from one process to the next; the case does not.
    root = project(tmp_path / "p", FIXED, {"tests/test_none.py": NONE_IN_A_SET})
    _, _, base = check(root, complete=True)
    assert any("when" in n for n in base.collected) and base.keys
    for _ in range(3):
        code, judged, _ = check(root, base=base)
        assert code == 0 and judged.met, judged.verdict


SPAWNS = """import subprocess
import sys


def test_a_tool_script_imports_the_package_from_the_checkout():
    code = "from calc import add; assert add(2, 2) == 4"
    assert subprocess.run([sys.executable, "-c", code], cwd="/").returncode == 0
"""


def test_a_subprocess_the_tests_start_imports_from_the_checkout(tmp_path: Path) -> None:
    # docutils' tools/test runs `sys.executable tools/buildhtml.py`, which imports docutils:
    # the checkout is first on the PYTHONPATH the test process hands its children.
    root = project(tmp_path / "p", FIXED, {"tests/test_spawn.py": SPAWNS})
    code, judged, _ = check(root, PYTEST + " tests/test_spawn.py")
    assert code == 0 and judged.met, judged.verdict
