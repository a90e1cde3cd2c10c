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
