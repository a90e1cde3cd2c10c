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


def skip_in(nodeid: str, when: str, where: str, reason: str, raised: str = "skip") -> list[dict]:
    """``nodeid`` skipped in phase ``when`` by a ``skip`` call at ``where``."""
    site = {"where": where, "reason": reason}
    done = [*phase(nodeid, "setup", "passed")] if when == "call" else []
    return [*done, *phase(nodeid, when, "skipped", raised, skip=site)]


def test_a_skip_the_base_commit_had_in_any_phase_stays_allowed_at_the_same_place() -> None:
    for when in ("setup", "call"):
        skipped = skip_in(B, when, "tests/test_a.py:12", "no module named numpy")
        base = base_tests("pytest", "c", session(passing(A), skipped))
        assert base.ran == [A] and base.skipped[B].where == "tests/test_a.py:12"
        j = judge(session(passing(A), skipped), 0, base)
        assert j.met, j.verdict
        assert (
            j.verdict == "met: 1 passed; 1 skipped as on the base commit (1: no module named numpy)"
        )
        assert [(g.reason, g.tests) for g in j.stayed] == [("no module named numpy", (B,))]


def test_a_skip_elsewhere_or_for_another_reason_than_on_the_base_is_not_met() -> None:
    base = base_tests("pytest", "c", session(passing(A), skip_in(B, "call", "t.py:12", "no numpy")))
    for where, reason in (("t.py:13", "no numpy"), ("calc.py:3", "no numpy"), ("t.py:12", "nope")):
        j = judge(session(passing(A), skip_in(B, "call", where, reason)), 0, base)
        assert not j.met and B in j.verdict and "otherwise than on the base" in j.verdict
    # a skip whose place the run did not say is not the base's either
    j = judge(session(passing(A), [*phase(B, "setup", "passed"), *phase(B, "call", "skipped")]),
              0, base)  # fmt: skip
    assert not j.met and B in j.verdict


def test_a_test_that_ran_on_the_base_may_not_take_a_skip_path() -> None:
    failed = [*phase(B, "setup", "passed"), *phase(B, "call", "failed", "error: AssertionError")]
    for on_base in (failed, passing(B)):
        base = base_tests("pytest", "c", session(passing(A), on_base, status=1))
        assert B in base.ran and B not in base.skipped
        for now in (skip_in(B, "call", "t.py:12", "no numpy"), skip_in(B, "setup", "t.py:3", "x")):
            j = judge(session(passing(A), now), 0, base)
            assert not j.met and "ran on the base commit" in j.verdict and B in j.verdict


def test_what_stayed_skipped_is_grouped_by_reason_with_counts() -> None:
    ids = [f"t.py::test_{i}" for i in range(40)]
    tests = [skip_in(n, "call", "t.py:5", "numpy is not installed") for n in ids[:33]]
    tests += [skip_in(n, "call", "t.py:9", "no module dbm.gnu") for n in ids[33:35]]
    tests += [passing(n) for n in ids[35:]]
    run = session(*tests, collected=tuple(ids))
    j = judge(run, 0, base_tests("pytest", "c", run))
    assert j.met
    assert j.verdict == (
        "met: 5 passed; 35 skipped as on the base commit "
        "(33: numpy is not installed; 2: no module dbm.gnu)"
    )
    assert [len(g.tests) for g in j.stayed] == [33, 2]


def test_a_record_of_a_run_stopped_early_is_not_complete() -> None:
    run = session(passing(A), passing(B))
    assert not base_tests("pytest", "c", run).complete
    events: list[dict] = [{"kind": "started", "complete": True, "neutralized": ["maxfail=1"]}]
    events += [*passing(A), {"kind": "finished", "exitstatus": 0}]
    record = base_tests("pytest -x", "c", read_run(lines(*events)))
    assert record.complete and record.neutralized == ["maxfail=1"]


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


def test_a_parametrized_case_numbered_otherwise_is_the_same_test() -> None:
    # pytest numbers cases it cannot name in the order the suite lists them; a set's order
    # (tuples holding None, hashed by address) changes it from one process to the next.
    x, y = "t.py::test_p[4-expected4]", "t.py::test_p[4-expected5]"
    keyed = [{"kind": "collected", "nodeid": n, "key": f"t.py::test_p[{k}]"} for n, k in
             ((x, "aaaa"), (y, "bbbb"))]  # fmt: skip
    on_base = read_run(lines({"kind": "started"}, *keyed, *passing(x),
                             *skip_in(y, "call", "t.py:3", "no numpy"),
                             {"kind": "finished", "exitstatus": 0}))  # fmt: skip
    base = base_tests("pytest", "c", on_base)
    swapped = [{"kind": "collected", "nodeid": n, "key": f"t.py::test_p[{k}]"} for n, k in
               ((x, "bbbb"), (y, "aaaa"))]  # fmt: skip
    here = read_run(lines({"kind": "started"}, *swapped, *passing(y),
                          *skip_in(x, "call", "t.py:3", "no numpy"),
                          {"kind": "finished", "exitstatus": 0}))  # fmt: skip
    j = judge(here, 0, base)
    assert j.met, j.verdict
    # without the keys, the ids say the case that ran on the base is skipped here
    for event in swapped:
        del event["key"]
    plain = read_run(lines({"kind": "started"}, *swapped, *passing(y),
                           *skip_in(x, "call", "t.py:3", "no numpy"),
                           {"kind": "finished", "exitstatus": 0}))  # fmt: skip
    assert not judge(plain, 0, base).met
