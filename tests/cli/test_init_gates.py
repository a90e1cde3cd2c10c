"""``overnight init`` writes the checks a repository configures as ``[[gates]]``, and
``overnight check`` runs them on the base commit, showing their counts, and names a gate
whose program is missing with how to install it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from overnight.cli.gate_check import gate_programs_missing
from overnight.config.gates import GateSpec
from tests.helpers.project import GOAL, calc_repo, overnight

PRE_COMMIT = """\
repos:
  - repo: https://github.com/astral-sh/ruff-pre-commit
    rev: v0.6.0
    hooks:
      - id: ruff-format
"""


def test_init_writes_the_pre_commit_and_ruff_gates_and_check_counts_them(
    tmp_path: Path,
) -> None:
    repo = calc_repo(
        tmp_path / "repo",
        {
            ".pre-commit-config.yaml": PRE_COMMIT,
            "pyproject.toml": '[tool.ruff.lint]\nselect = ["F"]\n',
            "calc/old.py": "import os\n",
        },
    )

    done = overnight("init", str(repo), "--goal", GOAL, "--provider", "script")

    spec = tomllib.loads((repo / "night.toml").read_text())
    gates = {g["name"]: g for g in spec["gates"]}
    assert set(gates) == {"ruff", "ruff-format"}, done.stdout + done.stderr
    assert gates["ruff-format"]["kind"] == "format"
    assert "--output-format=json" in gates["ruff"]["command"]
    checked = overnight("check", str(repo / "night.toml"))
    line = next(x for x in checked.stdout.splitlines() if x.startswith("gates"))
    assert "ruff: 1 finding(s) on the base commit" in line, checked.stdout
    assert "ruff-format: 0 file(s) not formatted" in line, checked.stdout


def test_a_gate_whose_program_is_missing_is_named_with_how_to_install_it() -> None:
    gates = [GateSpec(name="lint", command="python -m flake8_not_here --format=default .")]

    missing = gate_programs_missing(gates)

    assert missing == [
        "lint: `python` cannot import flake8_not_here (install flake8_not_here)"
    ] or missing[0].startswith("lint: `python` cannot import flake8_not_here")


def test_a_gate_whose_program_is_installed_is_not_named() -> None:
    assert gate_programs_missing([GateSpec(name="ruff", command="python -m ruff check .")]) == []


def test_a_configured_gate_whose_program_the_tests_python_lacks_is_written_commented_out(
    tmp_path: Path,
) -> None:
    # black is configured but not importable by the Python the tests run with: a gate for it
    # would fail `check`, so init writes it commented out with how to install it.
    from overnight.cli.init import Predicate, gates_to_write, spec_text

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text("[tool.ruff]\nline-length = 99\n[tool.black]\n")
    predicate = Predicate("python3 -m pytest -q", "python3 -m pytest", "tests/")

    gates, missing = gates_to_write(repo, predicate, installed=lambda module: module == "ruff")

    assert [g.name for g in gates] == ["ruff"]
    assert [g.name for g in missing] == ["black"]
    assert gates[0].command.startswith("python3 -m ruff check")
    text = spec_text(
        "goal", predicate, 5.0, 8.0, "script", "scripted", None, None, None, gates, missing
    )
    spec = tomllib.loads(text)
    assert [g["name"] for g in spec["gates"]] == ["ruff"]
    assert "# pip install black, then uncomment these lines" in text
    assert '# name = "black"' in text


def test_init_writes_only_gates_that_check_can_run(tmp_path: Path) -> None:
    # Whatever is installed here, init and check ask the same Python: the spec init writes
    # passes its own check's gates outcome.
    repo = calc_repo(
        tmp_path / "repo",
        {"pyproject.toml": "[tool.black]\n[tool.isort]\n[tool.ruff]\n", "calc/x.py": "x = 1\n"},
    )

    done = overnight("init", str(repo), "--goal", GOAL, "--provider", "script")

    line = next((x for x in done.stdout.splitlines() if x.startswith("gates")), "")
    assert "failed" not in line, done.stdout + done.stderr


def test_check_runs_a_gate_in_the_sandbox_as_the_night_does(tmp_path: Path) -> None:
    # `check` runs a gate under the night's sandbox policy: with [sandbox] mode = "on", what
    # it does outside its checkout does not reach the machine.
    repo = calc_repo(tmp_path / "repo", {"calc/x.py": "x = 1\n"})
    outside = tmp_path / "written-by-the-gate"
    done = overnight("init", str(repo), "--goal", GOAL, "--provider", "script")
    assert done.returncode == 0, done.stdout + done.stderr
    escape = f"open({str(outside)!r}, 'w').write('x')"
    with (repo / "night.toml").open("a") as spec:
        spec.write(
            f'\n[[gates]]\nname = "escape"\ncommand = "python3 -c \\"{escape}\\""\n'
            'reader = "exit-code"\n'
        )
    text = (repo / "night.toml").read_text()
    assert "[sandbox]" not in text
    (repo / "night.toml").write_text(text + '\n[sandbox]\nmode = "on"\n')

    checked = overnight("check", str(repo / "night.toml"))

    line = next(x for x in checked.stdout.splitlines() if x.startswith("gates"))
    assert "escape: " in line, checked.stdout
    assert not outside.exists(), "the gate ran unconfined"
