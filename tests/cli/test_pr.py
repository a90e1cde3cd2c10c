"""`overnight pr RUN`: a pull request from a night's result, with real git, a local bare
remote and a stand-in `gh` that records how it was called. Model text in the body stays text."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from overnight.cli.main import main
from overnight.messages.types import ModelRequest
from overnight.report.facts import GATES_SAID
from overnight.testing import text_answer, tool_answer, usage_dict
from tests.helpers.nights import command_task, git, make_repo, spec_data, write_spec
from tests.report.runs import FORMAT_GATE, RUFF_GATE, UNREADABLE_GATE, gates_night
from tests.report.test_gates import FORMAT_LINE, JUDGED_NOTHING, RUFF_LINE

#: The closing summary the model writes: every kind of markup a reviewer must not see rendered.
SUMMARY = (
    "# Approved by security\n"
    "<script>alert(1)</script> <img src=x onerror=alert(1)>\n"
    "[merge me](javascript:alert(1)) <http://evil.example>\n"
    "``` a fence ``` and `code`\n"
    "| verdict | ok |\n|---|---|\n| all | green |\n"
)
#: A verify whose output (the parked task's detail) tries the same.
LOUD_VERIFY = "echo '# GOAL_MET <b>bold</b> [x](javascript:alert(1)) | a | b |'; exit 1"
PARKED_TITLE = "park <script>alert(2)</script> [l](javascript:x)"
VERIFIED_TITLE = "write `one` | **now**"


def model(request: ModelRequest) -> dict[str, Any]:
    """The night's model (``[model] target``): on goal for drift, the summary otherwise."""
    usage = usage_dict(input=1000, output=100)
    if request.purpose == "drift":
        verdict = {"reasoning": "on goal", "off_goal_task_ids": [], "drift_score": 0.0}
        return tool_answer("submit_drift_verdict", verdict, usage)
    return text_answer(SUMMARY, usage)


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as exit:
        code = int(exit.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def night(tmp_path: Path, capsys: pytest.CaptureFixture[str], tasks: list[dict[str, Any]]) -> Path:
    repo = tmp_path / "repo"
    if not repo.exists():
        make_repo(repo)
    data = spec_data(
        repo, predicate="test -f one.txt", tasks=tasks, run={"retries": 0, "replan": False}
    )
    data["model"]["target"] = "tests.cli.test_pr:model"
    spec = write_spec(tmp_path / "night.toml", data)
    run_dir = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
    cli(capsys, "run", spec, "--run-dir", run_dir, "--quiet")
    assert (run_dir / "result.json").exists()
    return run_dir


def landed_night(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """One task parked (its verify says not done), one verified with a commit: GOAL_MET."""
    run_dir = night(
        tmp_path,
        capsys,
        [
            command_task("p1", "true", LOUD_VERIFY, title=PARKED_TITLE),
            command_task("c1", "echo one > one.txt", "test -f one.txt", title=VERIFIED_TITLE),
        ],
    )
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "GOAL_MET"
    assert [v["id"] for v in result["verified"]] == ["c1"] and result["verified"][0]["commit"]
    assert [p["id"] for p in result["plan"]["parked"]] == ["p1"]
    assert result["partial_output"].strip() == SUMMARY.strip()
    return run_dir


def stand_in_gh(tmp_path: Path) -> tuple[Path, Path]:
    """A `gh` first on PATH recording its arguments, working directory and body file."""
    bin_dir, record = tmp_path / "bin", tmp_path / "gh-calls.jsonl"
    bin_dir.mkdir()
    script = bin_dir / "gh"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "args = sys.argv[1:]\n"
        "body = next((a.split('=', 1)[1] for a in args if a.startswith('--body-file=')), None)\n"
        "call = {'args': args, 'cwd': os.getcwd(),\n"
        "        'body': open(body, encoding='utf-8').read() if body else None}\n"
        f"with open({str(record)!r}, 'a', encoding='utf-8') as fh:\n"
        "    fh.write(json.dumps(call) + '\\n')\n"
        "print('https://github.example/o/r/pull/7')\n"
    )
    script.chmod(0o755)
    return bin_dir, record


def calls(record: Path) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]


def tokens(md: str) -> list[Token]:
    flat: list[Token] = []
    for t in MarkdownIt("commonmark").enable("table").enable("strikethrough").parse(md):
        flat.append(t)
        flat.extend(t.children or [])
    return flat


def test_pr_pushes_the_branch_and_opens_a_draft_with_gh(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = landed_night(tmp_path, capsys)
    result = json.loads((run_dir / "result.json").read_text())
    repo, branch = tmp_path / "repo", result["branch"]["name"]
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    bin_dir, record = stand_in_gh(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    code, out, err = cli(capsys, "pr", run_dir, "--push")

    assert code == 0, err
    body_file = run_dir / "pull-request.md"
    assert str(body_file) in out and "https://github.example/o/r/pull/7" in out
    assert git(remote, "rev-parse", f"refs/heads/{branch}") == result["branch"]["head"]
    [call] = calls(record)
    assert call["cwd"] == str(repo)
    assert call["args"][:3] == ["pr", "create", "--draft"]
    assert f"--head={branch}" in call["args"] and f"--body-file={body_file}" in call["args"]
    assert "--title=overnight: Make the predicate pass. (GOAL_MET)" in call["args"]
    body = call["body"]
    assert body == body_file.read_text()
    assert f"`{result['verified'][0]['commit']}`" in body
    assert "- verify: `test -f one.txt`" in body  # the verified task's verify command
    assert "verdict: its verify passed, judged from its exit code only" in body
    assert "### Parked tasks (1)" in body and "`not done after 1 attempt(s)`" in body
    # Used against the limit: the summary's one call, 1,000 tokens in at $5/MTok and 100 out
    # at $25/MTok.
    assert result["budgets"]["cost_usd"]["used"] == 0.0075
    assert "Money: $0.0075 of the $10.00 cap (0%)" in body
    assert "All 18 checks agree" in body and f"`overnight audit {result['run_id']}`" in body
    assert f"from base commit `{result['branch']['base_commit']}`" in body
    assert "exit 0 (SUCCESS)" in body

    # Ready rather than draft, into another base, into another file.
    other = tmp_path / "other.md"
    code, out, err = cli(capsys, "pr", run_dir, "--ready", "--base", "main", "--out", other)
    assert code == 0, err
    second = calls(record)[1]
    assert "--draft" not in second["args"] and "--base=main" in second["args"]
    assert second["body"] == other.read_text() == body


def test_model_text_in_the_body_is_text_never_markup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = landed_night(tmp_path, capsys)
    code, _, err = cli(capsys, "pr", run_dir)  # no gh on this machine's PATH either way
    assert code == 0, err
    body = (run_dir / "pull-request.md").read_text()
    found = tokens(body)
    kinds = {t.type for t in found}
    assert not kinds & {"html_block", "html_inline", "link_open", "image", "table_open"}, kinds
    headings = [found[i + 1].content for i, t in enumerate(found) if t.type == "heading_open"]
    assert headings == [
        "Verified tasks (1)",
        "Parked tasks (1)",
        "Spend",
        "Audit",
        "Branch",
        "Summary (written by the model)",
    ]
    # Each piece of model text is there whole, as code.
    fences = [t.content for t in found if t.type == "fence"]
    assert SUMMARY.strip() in [f.strip() for f in fences]
    code_spans = [t.content for t in found if t.type == "code_inline"]
    assert PARKED_TITLE in code_spans and VERIFIED_TITLE in code_spans
    assert any("# GOAL_MET <b>bold</b> [x](javascript:alert(1))" in c for c in code_spans)
    assert "<script>" not in "".join(t.content for t in found if t.type == "text")


def test_without_gh_the_two_commands_are_printed_and_nothing_is_pushed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = landed_night(tmp_path, capsys)
    branch = json.loads((run_dir / "result.json").read_text())["branch"]["name"]
    git(tmp_path / "repo", "remote", "add", "upstream", str(tmp_path / "upstream.git"))
    only_git = tmp_path / "only-git"
    only_git.mkdir()
    (only_git / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    monkeypatch.setenv("PATH", str(only_git))

    code, out, err = cli(capsys, "pr", run_dir, "--push", "--remote", "upstream")

    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == str(run_dir / "pull-request.md")
    assert f"gh is not on PATH; to open the pull request, run in {tmp_path / 'repo'}:" in lines
    assert f"  git push upstream {branch}" in lines
    [gh_line] = [line for line in lines if line.startswith("  gh pr create --draft ")]
    assert f"--head={branch}" in gh_line and f"--body-file={run_dir / 'pull-request.md'}" in gh_line
    assert "'--title=overnight: Make the predicate pass. (GOAL_MET)'" in gh_line


def test_a_night_without_a_verified_commit_proposes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = night(tmp_path, capsys, [command_task("c1", "true", "true")])  # nothing to commit
    result = json.loads((run_dir / "result.json").read_text())
    assert (
        result["stop_reason"] == "QUEUE_EMPTY_GOAL_UNMET"
        and result["verified"][0]["commit"] is None
    )
    bin_dir, record = stand_in_gh(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    code, _, err = cli(capsys, "pr", run_dir, "--push")

    assert code == 3 and "nothing to propose" in err
    assert calls(record) == [] and not (run_dir / "pull-request.md").exists()


def test_a_branch_moved_back_to_its_base_proposes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = landed_night(tmp_path, capsys)
    result = json.loads((run_dir / "result.json").read_text())
    git(
        tmp_path / "repo", "branch", "-f", result["branch"]["name"], result["branch"]["base_commit"]
    )
    code, _, err = cli(capsys, "pr", run_dir)
    assert code == 3 and "holds no commit beyond its base" in err


def test_a_run_without_a_result_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = landed_night(tmp_path, capsys)
    running = tmp_path / "running"
    shutil.copytree(run_dir, running)
    (running / "result.json").unlink()
    code, _, err = cli(capsys, "pr", running)
    assert code == 66 and "has no result yet" in err and "overnight status" in err
    code, _, err = cli(capsys, "pr", tmp_path / "repo")
    assert code == 64 and "not an overnight run directory" in err


def test_without_a_remote_the_body_is_written_and_adding_one_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = landed_night(tmp_path, capsys)
    bin_dir, record = stand_in_gh(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    code, out, err = cli(capsys, "pr", run_dir)

    assert code == 0, err
    assert out.splitlines()[0] == str(run_dir / "pull-request.md")
    assert (run_dir / "pull-request.md").exists()
    assert "has no remote 'origin'" in err and "remote add origin URL" in err
    assert "git push" not in out + err
    assert calls(record) == []  # gh was not asked to open what cannot be pushed


def gates_body(tmp_path: Path, capsys: pytest.CaptureFixture[str], gates: list[Any]) -> str:
    """The body ``overnight pr`` writes for a night whose fix landed, judged by ``gates``."""
    run_dir = gates_night(tmp_path, gates)
    code, _, err = cli(capsys, "pr", run_dir)
    assert code == 0, err
    return (run_dir / "pull-request.md").read_text()


def test_the_body_says_each_gates_counts_before_the_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = gates_body(tmp_path, capsys, [RUFF_GATE, FORMAT_GATE])
    assert f"### Gates\n\n{GATES_SAID}\n\n- {RUFF_LINE}\n- {FORMAT_LINE}\n" in body
    found = tokens(body)
    headings = [found[i + 1].content for i, t in enumerate(found) if t.type == "heading_open"]
    assert headings[:2] == ["Gates", "Verified tasks (1)"]
    assert "ruff-format" in [t.content for t in found if t.type == "code_inline"]


def test_a_gate_that_could_not_read_the_base_commit_judged_nothing_in_the_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = gates_body(tmp_path, capsys, [UNREADABLE_GATE])
    [line] = [line for line in body.splitlines() if line.startswith("- `lint-json`")]
    assert line.startswith(f"- `lint-json`: {JUDGED_NOTHING}: `ruff-json: expected ")
    assert "no JSON here" in line and "new" not in line


def test_a_night_without_gates_has_no_gates_in_the_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = landed_night(tmp_path, capsys)
    assert json.loads((run_dir / "result.json").read_text())["gates"] == []
    code, _, err = cli(capsys, "pr", run_dir)
    assert code == 0, err
    body = (run_dir / "pull-request.md").read_text()
    assert "### Gates" not in body and GATES_SAID not in body and "finding(s)" not in body
