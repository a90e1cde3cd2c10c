"""``overnight replay``: a recorded night run again offline, answered from its recording, ends
the same wherever it is replayed; a change that alters a request is reported at the first call
it changes, the replay going on by position and counting the calls that matched; a machine
without what the night used is told so before anything runs."""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from overnight.cli.demo import run_demo
from overnight.cli.main import main
from overnight.core.budget import Usage
from overnight.core.errors import ConfigError
from overnight.messages.types import ModelRequest, ModelResponse
from overnight.replay import recording_of_run, render_replay, replay, shipped_recording
from overnight.store.answer_log import ANSWERS_FILE, MAX_RECORD_BYTES, AnswerRecorder
from overnight.store.journal import read_intact_records
from overnight.store.trace import REDACTED


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Recorded under a long path, as a night under a long home directory is.
    where = tmp_path_factory.mktemp("night") / ("n" * 80)
    assert run_demo(where, quiet=True) == 0
    return where / "run"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A new directory whose path is 20 characters long."""
    base = Path(tempfile.mkdtemp(prefix="ovr-", dir="/tmp"))
    try:
        into = base / ("r" * (20 - len(str(base)) - 1))
        assert len(str(into)) == 20
        yield into
    finally:
        shutil.rmtree(base, ignore_errors=True)


def long_dir(tmp_path: Path) -> Path:
    """A new directory whose path is 200 characters long."""
    into = tmp_path / ("d" * (200 - len(str(tmp_path)) - 1))
    assert len(str(into)) == 200
    return into


def replayed(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["replay", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("length", [200, 20])
def test_the_shipped_recording_replays_to_the_same_ending_tasks_and_tree(
    tmp_path: Path, short_dir: Path, capsys: pytest.CaptureFixture[str], length: int
) -> None:
    # Under a path longer and shorter than the recording's (the goal check's output, which
    # names its files, is cut to a length before the replan is shown it): the same requests.
    into = long_dir(tmp_path) if length == 200 else short_dir
    code, r = replayed(capsys, "demo", "--into", str(into))
    # A harness change that alters what the demo night asks fails here, at the first call it
    # changes; when the change is meant, `python -m overnight.replay` records the night again.
    assert code == 0 and r["same"] is True and r["divergence"] is None, r["divergence"]
    assert r["stop_reason"] == ["GOAL_MET", "GOAL_MET"]
    assert r["verified"] == [["fix_words", "fix_ties"]] * 2
    assert r["tree"][0] is not None and r["tree"][0] == r["tree"][1]
    assert len(shipped_recording().answers) == 11
    assert r["calls"] == [11, 11] and r["made"] == r["matched"] == 11
    assert r["calls_matched"] == "11 of 11"
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
    # the goal check the replan is shown names the checkout's files relative to it
    replan = next(a for a in answers if a["purpose"] == "replan")
    said = replan["request"]["messages"][0]["content"]
    assert "./tests/test_top.py" in said and "<run-dir>" not in said
    code, r = replayed(capsys, str(night), "--into", str(tmp_path / "again"))
    assert code == 0 and r["same"] is True
    assert r["tree"][0] == r["tree"][1] and r["verified"][0] == r["verified"][1]


def test_a_night_recorded_under_a_long_path_replays_the_same_under_a_short_one(
    night: Path, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert len(str(night)) > 100 > len(str(short_dir))
    code, r = replayed(capsys, str(night), "--into", str(short_dir))
    assert code == 0 and r["same"] is True, r["divergence"]
    assert r["calls_matched"] == f"{r['calls'][0]} of {r['calls'][0]}"
    assert r["tree"][0] == r["tree"][1]


def test_one_request_changed_is_named_and_the_replay_counts_the_calls_that_matched(
    night: Path, tmp_path: Path
) -> None:
    rec = recording_of_run(night)
    answers = copy.deepcopy(rec.answers)
    # the recording says one call saw another tool result than the replay will
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
    answers[n]["request_key"] = "changed on purpose"
    report = replay(type(rec)(**{**rec.__dict__, "answers": answers}), tmp_path / "tool")
    d = report.divergence
    assert d is not None
    assert (d.call, d.purpose, d.kind) == (n + 1, "execute", "tool_result")
    assert d.detail.startswith("a tool result changed at .messages[")
    assert d.where in d.detail and d.recorded == "'something else'"
    assert d.replayed != d.recorded
    # answered past it by position: every other call matched, and the night ended the same
    total = len(answers)
    assert report.made == report.calls[1] == total and report.stopped is None
    assert report.matched == total - 1 and report.calls_matched == f"{total - 1} of {total}"
    assert report.stop_reason[0] == report.stop_reason[1] and report.tree[0] == report.tree[1]
    assert not report.same and report.exit_code == 3  # a differing call is a difference
    text = render_replay(report)
    assert f"DIVERGED at call {n + 1} (execute, tool_result): a tool result changed" in text
    assert f"recorded: {d.recorded}" in text and f"replayed: {d.replayed}" in text
    assert "went on:" in text
    assert text.endswith(f"; {total - 1} of {total} calls matched.\n")
    assert report.as_dict()["divergence"]["replayed"] == d.replayed


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
    assert (d.call, d.purpose, d.kind, d.where) == (
        first_agent_call,
        "execute",
        "request",
        ".system",
    )
    assert "Prefer small diffs." in d.replayed and "Prefer small diffs." not in d.recorded
    # every agent step now asks otherwise; each is still answered by its position
    agent_steps = sum(a["purpose"] == "execute" for a in rec.answers)
    assert report.calls[1] == len(rec.answers)
    assert report.matched == len(rec.answers) - agent_steps


def test_a_call_the_recording_cannot_answer_stops_the_night_and_says_why(
    night: Path, tmp_path: Path
) -> None:
    rec = recording_of_run(night)
    short = rec.answers[:3]  # the recording ends in the middle of the first task
    report = replay(type(rec)(**{**rec.__dict__, "answers": short}), tmp_path / "cut")
    d = report.divergence
    assert d is not None and (d.call, d.kind) == (4, "extra_call")
    assert report.matched == report.calls[1] == 3 and report.made >= 4
    assert report.stopped is not None and "the recording does not have" in report.stopped
    assert "the recording could answer no further" in render_replay(report)


def test_answers_of_the_first_format_still_replay_with_a_note(night: Path, tmp_path: Path) -> None:
    rec = recording_of_run(night)
    older = [{**a, "version": 1, "name_lengths": {"<run-dir>": 99}} for a in rec.answers]
    report = replay(type(rec)(**{**rec.__dict__, "answers": older}), tmp_path / "older")
    assert report.same  # these requests match: the note says why one holding a path may not
    assert any("format 1" in note and "record the night again" in note for note in report.notes)


def _path_without(tmp_path: Path, missing: str) -> str:
    """A PATH of one directory linking every program on the current PATH but ``missing``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            target = os.path.join(folder, name)
            if name != missing and os.access(target, os.X_OK) and not (bin_dir / name).exists():
                (bin_dir / name).symlink_to(target)
    return str(bin_dir)


@pytest.mark.parametrize(
    ("missing", "named"), [("rg", "ripgrep"), ("bwrap", "bubblewrap")], ids=["rg", "bwrap"]
)
def test_a_machine_without_a_program_the_night_used_is_told_before_anything_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    missing: str,
    named: str,
) -> None:
    if shutil.which(missing) is None:
        pytest.skip(f"{missing} is not installed here")
    monkeypatch.setenv("PATH", _path_without(tmp_path, missing))
    assert shutil.which(missing) is None and shutil.which("git") is not None
    into = tmp_path / "replay"
    assert main(["replay", "demo", "--into", str(into)]) == 64
    said = capsys.readouterr().err
    assert missing in said and "is not" in said and f"apt-get install {named}" in said
    assert not into.exists()  # nothing was copied, nothing ran


def test_a_predicate_whose_program_is_missing_is_named_before_anything_runs(
    tmp_path: Path,
) -> None:
    rec = shipped_recording()
    spec = copy.deepcopy(rec.spec)
    spec["predicate"]["command"] = "python3.0-nowhere -m unittest discover -s tests -q"
    into = tmp_path / "replay"
    with pytest.raises(ConfigError) as raised:
        replay(type(rec)(**{**rec.__dict__, "spec": spec}), into)
    assert raised.value.field == "predicate.command"
    assert "python3.0-nowhere is not on PATH" in raised.value.problem
    assert "install python3.0-nowhere" in raised.value.fix
    assert not into.exists()


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
