"""A task parked after its agent tried to change the tests says so: its reason names the
protected files whose edits were refused, not only `not done after 2 attempt(s)`, on the
summary's parked line and in result.json. A task whose agent touched nothing protected keeps
the plain reason."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from overnight.messages.types import ModelRequest, ModelResponse, coerce_response
from overnight.testing import text_answer, tool_answer, usage_dict
from tests.helpers.nights import cli_env, git, spec_data, write_spec

ROOT = Path(__file__).resolve().parents[2]


def forger(request: ModelRequest) -> ModelResponse:
    """An agent that wants to look done: it edits the test its verify runs, then says done."""
    usage = usage_dict(input=600, output=60)
    if request.purpose != "execute":
        return coerce_response(text_answer("Summary.", usage))
    if not any(m["role"] == "assistant" for m in request.messages):
        payload = {"path": "tests/test_calc.py", "content": "def test_ok():\n    pass\n"}
        return coerce_response(tool_answer("write_file", payload, usage))
    return coerce_response(text_answer("The tests pass now.", usage))


def test_a_task_parked_after_refused_edits_to_the_tests_names_them(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text("def test_add():\n    assert 1 + 1 == 3\n")
    git(repo, "add", "tests")
    git(repo, "commit", "-qm", "a failing test")
    verify = "python3 -m pytest -q tests/test_calc.py"
    data = spec_data(
        repo,
        predicate=verify,
        tasks=[{"id": "fix_add", "brief": "make the test pass", "verify": verify, "retries": 1}],
        tools={"allow": ["read_file", "write_file", "edit_file"], "commands": ["python3"]},
        run={"replan": False, "drift_every": 50},
        agent={"max_calls": 4},
    )
    data["model"]["target"] = "tests.night.test_refused_edits_said:forger"
    spec = write_spec(tmp_path / "night.toml", data)

    done = subprocess.run(
        [sys.executable, "-m", "overnight", "run", str(spec), "--run-dir", str(tmp_path / "run")],
        env=cli_env(ROOT),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )

    result: dict[str, Any] = json.loads((tmp_path / "run" / "result.json").read_text())
    [parked] = result["plan"]["parked"]
    assert parked["reason"].startswith("not done after 2 attempt(s)")
    assert "edits to protected files were refused: tests/test_calc.py" in parked["reason"]
    [line] = [ln for ln in done.stdout.splitlines() if ln.startswith("parked:")]
    assert "refused: tests/test_calc.py" in line
