"""Test ids of any length: the reporter bounds its lines, and a report that holds a line it
never writes is named for what it is: which line, how long, for which test, and why."""

from __future__ import annotations

import json
from pathlib import Path

from overnight.core.evidence import judge
from overnight.night.testrun import MAX_LINE, pytest_evidence
from tests.night.test_check_evidence import BUGGY, FIXED, PYTEST, check, project

# A parametrized case whose id holds a 100,000-character string: about 200 kB of node id.
HUGE = """import pytest

from calc import add

LONG = "ab" * 50_000


# pytest 9 names a long string by its argument unless asked: the suite names its cases
@pytest.mark.parametrize("text", [LONG, "short"], ids=str)
def test_long_input(text):
    assert add(len(text), 1) == len(text) + 1
"""


def test_a_parametrized_id_over_100_kb_is_judged_like_any_other(tmp_path: Path) -> None:
    base_root = project(tmp_path / "base", BUGGY, {"tests/test_long.py": HUGE})
    _, judged, base = check(base_root, PYTEST, complete=True)
    assert not judged.met and "disagrees" not in judged.verdict, judged.verdict
    long_ids = [n for n in base.collected if "test_long_input[" in n and "short" not in n]
    assert len(long_ids) == 1
    # carried by a readable prefix, the id's length and a digest, far below a line's limit
    assert "test_long_input[abab" in long_ids[0] and "100000 characters" not in long_ids[0]
    assert len(long_ids[0]) < 400 and "sha256" in long_ids[0]
    assert long_ids[0] in base.ran
    code, judged, _ = check(project(tmp_path / "fixed", FIXED, {"tests/test_long.py": HUGE}),
                            PYTEST, base)  # fmt: skip
    assert code == 0 and judged.met, judged.verdict


def test_two_long_ids_that_differ_only_at_their_end_stay_two_tests(tmp_path: Path) -> None:
    twins = HUGE.replace('[LONG, "short"]', '[LONG + "1", LONG + "2"]')
    _, judged, base = check(
        project(tmp_path / "p", FIXED, {"tests/test_long.py": twins}), PYTEST, complete=True
    )
    assert "disagrees" not in judged.verdict, judged.verdict
    long_ids = [n for n in base.collected if "test_long_input[" in n]
    assert len(set(long_ids)) == 2


def read_forged(lines: list[bytes]) -> str:
    with pytest_evidence() as reporter:
        reporter.sink.write(b"\n".join(lines) + b"\n")
        run = reporter.read()
    return judge(run, 0).verdict


def event(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def test_a_line_longer_than_any_the_reporter_writes_is_named_with_its_test() -> None:
    node = "tests/test_x.py::test_big[" + "x" * (MAX_LINE + 10) + "]"
    verdict = read_forged(
        [
            event(kind="started"),
            event(kind="collected", nodeid="tests/test_x.py::test_ok", mark=None),
            event(kind="collected", nodeid=node, mark=None),
            event(kind="finished", exitstatus=0),
        ]
    )
    assert verdict.startswith("not met: the test run's evidence disagrees"), verdict
    assert "line 3 for tests/test_x.py::test_big[xxx" in verdict
    assert f"longer than the {MAX_LINE:,} bytes a line of the reporter's can be" in verdict
    assert len(verdict) < 1000


def test_lines_that_are_not_the_reporters_say_what_they_are() -> None:
    verdict = read_forged(
        [
            event(kind="started"),
            b'{"kind": "report", "nodeid": "t.py::t", "when": "call", "outc',
            event(kind="report", when="call", outcome="passed"),
            b"[1, 2]",
            event(kind="finished", exitstatus=0),
        ]
    )
    assert "holds 3 line(s)" in verdict
    assert "line 2 for t.py::t" in verdict and "not JSON" in verdict
    assert "line 3" in verdict and "'report' line without a test id" in verdict
    assert "line 4" in verdict and "a JSON list, not an object" in verdict
