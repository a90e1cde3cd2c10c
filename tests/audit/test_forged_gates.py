"""The repository's own checks (``[[gates]]``) audited from their raw outputs, on a real night
with real git and a real ruff: the findings ``gates.json`` keeps are read again from the logs
and the lists of rewritten files they came from, and the counts ``result.json`` carries per
gate are recomputed from them. A count edited by hand, a kept finding list that is not its
log's, a raw output gone, a landed commit that adds a finding: each is a disagreement naming
the gate. A night without gates has no gate check."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from overnight.gates.readers import read_findings
from overnight.store.gate_record import FoundRow
from tests.audit.nights import (
    PY,
    audited,
    copy_run,
    gates_night,
    gates_of,
    result_of,
    rewrite_gates,
    rewrite_result,
)
from tests.report.runs import isolated_env

Edit = Callable[[Path], None]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("gates")
    with isolated_env(base):
        yield base


@pytest.fixture(scope="module")
def night(home: Path) -> Path:
    with isolated_env(home):
        return gates_night(home / "night")


@pytest.fixture
def forged(night: Path, tmp_path: Path) -> Callable[[Edit], Path]:
    """A copy of the night's run directory, edited."""

    def make(edit: Edit) -> Path:
        copy = copy_run(night, tmp_path / "forged")
        edit(copy)
        return copy

    return make


def disagreeing(run: Path) -> dict[str, str]:
    """The checks that disagree, name -> detail (the verify commands not run again)."""
    audit = audited(run, rerun=False)
    assert audit.exit_code == (3 if audit.disagreements else 0)
    assert not audit.agrees if audit.disagreements else audit.agrees
    return {c.name: c.detail for c in audit.checks if not c.agrees}


def block(data: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(g for g in data["gates"] if g["name"] == name)
    return found


def landed_commit(run: Path) -> str:
    [commit] = [v["commit"] for v in result_of(run)["verified"]]
    return str(commit)


def edit_result(change: Callable[[dict[str, Any]], None]) -> Edit:
    def edit(run: Path) -> None:
        data = result_of(run)
        change(data)
        rewrite_result(run, data)

    return edit


def edit_gates(change: Callable[[dict[str, Any]], None]) -> Edit:
    def edit(run: Path) -> None:
        data = gates_of(run)
        change(data)
        rewrite_gates(run, data)

    return edit


# -- untouched ---------------------------------------------------------------------------------


def test_an_untouched_night_with_a_ruff_and_a_format_gate_audits_clean(night: Path) -> None:
    audit = audited(night)
    assert audit.disagreements == [], [c for c in audit.checks if not c.agrees]
    by_name = {c.name: c for c in audit.checks}
    assert {"gates", "gate ruff", "gate ruff-format"} <= by_name.keys()
    assert all(by_name[n].concern == "gates" for n in ("gates", "gate ruff", "gate ruff-format"))
    head = landed_commit(night)[:12]
    assert by_name["gate ruff"].detail == (
        f"findings gate, read with ruff-json: 1 on the base, 1 on {head}; 0 new, 0 removed"
    )
    assert by_name["gate ruff-format"].detail == (
        f"format gate: 1 rewritten file(s) on the base, 1 on {head}; 0 new, 0 removed"
    )
    # what the audit reads the logs again with: the exit code of each gate run
    record = gates_of(night)
    assert record["base"]["ruff"]["exit_code"] == 1
    assert record["base"]["ruff-format"]["exit_code"] == 0
    assert record["landed"][landed_commit(night)]["ruff"]["exit_code"] == 1


def test_a_copy_of_the_run_directory_audits_clean_too(forged: Callable[[Edit], Path]) -> None:
    """The logs name the files under the night's own checkout, not the copy's."""
    assert disagreeing(forged(lambda _run: None)) == {}


def test_gate_runs_recorded_without_an_exit_code_read_it_from_the_trace(
    forged: Callable[[Edit], Path],
) -> None:
    def drop_exit_codes(data: dict[str, Any]) -> None:
        for runs in [data["base"], *data["landed"].values()]:
            for run in runs.values():
                del run["exit_code"]

    assert disagreeing(forged(edit_gates(drop_exit_codes))) == {}


# -- result.json edited --------------------------------------------------------------------------


def _raise_base(d: dict[str, Any]) -> None:
    block(d, "ruff")["base"] += 1


def _lower_landed(d: dict[str, Any]) -> None:
    block(d, "ruff-format")["landed"] = 0


def _claim_removed(d: dict[str, Any]) -> None:
    block(d, "ruff")["removed"] = 1


def _claim_new(d: dict[str, Any]) -> None:
    block(d, "ruff")["new"] = ["calc.py:1: F401 `sys` imported but unused"]


def _drop_gates(d: dict[str, Any]) -> None:
    d["gates"] = []


@pytest.mark.parametrize(
    ("change", "caught", "said"),
    [
        (_raise_base, ["gate ruff"], "result.json's base is 2, recomputed 1"),
        (_lower_landed, ["gate ruff-format"], "result.json's landed is 0, recomputed 1"),
        (_claim_removed, ["gate ruff"], "result.json's removed is 1, recomputed 0"),
        (_claim_new, ["gate ruff"], "result.json's new is ["),
        (_drop_gates, ["gates", "gate ruff", "gate ruff-format"], "result.json carries no"),
    ],
)
def test_a_gate_count_edited_in_the_result_is_caught_naming_the_gate(
    forged: Callable[[Edit], Path],
    change: Callable[[dict[str, Any]], None],
    caught: list[str],
    said: str,
) -> None:
    found = disagreeing(forged(edit_result(change)))
    assert sorted(found) == sorted(caught), found
    assert said in found[caught[-1]], found


# -- gates.json edited, raw outputs gone ------------------------------------------------------


def test_a_finding_removed_from_gates_json_while_its_log_has_it_is_caught(
    forged: Callable[[Edit], Path],
) -> None:
    def forget(data: dict[str, Any]) -> None:
        data["base"]["ruff"]["findings"] = []

    found = disagreeing(forged(edit_gates(forget)))
    assert list(found) == ["gate ruff"], found
    assert (
        "on the base: gates.json keeps 0 finding(s), artifacts/base.gate.ruff.log has 1; "
        "not kept: old.py:1: F401 `os` imported but unused" in found["gate ruff"]
    ), found


def test_a_finding_removed_from_gates_json_and_the_result_alike_is_still_caught(
    forged: Callable[[Edit], Path],
) -> None:
    """A forger who keeps gates.json and result.json agreeing with each other: the logs
    still have the finding."""

    def forget(run: Path) -> None:
        data = gates_of(run)
        for runs in [data["base"], *data["landed"].values()]:
            runs["ruff"]["findings"] = []
        rewrite_gates(run, data)
        result = result_of(run)
        block(result, "ruff").update(base=0, landed=0)
        rewrite_result(run, result)

    found = disagreeing(forged(forget))
    assert list(found) == ["gate ruff"], found
    detail = found["gate ruff"]
    assert "on the base: gates.json keeps 0 finding(s)" in detail, detail
    assert "result.json's base is 0, recomputed 1" in detail, detail
    assert "result.json's landed is 0, recomputed 1" in detail, detail


def test_a_raw_log_deleted_is_caught(forged: Callable[[Edit], Path]) -> None:
    found = disagreeing(forged(lambda run: (run / "artifacts" / "base.gate.ruff.log").unlink()))
    assert list(found) == ["gate ruff"], found
    assert "its raw artifact artifacts/base.gate.ruff.log is missing" in found["gate ruff"]


def test_an_exit_code_edited_in_gates_json_is_caught_by_the_trace(
    forged: Callable[[Edit], Path],
) -> None:
    def passed(data: dict[str, Any]) -> None:
        data["base"]["ruff"]["exit_code"] = 0

    found = disagreeing(forged(edit_gates(passed)))
    assert list(found) == ["gate ruff"], found
    assert "gates.json says it exited 0, the trace 1" in found["gate ruff"]


def test_a_run_on_a_commit_that_never_landed_is_caught(forged: Callable[[Edit], Path]) -> None:
    def invent(data: dict[str, Any]) -> None:
        [runs] = data["landed"].values()
        fake = "0" * 40
        data["landed"][fake] = {n: {**r, "commit": fake} for n, r in runs.items()}

    found = disagreeing(forged(edit_gates(invent)))
    assert "gates" in found and "which the checkpoint never landed" in found["gates"], found


def test_gates_json_deleted_is_caught(forged: Callable[[Edit], Path]) -> None:
    found = disagreeing(forged(lambda run: (run / "gates.json").unlink()))
    assert list(found) == ["gates"], found
    assert "1 commit(s) landed with no gate run kept" in found["gates"], found
    assert "with no gates.json to back the counts" in found["gates"], found


def test_a_landed_commit_whose_gate_run_adds_a_finding_is_caught(
    night: Path, forged: Callable[[Edit], Path]
) -> None:
    """The forger files the refused first attempt's ruff run as the landed commit's, its
    findings read from its log as the night reads them, and the result counts it: everything
    agrees with everything, but what landed adds a finding the base commit does not have."""
    commit = landed_commit(night)
    log = (night / "artifacts" / "fix.1.gate.ruff.log").read_text()
    rows = read_findings("ruff-json", log, 1, str((night / "checkout").absolute()))
    assert len(rows) == 2  # the base's unused import, and the one the first attempt added
    [added] = [f for f in rows if f.file == "calc.py"]

    def swap(run: Path) -> None:
        data = gates_of(run)
        ran = data["landed"][commit]["ruff"]
        ran.update(raw="fix.1.gate.ruff.log", findings=[FoundRow.of(f).model_dump() for f in rows])
        rewrite_gates(run, data)
        result = result_of(run)
        block(result, "ruff").update(landed=2, new=[added.text()])
        rewrite_result(run, result)

    found = disagreeing(forged(swap))
    assert list(found) == ["gate ruff"], found
    assert (
        f"{commit[:12]} landed with 1 finding(s) the base commit does not have: "
        "calc.py:1: F401 `sys` imported but unused" in found["gate ruff"]
    ), found


# -- the format gate's lists of rewritten files ------------------------------------------------


def _rewritten(run: Path) -> Path:
    return run / "artifacts" / gates_of(run)["base"]["ruff-format"]["raw"]


def _list_another_file(run: Path) -> None:
    with _rewritten(run).open("a") as f:
        f.write("calc.py\n")


def _forget_the_rewritten_file(run: Path) -> None:
    edit_gates(lambda d: d["base"]["ruff-format"].update(findings=[]))(run)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (
            _list_another_file,
            "not kept: calc.py: format not formatted as `ruff-format` writes it",
        ),
        (
            _forget_the_rewritten_file,
            "not kept: messy.py: format not formatted as `ruff-format` writes it",
        ),
        (
            lambda run: _rewritten(run).unlink(),
            "its raw artifact artifacts/base.gate.ruff-format.rewritten is missing",
        ),
    ],
    ids=["a file added to the list", "a file dropped from gates.json", "the list deleted"],
)
def test_the_format_gates_list_of_rewritten_files_is_checked(
    night: Path, forged: Callable[[Edit], Path], edit: Edit, said: str
) -> None:
    assert _rewritten(night).read_text() == "messy.py\n"
    found = disagreeing(forged(edit))
    assert list(found) == ["gate ruff-format"], found
    assert said in found["gate ruff-format"], found


# -- gates that judged nothing -------------------------------------------------------------

#: A command whose output is not the JSON its reader expects.
GARBLED = f"{PY} -c \"print('nope'); raise SystemExit(2)\""


def test_gates_that_time_out_fail_or_print_what_their_reader_cannot_read_audit_clean(
    home: Path,
) -> None:
    """Each is unreadable on the base commit (so it judges nothing, and the first attempt
    lands): the audit reads the same from their outputs and their exit codes."""
    gates = [
        {"name": "slow", "command": "sleep 20", "timeout_s": 0.5},
        {"name": "garbled", "command": GARBLED, "reader": "ruff-json"},
        {"name": "slow-format", "command": "sleep 20", "kind": "format", "timeout_s": 0.5},
        {"name": "failing-format", "command": "false", "kind": "format"},
    ]
    with isolated_env(home):
        run = gates_night(home / "unreadable", gates=gates, retried=False)
    record = gates_of(run)
    assert all(r["unreadable"] for r in record["base"].values()), record["base"]
    assert record["base"]["garbled"]["exit_code"] == 2
    assert record["base"]["slow"]["exit_code"] is None
    assert record["base"]["failing-format"]["raw"] is None
    audit = audited(run, rerun=False)
    assert audit.agrees, [c for c in audit.checks if not c.agrees]
    by_name = {c.name: c.detail for c in audit.checks}
    assert "(unreadable: it judged nothing)" in by_name["gate garbled"]

    forged = copy_run(run, home / "unreadable-forged")
    data = result_of(forged)
    block(data, "garbled")["unreadable"] = ""
    rewrite_result(forged, data)
    found = disagreeing(forged)
    assert list(found) == ["gate garbled"], found
    assert "result.json's unreadable is ''" in found["gate garbled"], found


# -- no gates ----------------------------------------------------------------------------------


def test_a_night_without_gates_has_no_gate_check(home: Path) -> None:
    with isolated_env(home):
        run = gates_night(home / "gateless", gates=[], retried=False)
    assert not (run / "gates.json").exists()
    audit = audited(run, rerun=False)
    assert audit.agrees, [c for c in audit.checks if not c.agrees]
    assert [c.name for c in audit.checks if c.concern == "gates" or "gate" in c.name] == []
    assert json.loads((run / "result.json").read_text())["gates"] == []
