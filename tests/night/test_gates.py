"""The repository's own checks in the verdict (``[[gates]]``), on real git, a real ruff and
real nights: a candidate may not add a finding the base commit does not have; what the base
already had does not block; a format gate holds only files the base kept formatted; the
gates' configuration is protected; a suppression counts as the finding it hides; the result
carries per gate the base count, the landed count and the new findings."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from overnight.config.spec import parse_spec
from overnight.seams import ExecContext
from overnight.testing import ScriptedExecutor, ScriptedModel
from overnight.testing.fakes import write_file
from tests.helpers.nights import load_result, make_repo, run_night, spec_data

PY = shlex.quote(sys.executable)
RUFF = f"{PY} -m ruff check --output-format=json --no-cache --no-fix ."
RUFF_FORMAT = f"{PY} -m ruff format --no-cache ."

GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return a - b\n"
VERIFY = f'{PY} -c "import calc, sys; sys.exit(calc.add(2, 2) != 4)"'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository with one bug, a ruff configuration and one finding at the base (an
    unused import in ``old.py``), its files formatted except ``messy.py``."""
    return make_repo(
        tmp_path / "repo",
        {
            "calc.py": BAD,
            "old.py": "import os\n\n\ndef f():\n    return 1\n",
            "messy.py": "def g( x ):\n  return x\n",
            "ruff.toml": '[lint]\nselect = ["F"]\n',
            "requirements.txt": "attrs==23.1.0\n",
        },
    )


def night(
    project: Path, tmp_path: Path, steps: list[Any], *, retries: int = 0, **predicate: Any
) -> tuple[Path, dict[str, Any], ScriptedExecutor]:
    gates = predicate.pop("gates", [{"name": "ruff", "command": RUFF}])
    executor = ScriptedExecutor({"fix": steps})
    data = spec_data(
        project,
        predicate=VERIFY,
        tasks=[{"id": "fix", "brief": "fix add", "verify": VERIFY, "retries": retries}],
        gates=gates,
    )
    data["predicate"].update(predicate)
    spec = parse_spec(data, project)
    rd, _r = run_night(spec, tmp_path / "run", model=ScriptedModel(), executor=executor)
    return rd.path, load_result(rd.path), executor


def parked_reason(result: dict[str, Any]) -> str:
    [parked] = result["plan"]["parked"]
    reason: str = parked["reason"]
    return reason


def test_a_correct_fix_lands_and_the_base_findings_do_not_block(
    project: Path, tmp_path: Path
) -> None:
    run, result, _ = night(project, tmp_path, [write_file("calc.py", GOOD)])

    assert result["stop_reason"] == "GOAL_MET", result["plan"]
    [gate] = result["gates"]
    assert (gate["name"], gate["base"], gate["landed"], gate["new"]) == ("ruff", 1, 1, [])
    [verified] = result["verified"]
    assert (verified["files_changed"], verified["lines_changed"]) == (1, 2)
    record = json.loads((run / "gates.json").read_text())
    assert record["base"]["ruff"]["findings"][0]["rule"] == "F401"
    assert (run / "artifacts" / record["base"]["ruff"]["raw"]).is_file()


def test_a_fix_that_adds_an_unused_import_is_retried_with_it_then_parked_naming_it(
    project: Path, tmp_path: Path
) -> None:
    briefs: list[str] = []

    def remember(_task: Any, ctx: ExecContext) -> None:
        briefs.append(ctx.earlier)

    steps = [remember, write_file("calc.py", "import sys\n\n\n" + GOOD)]
    _run, result, executor = night(project, tmp_path, steps, retries=1)

    assert executor.executed == [("fix", 1), ("fix", 2)]
    assert "F401" in briefs[1] and "calc.py" in briefs[1]
    assert "passed the check" in briefs[1]
    reason = parked_reason(result)
    assert "F401" in reason and "calc.py" in reason and "sys" in reason, reason
    assert result["stop_reason"] != "GOAL_MET"
    assert result["verified"] == []


def test_a_fix_that_silences_the_rule_in_the_gate_configuration_is_refused(
    project: Path, tmp_path: Path
) -> None:
    steps = [
        write_file("calc.py", "import sys\n\n\n" + GOOD),
        write_file("ruff.toml", '[lint]\nselect = ["E"]\n'),
    ]
    _run, result, _ = night(project, tmp_path, steps)

    reason = parked_reason(result)
    assert "ruff.toml" in reason and "configures the gate 'ruff'" in reason, reason
    assert result["plan"]["parked"][0]["protected_changes"] == ["ruff.toml"]


def test_a_suppression_comment_counts_as_the_finding_it_hides(
    project: Path, tmp_path: Path
) -> None:
    _run, result, _ = night(
        project, tmp_path, [write_file("calc.py", "import sys  # noqa: F401\n\n\n" + GOOD)]
    )

    reason = parked_reason(result)
    assert "suppression" in reason and "noqa" in reason, reason


def test_removing_a_base_finding_counts_in_the_candidates_favour(
    project: Path, tmp_path: Path
) -> None:
    steps = [write_file("calc.py", GOOD), write_file("old.py", "def f():\n    return 1\n")]
    _run, result, _ = night(project, tmp_path, steps)

    assert result["stop_reason"] == "GOAL_MET", result["plan"]
    [gate] = result["gates"]
    assert (gate["base"], gate["landed"], gate["removed"], gate["new"]) == (1, 0, 1, [])


FORMAT_GATES = [{"name": "ruff-format", "command": RUFF_FORMAT, "kind": "format"}]


def test_an_unformatted_fix_in_a_file_the_base_kept_formatted_is_parked(
    project: Path, tmp_path: Path
) -> None:
    unformatted = "def add( a,b ):\n    return a+b\n"
    _run, result, _ = night(
        project, tmp_path, [write_file("calc.py", unformatted)], gates=FORMAT_GATES
    )

    reason = parked_reason(result)
    assert "ruff-format" in reason and "calc.py" in reason, reason


def test_an_unformatted_edit_in_a_file_the_base_never_formatted_lands(
    project: Path, tmp_path: Path
) -> None:
    steps = [write_file("calc.py", GOOD), write_file("messy.py", "def g( x ):\n  return  x\n")]
    _run, result, _ = night(project, tmp_path, steps, gates=FORMAT_GATES)

    assert result["stop_reason"] == "GOAL_MET", result["plan"]
    [gate] = result["gates"]
    assert (gate["kind"], gate["base"], gate["landed"], gate["new"]) == ("format", 1, 1, [])


def test_a_fix_that_adds_a_dependency_is_parked_unless_the_spec_allows_it(
    project: Path, tmp_path: Path
) -> None:
    steps = [write_file("calc.py", GOOD), write_file("requirements.txt", "attrs==23.1.0\nrich\n")]
    _run, result, _ = night(project, tmp_path / "refused", steps)
    reason = parked_reason(result)
    assert "requirements.txt" in reason and "allow_dependency_changes" in reason, reason

    _run, result, _ = night(project, tmp_path / "allowed", steps, allow_dependency_changes=True)
    assert result["stop_reason"] == "GOAL_MET", result["plan"]
    [verified] = result["verified"]
    assert any("requirements.txt" in d for d in verified["dependency_changes"])


def test_a_change_larger_than_max_diff_lines_is_parked_saying_its_size(
    project: Path, tmp_path: Path
) -> None:
    big = GOOD + "".join(f"X{n} = {n}\n" for n in range(30))
    _run, result, _ = night(project, tmp_path, [write_file("calc.py", big)], max_diff_lines=10)

    reason = parked_reason(result)
    assert "max_diff_lines = 10" in reason and "lines in 1 file" in reason, reason


def test_a_night_without_gates_is_judged_by_its_verify_alone(project: Path, tmp_path: Path) -> None:
    steps = [write_file("calc.py", "import sys  # noqa\n" + GOOD)]
    run, result, _ = night(project, tmp_path, steps, gates=[])

    assert result["stop_reason"] == "GOAL_MET", result["plan"]
    assert result["gates"] == []
    assert not (run / "gates.json").exists()


def test_a_park_reason_names_the_first_findings_and_the_detail_lists_them_all() -> None:
    from overnight.gates.readers import Finding
    from overnight.night.gates import NAMED, GateVerdict

    found = [
        ("ruff", Finding(f"m{i}.py", "F401", f"`os{i}` imported but unused", 1)) for i in range(8)
    ]
    said = GateVerdict(new=found)

    reason = said.park_reason("retries exhausted")
    assert reason.count("F401") == NAMED and "and 3 more" in reason, reason
    assert reason.endswith("(retries exhausted)")
    assert all(f"m{i}.py:1: F401" in said.detail() for i in range(8)), said.detail()
    assert "passed the check `pytest`" in said.brief("pytest", 1)
    assert all(f"m{i}.py" in said.brief("pytest", 1) for i in range(8))
