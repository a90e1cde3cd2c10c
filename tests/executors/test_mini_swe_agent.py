"""mini-swe-agent, the documented example of ``kind = "command"``: its own CLI (``mini``, from a
virtual environment of its own shown to the sandbox as ``[sandbox] readable``), its model
(litellm's OpenAI Chat Completions) through the metering proxy to a scripted upstream."""

from __future__ import annotations

from pathlib import Path

from overnight.config.spec import ExecutorSpec
from overnight.executors import check_cli, cli_executor
from overnight.testing.meters import RecordingMeter
from overnight.testing.upstream import Received, Turn, call, tool_calls
from tests.executors.clis import (
    ROOT,
    TASK,
    UPSTREAM_KEY,
    context,
    make_place,
    mini_swe_agent,
    proxy_for,
    request_text,
)


def command(venv: Path) -> list[str]:
    """The spec's command line: litellm's price list from the package (no download), its
    cost tracking lenient (the model's name is the spec's own), no set-up questions, no
    confirmation, no cost limit of its own (the harness's budget is the limit)."""
    return [
        "env",
        "LITELLM_LOCAL_MODEL_COST_MAP=True",
        "MSWEA_COST_TRACKING=ignore_errors",
        "MSWEA_CONFIGURED=true",
        str(venv / "bin" / "mini"),
        "--yolo",
        "--exit-immediately",
        "--cost-limit",
        "0",
        "--model",
        "openai/{model}",
        "--task",
        "{prompt}",
    ]


def test_mini_swe_agent_fixes_the_bug_through_the_proxy(tmp_path: Path) -> None:
    venv = mini_swe_agent()
    place = make_place(tmp_path, readable=(venv,))
    spec = ExecutorSpec.model_validate(
        {"kind": "command", "api": "openai-chat", "command": command(venv)}
    )
    found = check_cli(spec, ROOT)
    seen: list[Received] = []

    def model(request: Received) -> Turn:
        seen.append(request)
        if len(seen) == 1:
            return tool_calls(call("bash", command="sed -i 's/a - b/a + b/' calc.py"))
        return tool_calls(call("bash", command="echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"))

    with proxy_for(model) as proxy:
        access = proxy.grant(RecordingMeter(), model="toy-model")
        result = cli_executor(spec, found, goal="tests pass").execute(TASK, context(place, access))

    assert result.status == "finished", result.summary
    assert (place.worktree / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert len(seen) == 2 and all(r.key == UPSTREAM_KEY for r in seen)
    assert {r.body.get("model") for r in seen} == {"toy-model"}
    assert "calc.add subtracts instead of adding" in request_text(seen[0])
