"""``kind = "command"``: any CLI agent, here a toy one (``toy_agent.py``), run as the spec's
command line in the worktree, in the sandbox or not, its model reached through the metering
proxy; how its end becomes the attempt's."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from overnight.config.spec import ExecutorSpec
from overnight.executors import check_cli, cli_executor
from overnight.testing.meters import RecordingMeter
from overnight.testing.upstream import Received, Turn, text
from tests.executors.clis import (
    ROOT,
    TASK,
    UPSTREAM_KEY,
    Place,
    context,
    make_place,
    proxy_for,
    request_text,
)

TOY = Path(__file__).with_name("toy_agent.py")
FIXED = "def add(a, b):\n    return a + b\n"


@pytest.fixture
def place(tmp_path: Path) -> Place:
    return make_place(tmp_path)


def toy(*words: str, **spec: Any) -> ExecutorSpec:
    return ExecutorSpec.model_validate(
        {"kind": "command", "command": [str(TOY), *words], "api": "openai-chat", **spec}
    )


def answers(*said: str) -> Any:
    """The model's answers, one per request, then "done"."""
    turns = [text(s) for s in said]

    def answer(request: Received) -> Turn:
        return turns.pop(0) if turns else text("done")

    return answer


def write(path: str, content: str) -> str:
    return json.dumps({"write": {"path": path, "text": content}})


def run(place: Place, spec: ExecutorSpec, script: Any, **options: Any) -> Any:
    found = check_cli(spec, ROOT)
    meter = options.pop("meter", None) or RecordingMeter()
    with proxy_for(script) as proxy:
        access = proxy.grant(meter, model="toy-model")
        started = time.monotonic()
        result = cli_executor(spec, found, goal="tests pass").execute(
            TASK, context(place, access, **options)
        )
        took = time.monotonic() - started
        return result, list(proxy.upstream.requests), took


def test_the_prompt_on_its_standard_input_and_its_change_finished(place: Place) -> None:
    result, requests, _ = run(place, toy("{model}"), answers(write("calc.py", FIXED), "Fixed."))
    assert result.status == "finished", result.summary
    assert (place.worktree / "calc.py").read_text() == FIXED
    assert "calc.add subtracts instead of adding" in request_text(requests[0])
    assert requests[0].body["model"] == "toy-model"
    assert all(r.key == UPSTREAM_KEY for r in requests)
    assert "It said:" in result.summary and "toy agent: wrote calc.py" in result.summary


def test_the_prompt_as_an_argument(place: Place) -> None:
    result, requests, _ = run(place, toy("{model}", "{prompt}"), answers("Nothing to do."))
    assert "calc.add subtracts instead of adding" in request_text(requests[0])
    assert result.status == "gave_up"
    assert result.summary.startswith("command exited without changes")
    assert "Nothing to do." in result.summary


def test_a_crash_is_a_failed_attempt_with_its_code_and_last_lines(place: Place) -> None:
    result, _, _ = run(place, toy("{model}"), answers(json.dumps({"exit": 3})))
    assert result.status == "gave_up"
    assert result.summary.startswith("command exited with code 3: ")
    assert "toy agent: failing, line 2" in result.summary


def test_a_cli_that_goes_on_after_a_refusal_is_stopped(place: Place) -> None:
    meter = RecordingMeter(refuse="the night's budget is spent")
    result, requests, took = run(
        place, toy("--stubborn", "{model}"), answers("unused"), meter=meter
    )
    assert requests == []
    assert result.status == "limit_reached"
    assert "refused a model call: the night's budget is spent" in result.summary
    assert "went on, and was stopped 5 s later" in result.summary
    assert took < 30


def test_unsandboxed_it_gets_a_home_of_its_own_and_no_secret(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = "sk-ant-api03-harness-canary-0042"
    monkeypatch.setenv("ANTHROPIC_API_KEY", canary)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(place.root / "users-claude"))
    result, _, _ = run(
        place,
        toy("--show-env", "{model}"),
        answers(write("calc.py", FIXED), "Fixed."),
        sandboxed=False,
    )
    assert result.status == "finished", result.summary
    log = Path(result.artifacts[0]).read_text()
    homes = [line.split("=", 1)[1] for line in log.splitlines() if line.startswith("ENV HOME=")]
    assert len(homes) == 1 and "overnight-cli-home-" in homes[0]
    assert not Path(homes[0]).exists()  # removed once the run ended
    assert canary not in log
    assert "users-claude" not in log
    assert "ENV OPENAI_BASE_URL=http://127.0.0.1:" in log
    assert "ENV OVERNIGHT_MODEL_TOKEN=ovn-" in log
