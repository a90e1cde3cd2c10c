"""`overnight init` writes a spec for a real repository and checks it; `overnight check` runs
every check a night makes before its first model call and writes nothing; a scripted night
started from what init wrote ends as its script says."""

from __future__ import annotations

import json
import re
import stat
import tomllib
from pathlib import Path

import pytest

from overnight.cli.init import find_predicate
from overnight.config.spec_schema import shipped_schema_path
from tests.helpers.nights import command_task, git, make_repo, spec_data, write_spec
from tests.helpers.project import (
    GOAL,
    SCRIPTED_PAGE,
    branches,
    calc_repo,
    doc_block,
    home,
    overnight,
    worktrees,
)
from tests.helpers.sandbox import require_bwrap

CHECKS = ("spec", "workspace", "settings", "model", "sandbox", "programs", "predicate", "estimate")


def line(out: str, check: str) -> str:
    found = re.search(rf"^{check}\s+(ok|failed|skipped)\s+(.*)$", out, re.MULTILINE)
    assert found is not None, f"no {check} line in:\n{out}"
    return f"{found.group(1)} {found.group(2)}"


def assert_nothing_written(repo: Path) -> None:
    assert not home().exists(), sorted(home().rglob("*"))
    assert branches(repo) == ["main"]
    assert worktrees(repo) == 1


def test_init_writes_a_spec_check_accepts_and_its_scripted_night_fixes_the_bug(
    tmp_path: Path,
) -> None:
    require_bwrap()
    repo = calc_repo(tmp_path / "calc")
    done = overnight("init", str(repo), "--goal", GOAL, "--provider", "script")
    assert done.returncode == 0, done.stdout + done.stderr
    for check in CHECKS:
        assert line(done.stdout, check).startswith("ok "), done.stdout
    assert "not met" in line(done.stdout, "predicate")
    text = (repo / "night.toml").read_text()
    assert text.startswith(f"#:schema {shipped_schema_path().as_uri()}\n")  # Taplo reads it
    spec = tomllib.loads(text)
    assert spec["goal"] == GOAL
    assert spec["predicate"]["command"] == "python -m pytest -q"
    assert spec["model"] == {"provider": "script", "script": "turns.toml", "name": "scripted"}
    assert spec["budget"] == {"usd": 10.0, "hours": 8.0}
    assert spec["tools"]["commands"] == ["python -m pytest"]
    assert (repo / "turns.toml").exists()
    assert_nothing_written(repo)

    # The script of the docs' example (A scripted model): a plan of one task, and turns that
    # fix the bug.
    (repo / "turns.toml").write_text(doc_block(SCRIPTED_PAGE, "`turns.toml`:"))
    checked = overnight("check", str(repo / "night.toml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "1 plan, 4 execute, 1 drift, 1 summarize" in line(checked.stdout, "model")
    assert_nothing_written(repo)

    night = overnight("run", str(repo / "night.toml"), "--quiet")
    assert night.returncode == 0, night.stdout + night.stderr
    (result_path,) = home().glob("runs/*/result.json")
    result = json.loads(result_path.read_text())
    assert result["stop_reason"] == "GOAL_MET"
    assert [t["id"] for t in result["verified"]] == ["fix_add"]
    branch = result["branch"]["name"]
    assert git(repo, "rev-list", "--count", f"main..{branch}") == "1"
    assert git(repo, "diff", "--name-only", f"main..{branch}") == "calc/ops.py"
    assert "return a + b" in git(repo, "show", f"{branch}:calc/ops.py")
    # Metered like real calls: every turn booked with its tokens, at the $0 price given.
    assert result["budgets"]["tokens"]["used"] > 0
    assert result["budgets"]["cost_usd"]["used"] == 0.0


def test_the_docs_example_spec_passes_check(tmp_path: Path) -> None:
    require_bwrap()
    repo = calc_repo(tmp_path / "calc")
    (repo / "night.toml").write_text(doc_block(SCRIPTED_PAGE, "`night.toml`:\n"))
    (repo / "turns.toml").write_text(doc_block(SCRIPTED_PAGE, "`turns.toml`:"))
    done = overnight("check", str(repo / "night.toml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "estimate" in done.stdout and "skipped" not in done.stdout
    assert_nothing_written(repo)


def test_init_refuses_to_overwrite_a_spec_unless_forced(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path / "calc")
    (repo / "night.toml").write_text("# mine\n")
    done = overnight("init", str(repo), "--goal", GOAL)
    assert done.returncode == 64
    assert "night.toml already exists" in done.stderr and "--force" in done.stderr
    assert (repo / "night.toml").read_text() == "# mine\n"
    forced = overnight("init", str(repo), "--goal", GOAL, "--force")
    assert "wrote" in forced.stdout
    assert tomllib.loads((repo / "night.toml").read_text())["goal"] == GOAL


def test_init_without_a_goal_and_no_terminal_names_the_goal_option(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path / "calc")
    done = overnight("init", str(repo))
    assert done.returncode == 64
    assert "--goal" in done.stderr and "no terminal" in done.stderr
    assert not (repo / "night.toml").exists()


def test_init_without_a_test_command_writes_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "plain")
    done = overnight("init", str(repo), "--goal", GOAL)
    assert done.returncode == 64
    assert "--predicate" in done.stderr and "no test command was found" in done.stderr
    assert not (repo / "night.toml").exists()


def test_init_with_an_anthropic_model_and_no_key_keeps_the_file_and_says_why(
    tmp_path: Path,
) -> None:
    require_bwrap()
    repo = calc_repo(tmp_path / "calc")
    done = overnight("init", str(repo), "--goal", GOAL, "--budget", "12.5", "--hours", "3")
    assert done.returncode == 64, done.stdout + done.stderr
    assert line(done.stdout, "model").startswith("failed model.provider: ANTHROPIC_API_KEY")
    for check in ("spec", "settings", "sandbox", "programs", "predicate"):
        assert line(done.stdout, check).startswith("ok "), done.stdout
    spec = tomllib.loads((repo / "night.toml").read_text())
    assert spec["model"] == {"provider": "anthropic", "name": "claude-opus-4-5"}
    assert spec["budget"] == {"usd": 12.5, "hours": 3.0}
    assert "is kept" in done.stdout
    assert_nothing_written(repo)


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.parametrize(
    ("files", "command", "found_from"),
    [
        ({"pytest.ini": "[pytest]\n"}, "python -m pytest -q", "pytest.ini"),
        (
            {"pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-x'\n"},
            "python -m pytest -q",
            "pyproject.toml",
        ),
        ({"setup.cfg": "[tool:pytest]\ntestpaths = t\n"}, "python -m pytest -q", "setup.cfg"),
        ({"tox.ini": "[tox]\n[pytest]\n"}, "python -m pytest -q", "tox.ini [pytest]"),
        ({"tests/unit/test_a.py": ""}, "python -m pytest -q", "tests/"),
        ({"test/test_a.py": ""}, "python -m pytest -q", "test/"),
        ({"Makefile": "all:\n\techo\ntest:\n\tpytest\n"}, "make test", "Makefile"),
    ],
)
def test_the_predicate_is_found_from_the_project(
    tmp_path: Path, files: dict[str, str], command: str, found_from: str
) -> None:
    found = find_predicate(_write(tmp_path, files))
    assert found is not None
    assert found.command == command
    assert found.found_from.startswith(found_from)
    assert command.startswith(found.prefix)


@pytest.mark.parametrize(
    "files",
    [
        {"pyproject.toml": "[tool.black]\n"},
        {"setup.cfg": "[metadata]\nname = x\n"},
        {"tests/helpers.py": "", "README.md": ""},
        {"Makefile": "test-all:\n\techo\nTEST := 1\n"},
        {"tox.ini": "[tox]\nenvlist = py311\n"},
    ],
)
def test_no_predicate_is_made_up(
    tmp_path: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin") + ":/usr/bin:/bin")
    assert find_predicate(_write(tmp_path / "p", files)) is None


def test_tox_is_the_predicate_only_when_it_is_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _write(tmp_path / "p", {"tox.ini": "[tox]\nenvlist = py311\n"})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert find_predicate(project) is None
    tox = bin_dir / "tox"
    tox.write_text("#!/bin/sh\nexit 0\n")
    tox.chmod(tox.stat().st_mode | stat.S_IXUSR)
    found = find_predicate(project)
    assert found is not None and (found.command, found.prefix) == ("tox -q", "tox")


def test_check_of_a_predicate_that_cannot_run_on_a_clean_checkout_exits_64_writing_nothing(
    tmp_path: Path,
) -> None:
    repo = calc_repo(tmp_path / "calc")
    # The tests import a module the checkout has and the commit lacks.
    (repo / "tests" / "test_helper.py").write_text("import helper\n\n\ndef test_h():\n    pass\n")
    git(repo, "add", "tests/test_helper.py")
    git(repo, "commit", "-q", "-m", "a test of an uncommitted module")
    (repo / "helper.py").write_text("")
    before = git(repo, "status", "--porcelain", "--ignored")
    spec = write_spec(
        tmp_path / "night.toml",
        spec_data(
            repo,
            model=False,
            predicate="python -m pytest -q",
            tasks=[command_task("t", "true", "true")],
        ),
    )
    done = overnight("check", str(spec))
    assert done.returncode == 64, done.stdout + done.stderr
    said = line(done.stdout, "predicate")
    assert said.startswith("failed predicate.command: `python -m pytest -q` cannot run on a clean")
    assert "errors collecting" in said or "collection" in said
    assert "(fix: " in said
    assert line(done.stdout, "spec").startswith("ok ")
    assert_nothing_written(repo)
    assert git(repo, "status", "--porcelain", "--ignored") == before


def test_check_names_a_program_missing_from_path_and_exits_3(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path / "calc")
    data = spec_data(
        repo,
        model=False,
        predicate="python -m pytest -q",
        tasks=[command_task("t", "true", "true")],
    )
    data["tools"] = {"commands": ["python -m pytest", "no-such-tool-xyz --flag"]}
    done = overnight("check", str(write_spec(tmp_path / "night.toml", data)))
    assert done.returncode == 3, done.stdout + done.stderr
    said = line(done.stdout, "programs")
    assert said.startswith("failed not on PATH: no-such-tool-xyz ([tools] commands)")
    assert line(done.stdout, "predicate").startswith("ok ")
    assert line(done.stdout, "model").startswith("ok none")
    assert_nothing_written(repo)


def test_check_refuses_a_budget_under_the_estimate(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path / "calc")
    (tmp_path / "turns.toml").write_text(doc_block(SCRIPTED_PAGE, "`turns.toml`:"))
    data = spec_data(repo, usd=0.5, predicate="python -m pytest -q", sandbox={"mode": "off"})
    data["model"] = {"provider": "script", "script": "turns.toml", "name": "scripted"}
    data["prices"] = {"scripted": {"input": 5.0, "output": 25.0}}
    data["tools"] = {"allow": ["read_file", "edit_file", "run_command"], "commands": ["python"]}
    data["estimate"] = {"tasks": 40}
    done = overnight("check", str(write_spec(tmp_path / "night.toml", data)))
    assert done.returncode == 64, done.stdout + done.stderr
    said = line(done.stdout, "estimate")
    assert said.startswith("failed the $0.50 cap is too small"), said
    assert "set budget.usd to at least" in said
    assert_nothing_written(repo)


def test_check_of_a_bad_spec_exits_64_naming_the_field(tmp_path: Path) -> None:
    repo = calc_repo(tmp_path / "calc")
    data = spec_data(repo, tasks=[command_task("t", "true", "true")], budget={"huors": 2})
    done = overnight("check", str(write_spec(tmp_path / "night.toml", data)))
    assert done.returncode == 64
    assert line(done.stdout, "spec").startswith("failed budget.huors: unknown field")
    assert "did you mean `hours`" in done.stdout
    assert "predicate" not in done.stdout
    assert_nothing_written(repo)
