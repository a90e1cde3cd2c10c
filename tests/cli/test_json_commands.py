"""``overnight check --json`` and ``overnight report --json``: the same outcomes and facts as
the text, as JSON, with the same exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.helpers.nights import command_task, make_repo, spec_data, write_spec
from tests.helpers.project import overnight

CHECKS = ("spec", "workspace", "settings", "model", "sandbox", "programs", "predicate", "estimate")


def text_statuses(out: str) -> dict[str, str]:
    """Each check's status, from the text rendering's first line of it."""
    found = re.findall(rf"^({'|'.join(CHECKS)})\s+(ok|warning|failed|skipped)\s", out, re.M)
    return dict(found)


def test_check_json_has_every_outcome_and_the_exit_code_of_the_text(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    data = spec_data(repo, model=False, tasks=[command_task("t", "true", "true")])
    data["tools"] = {"commands": ["no-such-tool-xyz --flag"]}
    spec = write_spec(tmp_path / "night.toml", data)

    text = overnight("check", str(spec))
    done = overnight("check", "--json", str(spec))

    assert done.returncode == text.returncode == 3, done.stdout + done.stderr
    said: dict[str, Any] = json.loads(done.stdout)
    assert said["kind"] == "overnight-check" and said["exit_code"] == 3
    checks = said["checks"]
    assert [c["name"] for c in checks] == list(CHECKS)
    assert all(set(c) == {"name", "status", "said", "fix"} for c in checks)
    assert {c["name"]: c["status"] for c in checks} == text_statuses(text.stdout)
    [programs] = [c for c in checks if c["name"] == "programs"]
    assert programs["status"] == "failed" and "no-such-tool-xyz" in programs["said"]


def test_check_json_of_a_bad_spec_exits_64_with_the_field_and_its_fix(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    data = spec_data(repo, tasks=[command_task("t", "true", "true")], budget={"huors": 2})
    done = overnight("check", "--json", str(write_spec(tmp_path / "night.toml", data)))

    assert done.returncode == 64, done.stdout + done.stderr
    said = json.loads(done.stdout)
    assert said["exit_code"] == 64
    [spec] = said["checks"]
    assert spec["name"] == "spec" and spec["status"] == "failed"
    assert spec["said"].startswith("budget.huors: unknown field")


def test_report_json_holds_the_facts_of_the_report(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    data = spec_data(
        repo,
        model=False,
        predicate="test -f done.txt",
        tasks=[command_task("t_1", "echo x > done.txt", "test -f done.txt")],
    )
    run = tmp_path / "run"
    started = overnight(
        "run", str(write_spec(tmp_path / "night.toml", data)), "--run-dir", str(run)
    )
    assert started.returncode == 0, started.stderr
    result = json.loads((run / "result.json").read_text())

    done = overnight("report", str(run), "--json")

    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert facts["kind"] == "overnight-report-facts" and facts["version"] == 1
    headline = facts["headline"]
    assert headline["run_id"] == result["run_id"]
    assert (headline["stop_reason"], headline["exit_code"]) == ("GOAL_MET", 0)
    assert [row["id"] for row in facts["tasks"]["verified"]] == ["t_1"]
    markdown = overnight("report", str(run)).stdout
    assert headline["run_id"] in markdown and headline["why"] in markdown

    out = tmp_path / "facts.json"
    written = overnight("report", str(run), "--json", "--out", str(out))
    assert written.returncode == 0 and written.stdout.strip() == str(out)
    assert json.loads(out.read_text()) == facts

    both = overnight("report", str(run), "--json", "--md")
    assert both.returncode == 64 and "not allowed with argument" in both.stderr
