"""The embedding API: ``overnight.run`` / ``overnight.resume`` as a program would call them,
including the docs' own example (docs/guides/embedding.md), run as written."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import overnight
from overnight.testing import ScriptedModel
from tests.helpers.nights import command_task, git, make_repo, spec_data, write_spec

EMBEDDING = Path(__file__).resolve().parents[2] / "docs" / "guides" / "embedding.md"


def night_toml(tmp_path: Path, **kwargs: Any) -> Path:
    repo = make_repo(tmp_path / "repo")
    tasks = [command_task(f"t{i}", f"echo {i} > f{i}.txt", f"test -f f{i}.txt") for i in range(3)]
    data = spec_data(repo, predicate="test -f f2.txt", tasks=tasks, model=False, **kwargs)
    data["budget"].pop("usd")
    return write_spec(tmp_path / "night.toml", data)


def test_run_returns_the_result_it_wrote_and_reports_typed_events(tmp_path: Path) -> None:
    events: list[overnight.Event] = []
    result = overnight.run(night_toml(tmp_path), run_dir=tmp_path / "run", on_event=events.append)
    assert isinstance(result, overnight.Result)
    assert (result.stop_reason, result.exit_code) == ("GOAL_MET", 0)
    on_disk = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result.model_dump(mode="json") == on_disk
    assert result.run_dir == (tmp_path / "run").absolute()
    # typed events, in order: the run is created first, the stop comes before the result
    assert isinstance(events[0], overnight.RunCreated)
    assert events[0].run_dir == result.run_dir and events[0].run_id == result.run_id
    started = [e for e in events if isinstance(e, overnight.TaskEvent) and e.event == "started"]
    assert [e.task for e in started] == ["t0", "t1", "t2"]
    decisions = [e.decision for e in events if isinstance(e, overnight.Decision)]
    assert decisions.index("stop") < decisions.index("result_written")
    stop = next(e for e in events if isinstance(e, overnight.Decision) and e.decision == "stop")
    assert stop.reason == "GOAL_MET" and stop.t >= 0 and stop.at
    commands = [e for e in events if isinstance(e, overnight.ToolCall) and e.tool == "command"]
    assert [e.exit_code for e in commands] == [0, 0, 0]
    verified = git(tmp_path / "repo", "log", "--format=%s", result.branch.name).splitlines()
    assert len(verified) == 4 and len(result.verified) == 3


def test_a_bad_spec_raises_before_anything_is_written(tmp_path: Path) -> None:
    path = night_toml(tmp_path)
    path.write_text(path.read_text().replace("goal =", "gaol ="))
    with pytest.raises(overnight.ConfigError) as info:
        overnight.run(path, run_dir=tmp_path / "run")
    assert "goal" in str(info.value) and "gaol" in str(info.value)
    assert not (tmp_path / "run").exists()
    assert git(tmp_path / "repo", "branch", "--list", "overnight/*") == ""


def test_a_failing_event_handler_does_not_change_the_night(tmp_path: Path) -> None:
    def broken(_event: overnight.Event) -> None:
        raise RuntimeError("the dashboard is down")

    result = overnight.run(night_toml(tmp_path), run_dir=tmp_path / "run", on_event=broken)
    assert (result.stop_reason, result.exit_code) == ("GOAL_MET", 0)


def test_a_handed_in_model_replaces_the_spec_model_and_its_checks(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    # the spec names a target that cannot be imported: with a model handed in, it is not used
    spec = overnight.load_spec(
        write_spec(
            tmp_path / "night.toml",
            spec_data(repo, predicate="true", tasks=[command_task("t", "true", "true")]),
        )
    )
    result = overnight.run(spec, run_dir=tmp_path / "run", model=ScriptedModel())
    assert result.stop_reason == "GOAL_MET"
    with pytest.raises(overnight.ConfigError) as info:
        overnight.run(spec, run_dir=tmp_path / "run2")
    assert info.value.field == "model.target"


def test_resume_takes_a_run_id_and_raised_budgets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OVERNIGHT_HOME", str(tmp_path / "home"))
    path = night_toml(tmp_path, budget={"steps": 1})
    first = overnight.run(path, run_dir=tmp_path / "run")
    assert first.stop_reason == "BUDGET_EXHAUSTED:steps" and first.resumable
    again = overnight.resume(first.run_id, steps=10)
    assert again.stop_reason == "GOAL_MET" and again.run_id == first.run_id
    assert again.budgets.steps.limit == 10 and again.resumes == 1


def test_signals_from_another_thread_drain_the_night(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tasks = [command_task(f"s{i}", "sleep 0.3", "true") for i in range(20)]
    data = spec_data(repo, predicate="false", tasks=tasks, model=False)
    data["budget"].pop("usd")
    path = write_spec(tmp_path / "night.toml", data)
    signals = overnight.Signals()
    box: dict[str, overnight.Result] = {}

    def night() -> None:
        box["result"] = overnight.run(path, run_dir=tmp_path / "run", signals=signals)

    worker = threading.Thread(target=night)
    worker.start()
    while not (tmp_path / "run" / "trace.jsonl").exists():
        time.sleep(0.05)
    time.sleep(0.5)
    signals.request("sigterm")
    worker.join(timeout=60)
    assert not worker.is_alive()
    result = box["result"]
    assert result.stop_reason == "TIME_LIMIT:sigterm" and result.resumable
    assert len(result.plan.done) < 20


def test_the_docs_embedding_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = EMBEDDING.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code is not None
    lines = code.group(1).strip().splitlines()
    assert len(lines) <= 15
    night_toml(tmp_path)
    monkeypatch.chdir(tmp_path)
    exec(compile(code.group(1), str(EMBEDDING), "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["t0 done", "t1 done", "t2 done"]
    assert out[3].startswith("GOAL_MET 0 [")
