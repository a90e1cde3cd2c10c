"""result.json: its shipped schema, secrets kept out, the user's checkout left alone."""

import json
import subprocess
from pathlib import Path

import jsonschema

from overnight.cli.main import main
from overnight.core.endings import Stop
from overnight.store.result import result_json_schema, shipped_schema
from overnight.testing import ScriptedModel
from tests.helpers.nights import command_task, git, make_spec, run_night

SECRET = "sk-ant-api03-DO-NOT-LEAK-0123456789abcdef"


def test_shipped_schema_is_the_generated_one() -> None:
    # Regenerate with: python -m overnight.store.result > src/overnight/store/result.schema.json
    assert shipped_schema() == json.loads(json.dumps(result_json_schema()))


def test_a_real_result_validates_and_a_broken_one_does_not(repo: Path, tmp_path: Path) -> None:
    spec = make_spec(repo, tasks=[command_task("t_1", "true", "true")], predicate="false")
    rd, _ = run_night(spec, tmp_path / "run", model=ScriptedModel())
    data = json.loads((rd.path / "result.json").read_text())
    jsonschema.validate(data, shipped_schema())
    del data["budgets"]["cost_usd"]["limit"]
    try:
        jsonschema.validate(data, shipped_schema())
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError("a result without cost_usd.limit passed the schema")


def test_api_keys_never_reach_commands_trace_or_result(
    repo: Path, tmp_path: Path, monkeypatch: object
) -> None:
    import pytest

    mp: pytest.MonkeyPatch = monkeypatch  # type: ignore[assignment]
    mp.setenv("ANTHROPIC_API_KEY", SECRET)
    mp.setenv("OPENAI_API_KEY", SECRET + "-openai")
    tasks = [
        command_task(
            "t_1", "env > seen-env.txt; echo key=$ANTHROPIC_API_KEY", "test -f seen-env.txt"
        ),
    ]
    spec = make_spec(repo, tasks=tasks, predicate="false")
    leaky = ScriptedModel(summarize=f"The key is {SECRET}, do not print it.")
    rd, r = run_night(spec, tmp_path / "run", model=leaky)
    env_seen = git(repo, "show", f"{r.branch.name}:seen-env.txt")
    assert "ANTHROPIC_API_KEY" not in env_seen and "OPENAI_API_KEY" not in env_seen
    assert "PATH=" in env_seen
    for name in ("trace.jsonl", "result.json", "spend.jsonl", "checkpoint.json"):
        assert SECRET not in (rd.path / name).read_text(), name
    for log in (rd.path / "artifacts").iterdir():
        assert SECRET not in log.read_text(errors="replace"), log


def test_users_checkout_and_uncommitted_changes_untouched(repo: Path, tmp_path: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "README.md").write_text("my uncommitted edit\n")
    (repo / "scratch.txt").write_text("untracked\n")
    before = git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD")
    tasks = [command_task("t_1", "echo work > README.md", "grep -q work README.md")]
    spec = make_spec(repo, tasks=tasks, predicate="grep -q work README.md")
    _, r = run_night(spec, tmp_path / "run", model=ScriptedModel())
    assert r.stop_reason == "GOAL_MET"
    assert (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD")) == before
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "feature"
    assert (repo / "README.md").read_text() == "my uncommitted edit\n"
    assert git(repo, "show", f"{r.branch.name}:README.md") == "work"
    # the run branched from the committed HEAD, not from the dirty tree
    assert r.branch.base_commit == before[1]


def test_report_and_status_commands(repo: Path, tmp_path: Path, capsys: object) -> None:
    import pytest

    cap: pytest.CaptureFixture[str] = capsys  # type: ignore[assignment]
    spec = make_spec(
        repo, tasks=[command_task("t_1", "true", "false", retries=0)], predicate="false"
    )
    rd, _ = run_night(spec, tmp_path / "run", model=ScriptedModel())
    assert main(["report", str(rd.path)]) == 0
    out = cap.readouterr().out
    assert "QUEUE_EMPTY_GOAL_UNMET" in out and "t_1" in out and "Parked tasks (1)" in out
    assert main(["status", str(rd.path), "--json"]) == 0
    status = json.loads(cap.readouterr().out)
    assert status["state"] == "finished" and status["tasks"]["parked"] == ["t_1"]
    (rd.path / "result.json").unlink()
    assert main(["report", str(rd.path)]) == 66
    assert "no result yet" in cap.readouterr().err


def test_cli_run_json_output_matches_result_file(repo: Path, tmp_path: Path) -> None:
    import sys

    from tests.helpers.nights import cli_env, spec_data, write_spec

    data = spec_data(
        repo,
        tasks=[command_task("t_1", "touch ok", "test -f ok")],
        predicate="test -f ok",
        model=False,
    )
    spec_path = write_spec(tmp_path / "night.toml", data)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "overnight",
            "run",
            str(spec_path),
            "--run-dir",
            str(tmp_path / "run"),
            "--json",
            "--quiet",
        ],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed == json.loads((tmp_path / "run" / "result.json").read_text())
    assert printed["wrapup"]["source"] == "structured"  # no model: the summary is rendered
    assert "t_1" in printed["partial_output"]


def test_the_loop_has_no_queue_condition() -> None:
    # The empty-queue trap is a loop shape: a drained queue must never be the loop's own exit.
    import re

    src = Path(__file__).resolve().parents[2] / "src" / "overnight"
    offenders = [
        str(p)
        for p in src.rglob("*.py")
        if re.search(r"while\s+(not\s+)?[\w.]*queue\b", p.read_text())
    ]
    assert offenders == []


def _resume_continues(tmp_path: Path, stop: Stop, held: bool) -> tuple[bool, bool]:
    """(what result.json says, whether ``overnight resume`` continues the run once the review
    queue is resolved) for a run that ended with ``stop``, a task held or not."""
    from overnight.core.endings import describe
    from overnight.core.errors import ConfigError
    from overnight.core.state import RunState
    from overnight.core.tasks import ParkedTask, Task
    from overnight.night.runs import _reopen
    from overnight.store.rundir import RunDir, write_json_atomic

    path = tmp_path / f"{stop.reason.replace(':', '-')}-{held}"
    path.mkdir()
    rd = RunDir(path)
    resumable = describe(stop, held=held).resumable
    write_json_atomic(rd.result, {"stop_reason": stop.reason, "resumable": resumable})
    state = RunState(run_id="r", goal_text="g", goal_sha="s", branch="b", base_commit="c")
    if held:
        task = Task(id="t_1", title="t", brief="do it", verify="true")
        state.parked.append(ParkedTask(task=task, reason="unknown outcome", held_for=["k"]))
    try:
        _reopen(rd, state, ["t_1"] if held else [])  # the review queue resolved
    except ConfigError:
        return resumable, False
    return resumable, True


def test_resumable_is_true_for_every_state_a_resume_continues(tmp_path: Path) -> None:
    """Every ending (every cause of UNRECOVERABLE_ERROR), with a task held for a person's
    answer or not: result.json says resumable exactly when a resume continues the run, for a
    held task once the review queue is resolved."""
    from overnight.core.endings import REOPENED_BY_REVIEW, RESUMABLE_BY_CAUSE, Ending, Stop

    stops = [Stop(e, "x") for e in Ending if e is not Ending.UNRECOVERABLE_ERROR]
    stops += [Stop(Ending.UNRECOVERABLE_ERROR, cause) for cause in RESUMABLE_BY_CAUSE]
    for stop in stops:
        for held in (False, True):
            said, continues = _resume_continues(tmp_path, stop, held)
            assert said == continues, (stop.reason, held)
            if held and stop.ending in REOPENED_BY_REVIEW:
                assert said, stop.reason  # whatever the ending's own table says
