"""The estimate learns only from the user's own nights: a night of a real provider whose own
model answered. A rehearsal (a model the caller handed in, a ``python`` or scripted model) and
a replay of a recording never count, and the estimate says how many it left out; `overnight
list` marks a replay as one.

The real provider is Anthropic's Messages API on 127.0.0.1 (``LocalProvider``), reached by the
real adapter with a key that is not one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from overnight.cli.main import main
from overnight.config.spec import parse_spec
from overnight.testing import FunctionModel, text_answer
from tests.helpers.nights import command_task, run_night, spec_data, write_spec
from tests.helpers.provider import LocalProvider

TASKS = [command_task("t_1", "touch done", "test -f done")]


def messages_api(method: str, path: str, body: Any) -> tuple[int, Any]:
    if path.endswith("/count_tokens"):
        return 200, {"input_tokens": 10}
    return 200, {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [{"type": "text", "text": "t_1 is done; the goal is met."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3000, "output_tokens": 400},
    }


def real_spec(repo: Path, url: str) -> dict[str, Any]:
    data = spec_data(repo, tasks=TASKS, predicate="test -f done")
    data["model"] = {"provider": "anthropic", "name": "fake-opus", "base_url": url, "stream": False}
    return data


def estimate(capsys: pytest.CaptureFixture[str], spec: Path) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["estimate", str(spec), "--tasks", "1", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    printed: dict[str, Any] = json.loads(out)
    return printed


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")
    with LocalProvider(messages_api) as served:
        yield served


def test_rehearsals_teach_nothing_and_the_estimate_says_so(
    repo: Path, tmp_path: Path, provider: LocalProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    data = real_spec(repo, provider.url)
    spec = write_spec(tmp_path / "night.toml", data)
    # Two rehearsals of the same night: a model handed in by the caller, and a python model.
    cheap = FunctionModel(lambda request: text_answer("rehearsed"))
    for n in (1, 2):
        run_night(parse_spec(data, repo), tmp_path / f"rehearsal{n}", model=cheap)

    printed = estimate(capsys, spec)

    assert printed["history"]["used"] is False
    assert "2 scripted, python or replayed night(s) not counted" in printed["history"]["why"]


def test_a_night_of_the_real_provider_is_learned_from_and_named(
    repo: Path, tmp_path: Path, provider: LocalProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    data = real_spec(repo, provider.url)
    spec = write_spec(tmp_path / "night.toml", data)
    _rd, real = run_night(parse_spec(data, repo), tmp_path / "real")
    assert real.stop_reason == "GOAL_MET"
    run_night(
        parse_spec(data, repo),
        tmp_path / "rehearsal",
        model=FunctionModel(lambda request: text_answer("rehearsed")),
    )
    manifest = json.loads((tmp_path / "real" / "run.json").read_text())
    assert (manifest["provider"], manifest["model_source"]) == ("anthropic", "spec")

    printed = estimate(capsys, spec)

    assert [r["run_id"] for r in printed["runs"]] == [manifest["run_id"]]
    assert "1 recorded night of this workspace with model fake-opus" in printed["chosen_by"]
    assert "1 scripted, python or replayed night(s) not counted" in printed["chosen_by"]


def test_a_replay_is_marked_in_the_list_and_never_learned_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    into = tmp_path / "replay"
    assert main(["replay", "demo", "--into", str(into), "--json"]) == 0
    capsys.readouterr()
    manifest = json.loads((into / "run" / "run.json").read_text())
    assert manifest["model_source"] == "replay"

    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    [row] = [r for r in rows if r["run_id"] == manifest["run_id"]]
    assert row["replay"] is True
    assert main(["list"]) == 0
    [line] = [ln for ln in capsys.readouterr().out.splitlines() if manifest["run_id"] in ln]
    assert "(replay)" in line
