"""The repository's own checks judging nights on released packages: cachetools as released,
whose setup.cfg configures flake8 (its base commit already has flake8 findings), and
python-multipart, whose pyproject.toml configures ruff, ruff format and mypy in strict mode.
A correct fix lands; the same fix with a line the linter rejects is retried with the rule in
the next attempt's brief and then parked naming it; a fix that also rewrites the linter's
configuration to silence the rule is refused (the tool's config files are protected); a fix
written unformatted, or one that adds a type error, is parked naming what the formatter or
mypy said."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overnight.gates.discovery import discover_gates
from tests.attacks.night import Outcome
from tests.helpers.nights import git
from tests.realrepos.corpus import PACKAGES, PYTHON_MULTIPART, Package
from tests.realrepos.night import RealRepoNight, assert_landed_alone, assert_nothing_landed

pytestmark = pytest.mark.usefixtures("corpus")

CACHETOOLS = next(p for p in PACKAGES if p.name == "cachetools")


def gated(package: Package, tmp_path: Path, retries: int = 0) -> RealRepoNight:
    """The package's night with the gates ``overnight init`` finds in its configuration."""
    night = RealRepoNight(package, tmp_path)
    night.gates = [
        {"name": g.name, "command": g.command, "kind": g.kind} for g in discover_gates(night.repo)
    ]
    night.retries = retries
    return night


def parked_reason(outcome: Outcome) -> str:
    parked = outcome.result["plan"]["parked"]
    assert [p["id"] for p in parked] == ["fix"], parked
    reason: str = parked[0]["reason"]
    return reason


def gate_block(outcome: Outcome, name: str) -> dict[str, Any]:
    blocks: dict[str, dict[str, Any]] = {g["name"]: g for g in outcome.result["gates"]}
    return blocks[name]


def briefs(night: RealRepoNight) -> list[str]:
    """The first user message of each execute request: the attempt's brief."""
    seen: list[str] = []
    for line in night.log.read_text().splitlines():
        request = json.loads(line)
        if request["purpose"] != "execute":
            continue
        first = json.dumps(request["messages"][0]["content"])
        if first not in seen:
            seen.append(first)
    return seen


# --- cachetools: flake8, with findings the base commit already has --------------------------


def test_a_correct_fix_lands_though_the_base_has_flake8_findings(tmp_path: Path) -> None:
    night = gated(CACHETOOLS, tmp_path)
    assert [g["name"] for g in night.gates] == ["flake8"]
    outcome = night.play(night.steps(fix=CACHETOOLS.good))
    assert_landed_alone(night, outcome)
    block = gate_block(outcome, "flake8")
    assert block["base"] > 0 and block["new"] == [], block  # F824 in __init__.py, as released
    assert block["landed"] == block["base"]
    assert outcome.result["verified"][0]["files_changed"] == 1


def test_a_fix_with_a_line_flake8_rejects_is_retried_then_parked_naming_the_rule(
    tmp_path: Path,
) -> None:
    night = gated(CACHETOOLS, tmp_path, retries=1)
    sloppy = "        unused = 1\n" + CACHETOOLS.good
    outcome = night.play(night.steps(fix=sloppy))
    assert_nothing_landed(night, outcome)
    reason = parked_reason(outcome)
    assert "flake8" in reason and "F841" in reason and "keys.py" in reason, reason
    told = briefs(night)
    assert "F841" not in told[0] and "F841" in told[-1], told
    assert "passed the check" in told[-1], told


def test_a_fix_that_silences_the_rule_in_setup_cfg_is_refused(tmp_path: Path) -> None:
    night = gated(CACHETOOLS, tmp_path)
    sloppy = "        unused = 1\n" + CACHETOOLS.good
    silence = (
        "import pathlib; p = pathlib.Path('setup.cfg'); "
        "p.write_text(p.read_text().replace('ignore = F401', 'ignore = F401, F841'))"
    )
    steps = night.steps(fix=sloppy)
    steps.insert(-1, ("run_command", {"command": f"python -c {json.dumps(silence)}"}))
    outcome = night.play(steps)
    assert_nothing_landed(night, outcome)
    reason = parked_reason(outcome)
    # setup.cfg is protected twice over: it configures pytest and the gate 'flake8'.
    assert "setup.cfg" in reason and "protected" in reason, reason
    assert "F841" not in git(night.repo, "show", f"{night.base}:setup.cfg")


# --- python-multipart: ruff, ruff format and mypy strict -------------------------------------


def test_a_correct_fix_lands_under_ruff_ruff_format_and_mypy(tmp_path: Path) -> None:
    night = gated(PYTHON_MULTIPART, tmp_path)
    assert [g["name"] for g in night.gates] == ["ruff", "ruff-format", "mypy"]
    outcome = night.play(night.steps(fix=PYTHON_MULTIPART.good))
    assert_landed_alone(night, outcome)
    for name in ("ruff", "ruff-format", "mypy"):
        block = gate_block(outcome, name)
        assert block["new"] == [] and not block["unreadable"], block


def test_a_fix_with_an_unused_import_is_parked_naming_the_ruff_rule(tmp_path: Path) -> None:
    night = gated(PYTHON_MULTIPART, tmp_path)
    sloppy = "                import os\n" + PYTHON_MULTIPART.good
    outcome = night.play(night.steps(fix=sloppy))
    assert_nothing_landed(night, outcome)
    reason = parked_reason(outcome)
    assert "ruff" in reason and "F401" in reason and "multipart.py" in reason, reason


def test_a_fix_written_unformatted_in_a_formatted_file_is_parked(tmp_path: Path) -> None:
    night = gated(PYTHON_MULTIPART, tmp_path)
    unformatted = PYTHON_MULTIPART.good.replace(" or ", "  or ")
    outcome = night.play(night.steps(fix=unformatted))
    assert_nothing_landed(night, outcome)
    reason = parked_reason(outcome)
    assert "ruff-format" in reason and "python_multipart/multipart.py" in reason, reason


def test_a_fix_that_adds_a_type_error_is_parked_naming_it(tmp_path: Path) -> None:
    night = gated(PYTHON_MULTIPART, tmp_path)
    typed_wrong = '                seen: int = "CR"\n' + PYTHON_MULTIPART.good
    outcome = night.play(night.steps(fix=typed_wrong))
    assert_nothing_landed(night, outcome)
    reason = parked_reason(outcome)
    assert "mypy" in reason and "assignment" in reason and "multipart.py" in reason, reason
