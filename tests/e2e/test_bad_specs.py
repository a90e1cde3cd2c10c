"""A bad spec exits 64 before anything is written, naming the field and the fix."""

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from overnight.cli.main import main
from tests.helpers.nights import cli_env, command_task, spec_data, write_spec
from tests.helpers.toml import dumps

TASK = command_task("t_1", "true", "true")


def runs_root() -> Path:
    return Path(os.environ["OVERNIGHT_HOME"]) / "runs"


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


def variants(repo: Path, tmp_path: Path) -> dict[str, tuple[dict[str, Any], str]]:
    base = spec_data(repo, tasks=[TASK])
    out: dict[str, tuple[dict[str, Any], str]] = {}
    d = dict(base)
    del d["goal"]
    out["missing goal"] = (d, "goal")
    out["negative budget"] = (spec_data(repo, usd=-1.0, tasks=[TASK]), "budget.usd")
    out["zero hours"] = (spec_data(repo, hours=0, tasks=[TASK]), "budget.hours")
    d = spec_data(repo, tasks=[TASK])
    d["model"] = {**d["model"], "provider": "carrier-pigeon"}
    out["unknown provider"] = (d, "model.provider")
    d = spec_data(repo, tasks=[TASK])
    d["model"] = {**d["model"], "name": "mystery-model-9"}
    out["unknown price"] = (d, "model.name")
    out["workspace missing"] = (spec_data(tmp_path / "nope", tasks=[TASK]), "workspace")
    plain = tmp_path / "plain"
    plain.mkdir()
    out["workspace not a repo"] = (spec_data(plain, tasks=[TASK]), "workspace")
    out["task without verify"] = (
        spec_data(repo, tasks=[{"id": "t_1", "command": "true"}]),
        "tasks[0].verify",
    )
    both = {"id": "t_1", "command": "true", "brief": "do it", "verify": "true"}
    out["task with command and brief"] = (spec_data(repo, tasks=[both]), "tasks[0]")
    d = spec_data(repo, tasks=[TASK])
    d["budget"] = {**d["budget"], "usdd": 3}
    out["typo in a field"] = (d, "budget.usdd")
    out["duplicate task ids"] = (spec_data(repo, tasks=[TASK, TASK]), "tasks")
    out["bands out of order"] = (
        spec_data(repo, tasks=[TASK], budget={"finish_at": 0.95, "enforce_at": 0.9}),
        "budget.bands",
    )
    d = spec_data(repo, tasks=[TASK])
    d["model"] = {**d["model"], "target": "no_such_module_xyz:model"}
    out["model target cannot import"] = (d, "model.target")
    out["agent task without model or executor"] = (
        spec_data(repo, tasks=[{"id": "a", "brief": "x", "verify": "true"}], model=False),
        "model",
    )
    d = spec_data(repo, tasks=[TASK])
    d["agent"] = {"mechanical_model": "unpriced-small-model"}
    out["unpriced mechanical model"] = (d, "agent.mechanical_model")
    d = spec_data(repo, tasks=[TASK])
    d["tools"] = {"allow": ["read_file", "rm_rf"]}
    out["unknown tool"] = (d, "tools.allow")
    d = spec_data(repo, tasks=[TASK])
    d["tools"] = {"allow": ["run_command"], "commands": ["git"]}
    out["git in the command allowlist"] = (d, "tools.commands")
    out["effects ledger inside the workspace"] = (
        spec_data(repo, tasks=[TASK], effects={"database": str(repo / "effects.sqlite")}),
        "effects.database",
    )
    d = spec_data(repo, tasks=[TASK])
    d["tools"] = {"external": [{"name": "refund", "target": "x:y", "mutating": True}]}
    out["mutating external tool without a task key"] = (d, "tools.external[0]")
    out["no tasks and no model"] = (spec_data(repo, tasks=[], model=False), "model")
    # Absurd settings: each would put Infinity (not JSON) or an overflow into the result.
    out["infinite money"] = (spec_data(repo, usd=float("inf"), tasks=[TASK]), "budget.usd")
    out["money past reason"] = (spec_data(repo, usd=1e308, tasks=[TASK]), "budget.usd")
    out["infinite hours"] = (spec_data(repo, hours=float("inf"), tasks=[TASK]), "budget.hours")
    out["hours not a number"] = (spec_data(repo, hours=float("nan"), tasks=[TASK]), "budget.hours")
    d = spec_data(repo, tasks=[TASK])
    d["model"] = {**d["model"], "max_tokens": 10**12}
    out["max_tokens past any model"] = (d, "model.max_tokens")
    d = spec_data(repo, tasks=[TASK])
    d["agent"] = {"max_tokens": 10**12}
    out["agent max_tokens past any model"] = (d, "agent.max_tokens")
    d = spec_data(repo, tasks=[TASK])
    d["prices"]["fake-opus"]["output"] = float("inf")
    out["infinite price"] = (d, "prices.fake-opus.output")
    d = spec_data(repo, tasks=[TASK])
    d["predicate"] = {**d["predicate"], "allow_automation": [".github/[z-a]/**"]}
    out["bad allow_automation glob"] = (d, "predicate.allow_automation")
    return out


def test_each_bad_spec_exits_64_names_the_field_and_writes_nothing(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, (data, field) in variants(repo, tmp_path).items():
        spec_path = write_spec(tmp_path / f"{name.replace(' ', '_')}.toml", data)
        run_dir = tmp_path / f"run-{name.replace(' ', '_')}"
        code, err = run_cli(["run", str(spec_path), "--run-dir", str(run_dir)], capsys)
        assert code == 64, (name, err)
        assert field in err, (name, err)
        assert "fix:" in err or "unknown field" in err or "not a valid" in err, (name, err)
        assert not run_dir.exists(), name
        assert not runs_root().exists(), name
    branches = subprocess.run(
        ["git", "-C", str(repo), "branch", "--list", "overnight/*"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert branches == ""


def test_unreadable_toml_and_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text('goal = "unterminated\n')
    code, err = run_cli(["run", str(broken)], capsys)
    assert code == 64 and "not valid TOML" in err
    code, err = run_cli(["run", str(tmp_path / "absent.toml")], capsys)
    assert code == 64 and "does not exist" in err
    assert not runs_root().exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_spec_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "night.toml"
    p.write_text(dumps({"goal": "x"}))
    p.chmod(0)
    code, err = run_cli(["run", str(p)], capsys)
    p.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert code == 64 and "cannot read" in err


def test_existing_run_dir_is_refused_untouched(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_path = write_spec(tmp_path / "night.toml", spec_data(repo, tasks=[TASK], model=False))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "keep.txt").write_text("mine")
    code, err = run_cli(["run", str(spec_path), "--run-dir", str(run_dir)], capsys)
    assert code == 64 and "not empty" in err
    assert [p.name for p in run_dir.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize(
    "argv", [[], ["run"], ["frobnicate"], ["run", "x.toml", "--no-such-flag"], ["status"]]
)
def test_usage_errors_exit_64_never_2(argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "overnight", *argv],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 64, proc.stderr
    assert "usage" in proc.stderr


def test_status_and_report_of_a_non_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run_cli(["status", str(tmp_path)], capsys)
    assert code == 64 and "not an overnight run" in err
    code, err = run_cli(["report", str(tmp_path)], capsys)
    assert code == 64


def test_every_problem_of_a_spec_is_listed_with_its_field_and_fix(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A typo of a required field: the typo itself must be shown, not only "goal missing".
    data = spec_data(repo, usd=-1.0, tasks=[TASK])
    data["gaol"] = data.pop("goal")
    spec_path = write_spec(tmp_path / "night.toml", data)
    code, err = run_cli(["run", str(spec_path), "--run-dir", str(tmp_path / "run")], capsys)
    assert code == 64
    assert "3 problems in the spec" in err
    lines = err.splitlines()
    assert any(line.strip().startswith("goal: Field required (fix:") for line in lines), err
    assert any(
        line.strip().startswith("gaol: unknown field `gaol`") and "did you mean `goal`?" in line
        for line in lines
    ), err
    assert any(line.strip().startswith("budget.usd:") and "fix:" in line for line in lines), err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("provider", "name", "variable"),
    [("anthropic", "claude-opus-4-5", "ANTHROPIC_API_KEY"), ("openai", "gpt-4o", "OPENAI_API_KEY")],
)
def test_a_missing_api_key_is_found_before_anything_is_written(
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    name: str,
    variable: str,
) -> None:
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    data = spec_data(repo, tasks=[{"id": "a", "brief": "do it", "verify": "true"}])
    data["model"] = {"provider": provider, "name": name}
    del data["prices"]
    spec_path = write_spec(tmp_path / "night.toml", data)
    run_dir = tmp_path / "run"
    code, err = run_cli(["run", str(spec_path), "--run-dir", str(run_dir)], capsys)
    assert code == 64, err
    assert variable in err and "model.provider" in err
    assert not run_dir.exists() and not runs_root().exists()


def test_a_night_without_a_model_needs_no_money_cap(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = spec_data(repo, tasks=[command_task("t_1", "touch t1", "test -f t1")], model=False)
    data["predicate"]["command"] = "test -f t1"
    del data["budget"]  # no [budget] at all: hours default, no money
    spec_path = write_spec(tmp_path / "night.toml", data)
    run_dir = tmp_path / "run"
    code, err = run_cli(["run", str(spec_path), "--run-dir", str(run_dir), "--quiet"], capsys)
    assert code == 0, err
    report = main(["report", str(run_dir)])
    md = capsys.readouterr().out
    assert report == 0
    assert "| money |" not in md and "$0.00" not in md  # no money gauge, no "$0.00 of $0.00"
    assert "Money: none (a night without a model spends no money)." in md
    # With a model, the cap is required.
    with_model = spec_data(repo, tasks=[TASK])
    del with_model["budget"]
    spec_path = write_spec(tmp_path / "model.toml", with_model)
    code, err = run_cli(["run", str(spec_path), "--run-dir", str(tmp_path / "run2")], capsys)
    assert code == 64 and "budget.usd" in err and "needs a money cap" in err


@pytest.mark.parametrize(
    ("table", "typo", "meant", "where"),
    [
        ("budget", "huors", "hours", "[budget]"),
        ("predicate", "comand", "command", "[predicate]"),
        ("run", "retires", "retries", "[run]"),
        ("sandbox", "netwrok", "network", "[sandbox]"),
    ],
)
def test_an_unknown_key_suggests_the_nearest_key_of_its_own_table(
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    table: str,
    typo: str,
    meant: str,
    where: str,
) -> None:
    data = spec_data(repo, tasks=[TASK])
    data.setdefault(table, {})[typo] = data.get(table, {}).get(meant, 1)
    spec_path = write_spec(tmp_path / "night.toml", data)
    code, err = run_cli(["run", str(spec_path), "--run-dir", str(tmp_path / "run")], capsys)
    assert code == 64
    assert f"{table}.{typo}: unknown field `{typo}` in {where}" in err, err
    assert f"did you mean `{meant}`?" in err, err
    assert "add a [" not in err  # the table exists: no hint to add it
    assert not (tmp_path / "run").exists()


def test_an_unknown_key_far_from_every_key_lists_what_its_table_takes(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = spec_data(repo, tasks=[{**TASK, "zzzz": 1}])
    code, err = run_cli(
        ["run", str(write_spec(tmp_path / "night.toml", data)), "--run-dir", str(tmp_path / "r")],
        capsys,
    )
    assert code == 64
    assert "tasks[0].zzzz: unknown field `zzzz` in [[tasks]]" in err, err
    assert "[[tasks]] takes: id, title, command, brief, verify" in err, err
