"""The first day on a real package: six 1.17.0 as released (an sdist, ``git init``, one bug),
`overnight init` writes a spec that `overnight check` accepts, and `overnight run` with a
scripted model file ends as the script says: the whole suite, its own skips standing, met."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from tests.helpers.project import home, overnight
from tests.realrepos.corpus import SIX
from tests.realrepos.night import RealRepoNight

pytestmark = pytest.mark.usefixtures("corpus")

GOAL = "Fix the bug in six.py so that the whole test suite passes, without editing the tests."


def script(fix_old: str, fix_new: str) -> str:
    def toml(text: str) -> str:
        return json.dumps(text)  # a JSON string is a TOML basic string

    return f"""[[plan]]
tool = "submit_plan"
[plan.input]
reasoning = "test_six.py fails in add_metaclass."
[[plan.input.tasks]]
id = "fix"
title = "add_metaclass keeps the class's qualified name"
brief = "Fix add_metaclass in six.py."
verify = "python -m pytest -q test_six.py"

[[execute]]
tool = "edit_file"
input = {{ path = "six.py", old = {toml(fix_old)}, new = {toml(fix_new)} }}

[[execute]]
text = "add_metaclass copies __qualname__ from the class."

[[summarize]]
text = "Fixed add_metaclass."
"""


def test_init_check_and_a_scripted_run_on_a_released_package(tmp_path: Path) -> None:
    repo = RealRepoNight(SIX, tmp_path).repo
    done = overnight("init", str(repo), "--goal", GOAL, "--provider", "script")
    assert done.returncode == 0, done.stdout + done.stderr
    spec = tomllib.loads((repo / "night.toml").read_text())
    assert spec["predicate"]["command"] == "python -m pytest -q"
    (repo / "turns.toml").write_text(script(SIX.bad, SIX.good))
    checked = overnight("check", str(repo / "night.toml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    night = overnight("run", str(repo / "night.toml"), "--quiet")
    assert night.returncode == 0, night.stdout + night.stderr
    (result_path,) = home().glob("runs/*/result.json")
    result = json.loads(result_path.read_text())
    assert result["stop_reason"] == "GOAL_MET"
    assert result["predicate"]["verdict"].startswith("met: ")
    assert "2 skipped as on the base commit" in result["predicate"]["verdict"]
    assert [t["id"] for t in result["verified"]] == ["fix"]
