"""Subtests are tests: each ``unittest`` ``subTest`` and each pytest ``subtests.test`` has its
own outcome, its own skip site, and the base record's rules apply to it alone."""

from __future__ import annotations

from pathlib import Path

from tests.night.test_check_evidence import PYTEST, check

BUGGY = "def encode(text, codec):\n    return text.upper()\n"
FIXED = "def encode(text, codec):\n    return f'{codec}:{text}'\n"

# The shape of a released suite with optional backends: one test loops over the codecs,
# skipping a subtest for each backend that is not installed here, and checks the others.
UNITTEST_CODECS = """import importlib.util
import unittest

from codecs_lib import encode

CODECS = ["plain", "zlib", "zstandard_backend", "brotli_backend"]


class TestCodecs(unittest.TestCase):
    def test_round_trip(self):
        for codec in CODECS:
            with self.subTest(codec=codec):
                if codec.endswith("_backend") and importlib.util.find_spec(codec) is None:
                    self.skipTest(f"{codec} is not installed")
                self.assertEqual(encode("x", codec), f"{codec}:x")
"""

PYTEST_CODECS = """import importlib.util

import pytest

from codecs_lib import encode

CODECS = ["plain", "zlib", "zstandard_backend", "brotli_backend"]


def test_round_trip(subtests):
    for codec in CODECS:
        with subtests.test(msg="codec", codec=codec):
            if codec.endswith("_backend") and importlib.util.find_spec(codec) is None:
                pytest.skip(f"{codec} is not installed")
            assert encode("x", codec) == f"{codec}:x"
"""


def suite(root: Path, lib: str, tests: str) -> Path:
    root.mkdir(parents=True)
    (root / "codecs_lib.py").write_text(lib)
    (root / "test_codecs.py").write_text(tests)
    return root


def test_a_unittest_subtest_skipped_for_a_missing_backend_stays_the_environments(
    tmp_path: Path,
) -> None:
    base_root = suite(tmp_path / "base", BUGGY, UNITTEST_CODECS)
    code, judged, base = check(base_root, PYTEST, complete=True)
    assert code != 0 and not judged.met
    subtests = [n for n in base.collected if " \u203a " in n]
    assert len(subtests) == 4, base.collected
    # on the base: two subtests fail, two skip for the missing backends, each on its own
    assert sorted(n.split(" \u203a ")[1] for n in base.skipped) == [
        "(codec='brotli_backend')",
        "(codec='zstandard_backend')",
    ]
    assert {s.reason for s in base.skipped.values()} == {
        "brotli_backend is not installed",
        "zstandard_backend is not installed",
    }
    assert "test_codecs.py::TestCodecs::test_round_trip \u203a (codec='plain')" in base.ran
    fixed = suite(tmp_path / "fixed", FIXED, UNITTEST_CODECS)
    code, judged, _ = check(fixed, PYTEST, base)
    assert code == 0 and judged.met, judged.verdict
    assert "2 skipped as on the base commit" in judged.verdict


def test_pytest_subtests_skipped_for_a_missing_backend_stay_the_environments(
    tmp_path: Path,
) -> None:
    base_root = suite(tmp_path / "base", BUGGY, PYTEST_CODECS)
    _, judged, base = check(base_root, PYTEST, complete=True)
    assert not judged.met
    assert any(n.endswith("[codec] (codec='plain')") for n in base.ran), base.ran
    assert len(base.skipped) == 2
    code, judged, _ = check(suite(tmp_path / "fixed", FIXED, PYTEST_CODECS), PYTEST, base)
    assert code == 0 and judged.met, judged.verdict


def test_a_subtest_that_ran_on_the_base_and_skips_now_is_not_met(tmp_path: Path) -> None:
    # The failing subtest made to skip "for a missing backend": its siblings' skips are no
    # cover for it.
    _, _, base = check(suite(tmp_path / "base", BUGGY, UNITTEST_CODECS), PYTEST, complete=True)
    dodged = UNITTEST_CODECS.replace('codec.endswith("_backend") and ', 'codec == "zlib" or ')
    code, judged, _ = check(suite(tmp_path / "dodged", FIXED, dodged), PYTEST, base)
    assert code == 0 and not judged.met
    assert "(codec='zlib')" in judged.verdict and "ran on the base commit" in judged.verdict


def test_a_subtest_dropped_from_the_loop_is_missing(tmp_path: Path) -> None:
    _, _, base = check(suite(tmp_path / "base", BUGGY, UNITTEST_CODECS), PYTEST, complete=True)
    fewer = UNITTEST_CODECS.replace('"plain", "zlib", ', '"plain", ')
    code, judged, _ = check(suite(tmp_path / "fewer", FIXED, fewer), PYTEST, base)
    assert code == 0 and not judged.met
    assert "missing" in judged.verdict and "(codec='zlib')" in judged.verdict


def test_a_failing_subtest_is_named_even_when_its_test_reports_passed(tmp_path: Path) -> None:
    # unittest's test reports its own call passed when only a subtest failed: the subtest
    # is what the verdict names.
    _, judged, _ = check(suite(tmp_path / "base", BUGGY, UNITTEST_CODECS), PYTEST)
    assert "test_round_trip \u203a (codec='plain')" in judged.verdict
