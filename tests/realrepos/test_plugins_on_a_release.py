"""The most common configuration there is, on a real package: async_timeout 5.0.1 as released
has ``--cov`` options in ``setup.cfg``'s ``addopts`` and ``asyncio_mode``, and its tests are
marked for pytest-asyncio. With plugin autoload off the suite cannot start until both plugins
are named: the refusal names them and the exact line, and `overnight init` writes it, after
which the night starts and its correct fix lands."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from tests.helpers.project import home, overnight
from tests.realrepos.corpus import ASYNC_TIMEOUT
from tests.realrepos.night import RealRepoNight

pytestmark = pytest.mark.usefixtures("corpus")

GOAL = "Fix the bug in async_timeout so that the whole test suite passes, without editing tests."


def named_line(text: str) -> list[str]:
    """The plugins of the ``[predicate] pytest_plugins = [...]`` line ``text`` holds."""
    found = re.search(r"\[predicate\] pytest_plugins = (\[[^\]]*\])", text)
    assert found, text
    plugins: list[str] = json.loads(found.group(1))
    return plugins


def test_a_night_without_the_plugins_is_refused_naming_them_and_the_line(tmp_path: Path) -> None:
    night = RealRepoNight(ASYNC_TIMEOUT, tmp_path)
    night.with_plugins = False
    outcome = night.play(night.steps(fix=ASYNC_TIMEOUT.good))
    said = outcome.stdout + outcome.stderr
    assert outcome.exit_code == 64, said
    assert not night.run_dir.exists()
    assert "pytest-cov" in said and "pytest-asyncio" in said, said
    assert "--cov" in said
    assert sorted(named_line(said)) == ["asyncio", "pytest_cov"]


def script(old: str, new: str) -> str:
    return f"""[[plan]]
tool = "submit_plan"
[plan.input]
reasoning = "timeout() computes its deadline wrongly."
[[plan.input.tasks]]
id = "fix"
title = "timeout() adds the delay to the loop's time"
brief = "Fix timeout() in async_timeout/__init__.py."
verify = "python -m pytest -q"

[[execute]]
tool = "edit_file"
input = {{ path = "async_timeout/__init__.py", old = {json.dumps(old)}, new = {json.dumps(new)} }}

[[execute]]
text = "The deadline is the loop's time plus the delay."

[[summarize]]
text = "Fixed timeout()."
"""


def test_init_writes_the_plugins_and_the_night_starts(tmp_path: Path) -> None:
    repo = RealRepoNight(ASYNC_TIMEOUT, tmp_path).repo
    done = overnight("init", str(repo), "--goal", GOAL, "--provider", "script")
    assert done.returncode == 0, done.stdout + done.stderr
    spec = tomllib.loads((repo / "night.toml").read_text())
    assert sorted(spec["predicate"]["pytest_plugins"]) == ["asyncio", "pytest_cov"], spec
    (repo / "turns.toml").write_text(script(ASYNC_TIMEOUT.bad, ASYNC_TIMEOUT.good))
    checked = overnight("check", str(repo / "night.toml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    ran = overnight("run", str(repo / "night.toml"), "--quiet")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (result_path,) = home().glob("runs/*/result.json")
    result = json.loads(result_path.read_text())
    assert result["stop_reason"] == "GOAL_MET", result["predicate"]
    assert [t["id"] for t in result["verified"]] == ["fix"]
