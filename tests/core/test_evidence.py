"""The per-test judgement of a pytest run (``overnight.core.evidence``), on reporter lines."""

from __future__ import annotations

import json
from typing import Any

from overnight.core.evidence import BaseTests, RunReport, base_tests, judge, read_run

A, B = "tests/test_a.py::test_a", "tests/test_a.py::test_b"


def lines(*events: dict[str, Any]) -> list[dict[str, Any] | None]:
    return [json.loads(json.dumps(e)) for e in events]


def phase(nodeid: str, when: str, outcome: str, raised: str = "nothing", **kw: Any) -> list[dict]:
    return [
        {"kind": "call", "nodeid": nodeid, "when": when, "raised": raised},
        {
            "kind": "report",
            "seen": "first",
            "nodeid": nodeid,
            "when": when,
            "outcome": outcome,
            **kw,
        },
    ]


def passing(nodeid: str) -> list[dict]:
    return [*phase(nodeid, "setup", "passed"), *phase(nodeid, "call", "passed"),
            *phase(nodeid, "teardown", "passed")]  # fmt: skip


def session(*tests: list[dict], collected: tuple[str, ...] = (A, B), status: int = 0) -> RunReport:
    events: list[dict] = [{"kind": "started"}]
    events += [{"kind": "collected", "nodeid": n, "mark": None} for n in collected]
    for t in tests:
        events += t
    events.append({"kind": "finished", "exitstatus": status})
    return read_run(lines(*events))


def test_every_test_passed_is_met() -> None:
    j = judge(session(passing(A), passing(B)), 0)
    assert j.met and j.verdict == "met: 2 passed"


def test_a_zero_exit_without_a_report_is_no_evidence() -> None:
    assert judge(None, 0).verdict.startswith("not met: the test run gave no evidence")
    unfinished = read_run(lines({"kind": "started"}, {"kind": "collected", "nodeid": A}))
    assert judge(unfinished, 0).verdict.startswith("not met: the test run gave no evidence")


def test_an_exit_status_that_disagrees_is_not_met() -> None:
    run = session(passing(A), passing(B), status=1)
    assert judge(run, 0).verdict.startswith("not met: the test run's evidence disagrees")


def test_a_report_rewritten_to_passed_after_the_test_raised_is_a_disagreement() -> None:
    forged = [*phase(A, "setup", "passed"), *phase(A, "call", "passed", "error: AssertionError"),
              *phase(A, "teardown", "passed")]  # fmt: skip
    j = judge(session(forged, passing(B)), 0)
    assert not j.met and "disagrees" in j.verdict and A in j.verdict


def test_skipped_xfailed_and_missing_tests_are_named() -> None:
    skipped = [*phase(A, "setup", "passed"), *phase(A, "call", "skipped", "skip")]
    xfailed = [*phase(B, "setup", "passed"), *phase(B, "call", "skipped", "xfail", xfail=True)]
    j = judge(session(skipped, xfailed), 0)
    assert not j.met
    assert f"skipped: {A}" in j.verdict and f"xfailed: {B}" in j.verdict
    j = judge(session(passing(A)), 0)
    assert not j.met and f"missing: {B}" in j.verdict


def test_fewer_tests_than_on_the_base_is_not_met() -> None:
    base = BaseTests(command="pytest", commit="c", collected=[A, B])
    run = session(passing(A), collected=(A,))
    j = judge(run, 0, base)
    assert not j.met and f"missing: {B}" in j.verdict
    deselected = read_run(
        lines({"kind": "deselected", "nodeid": B}),
    )
    run.deselected = deselected.deselected
    assert f"deselected: {B}" in judge(run, 0, base).verdict


def test_a_skip_the_base_commit_had_at_set_up_stays_allowed() -> None:
    on_base = session(passing(A), phase(B, "setup", "skipped", "skip"), status=0)
    base = base_tests("pytest", "c", on_base)
    assert base.allowed == {B: "skipped at set-up on the base commit"}
    j = judge(session(passing(A), phase(B, "setup", "skipped", "skip")), 0, base)
    assert j.met and j.allowed == (f"{B} (skipped at set-up on the base commit)",)
    # Skipped when the test ran, not at set-up: the code under test did it.
    call_skip = [*phase(B, "setup", "passed"), *phase(B, "call", "skipped", "skip")]
    assert base_tests("pytest", "c", session(passing(A), call_skip)).allowed == {}


def test_an_xfail_mark_turns_a_raise_into_an_expected_failure_only_with_the_mark() -> None:
    xfailed = [*phase(B, "setup", "passed"),
               *phase(B, "call", "skipped", "error: AssertionError", xfail=True)]  # fmt: skip
    marked = [{"kind": "collected", "nodeid": B, "mark": "xfail: known"}]
    run = session(passing(A), marked, xfailed)
    assert run.status(B) == "xfailed"
    assert session(passing(A), xfailed).status(B) == "failed"


def test_lines_the_reporter_never_writes_are_a_disagreement() -> None:
    run = session(passing(A), passing(B))
    run.unreadable = 1
    assert "disagrees" in judge(run, 0).verdict
    assert read_run([None, {"kind": "report"}]).unreadable == 2


def test_a_failing_exit_names_the_failed_tests() -> None:
    failed = [*phase(A, "setup", "passed"), *phase(A, "call", "failed", "error: AssertionError")]
    j = judge(session(failed, passing(B), status=1), 1)
    assert not j.met and j.verdict == f"not met: exit 1; failed: {A}"


def test_a_runner_function_replaced_in_the_test_process_is_a_disagreement() -> None:
    run = session(passing(A), passing(B))
    tampered = read_run(lines({"kind": "tampered", "what": ["_pytest.runner.call_and_report"]}))
    run.tampered = tampered.tampered
    j = judge(run, 0)
    assert not j.met and "replaced the runner's own _pytest.runner.call_and_report" in j.verdict
