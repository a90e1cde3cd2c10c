"""``overnight replay``: a recorded night run again offline, answered from its recording, ends
the same; a change that alters a request is reported at the first call it changes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from overnight.cli.commands import main
from overnight.cli.demo import run_demo
from overnight.core.budget import Usage
from overnight.models.types import ModelRequest, ModelResponse
from overnight.replay import recording_of_run, replay, shipped_recording
from overnight.store.answers import ANSWERS_FILE, MAX_RECORD_BYTES, AnswerRecorder
from overnight.store.journal import read_intact_records
from overnight.store.trace import REDACTED


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Recorded under long paths, as a night in ~/.overnight/runs is: a replay pads its own
    # paths to the recording's lengths (tool output cut by length then cuts alike).
    where = tmp_path_factory.mktemp("night") / ("n" * 80)
    assert run_demo(where, quiet=True) == 0
    return where / "run"


def replayed(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["replay", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_shipped_recording_replays_to_the_same_ending_tasks_and_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, r = replayed(capsys, "demo", "--into", str(tmp_path / "replay"))
    # A harness change that alters what the demo night asks fails here, at the first call it
    # changes; when the change is meant, `python -m overnight.replay` records the night again.
    assert code == 0 and r["same"] is True and r["divergence"] is None, r["divergence"]
    assert r["stop_reason"] == ["GOAL_MET", "GOAL_MET"]
    assert r["verified"] == [["fix_words", "fix_ties"]] * 2
    assert r["tree"][0] is not None and r["tree"][0] == r["tree"][1]
    assert r["calls"][0] == r["calls"][1] == len(shipped_recording().answers) > 0
    assert r["notes"] == []  # the copy starts from the recorded base tree
    # no money was spent and no key was needed: the spend journal books the recorded usage
    result = json.loads((Path(r["run_dir"]) / "result.json").read_text())
    assert result["spend"]["model_calls"] == r["calls"][1]


def test_a_fresh_night_records_its_answers_and_replays_the_same(
    night: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = read_intact_records(night / ANSWERS_FILE)
    result = json.loads((night / "result.json").read_text())
    assert len(answers) == result["spend"]["model_calls"]
    first = answers[1]
    assert first["purpose"] == "execute" and first["response"]["content"][0]["type"] == "tool_use"
    assert "input" in first["response"]["content"][0] and first["response"]["usage"]
    assert str(night.parent) not in json.dumps(answers)  # the run's names are placeholders
    code, r = replayed(capsys, str(night), "--into", str(tmp_path / "again"))
    assert code == 0 and r["same"] is True
    assert r["tree"][0] == r["tree"][1] and r["verified"][0] == r["verified"][1]


def test_a_changed_request_is_reported_at_the_first_call_it_changes(
    night: Path, tmp_path: Path
) -> None:
    rec = recording_of_run(night)
    changed = copy.deepcopy(rec.spec)
    changed["agent"]["instructions"] = "Prefer small diffs."
    first_agent_call = 1 + next(i for i, a in enumerate(rec.answers) if a["purpose"] == "execute")
    report = replay(type(rec)(**{**rec.__dict__, "spec": changed}), tmp_path / "changed")
    assert not report.same and report.exit_code == 3
    d = report.divergence
    assert d is not None
    assert (d.call, d.purpose, d.kind) == (first_agent_call, "execute", "request")
    assert "Prefer small diffs." in d.detail
    assert report.calls[1] == first_agent_call - 1  # answered up to it, nothing after


def test_a_changed_tool_result_is_named_as_such(night: Path, tmp_path: Path) -> None:
    rec = recording_of_run(night)
    answers = copy.deepcopy(rec.answers)
    # the recording says the third call saw another tool result than the replay will
    n = next(
        i
        for i, a in enumerate(answers)
        if any(
            isinstance(block, dict) and block.get("type") == "tool_result"
            for m in a["request"]["messages"]
            for block in (m["content"] if isinstance(m["content"], list) else [])
        )
    )
    for m in answers[n]["request"]["messages"]:
        for block in m["content"] if isinstance(m["content"], list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                block["content"] = "something else"
    answers[n]["request_key"] = "tampered"
    report = replay(type(rec)(**{**rec.__dict__, "answers": answers}), tmp_path / "tool")
    assert report.divergence is not None
    assert (report.divergence.call, report.divergence.kind) == (n + 1, "tool_result")
    assert "a tool result changed" in report.divergence.detail


def test_answers_are_redacted_and_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_API_KEY", "sk-very-secret-value")
    path = tmp_path / ANSWERS_FILE
    recorder = AnswerRecorder(path, [(str(tmp_path), "<run-dir>")])
    request = ModelRequest(
        model="m",
        purpose="execute",
        system="s",
        messages=[{"role": "user", "content": f"key sk-very-secret-value in {tmp_path}/x"}],
        max_tokens=10,
    )
    said = ModelResponse(content=[{"type": "text", "text": "sk-very-secret-value"}], usage=Usage())
    recorder.record(request, said)
    huge = ModelResponse(content=[{"type": "text", "text": "x" * MAX_RECORD_BYTES}])
    recorder.record(request, huge)
    kept = read_intact_records(path)
    text = json.dumps(kept[0])
    assert "sk-very-secret-value" not in text and REDACTED in text and "<run-dir>/x" in text
    assert kept[1]["response"] is None and kept[1]["too_large"] > MAX_RECORD_BYTES
    assert kept[1]["request_key"] == kept[0]["request_key"]
