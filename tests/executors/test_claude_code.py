"""Claude Code, the pinned release, as a task's executor: run headless in a real worktree in the
real sandbox, its every model call through the metering proxy to a scripted upstream that plays
the model (its tool calls are the script's; what Claude Code does with them is its own)."""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from overnight.executors import cli_executor
from overnight.executors.runner import PREAMBLE
from overnight.testing.meters import RecordingMeter
from overnight.testing.upstream import Received, Turn, call, text, tool_calls
from tests.executors.clis import (
    TASK,
    UPSTREAM_KEY,
    Place,
    context,
    find,
    make_place,
    pinned,
    proxy_for,
    request_text,
    tool_results,
)

MODEL = "claude-test-model"


@pytest.fixture
def place(tmp_path: Path) -> Place:
    return make_place(tmp_path)


def agent(*steps: Turn) -> Any:
    """A model that takes ``steps`` one per request of the conversation (a request without
    tools, one of Claude Code's own on the side, is answered with text), then says it is
    done."""

    def answer(request: Received) -> Turn:
        body = request.body
        if not body.get("tools"):
            return text("ok")
        turns = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        return steps[turns] if turns < len(steps) else text("Done: add now adds.")

    return answer


def test_it_fixes_the_bug_with_its_own_tools_and_is_recorded(place: Place) -> None:
    spec, found = find("claude-code", max_turns=6, instructions="Keep the style of the file.")
    assert found.version == pinned("@anthropic-ai/claude-code")
    calc = str(place.worktree / "calc.py")
    script = agent(
        tool_calls(call("Read", file_path=calc)),
        tool_calls(call("Edit", file_path=calc, old_string="a - b", new_string="a + b")),
    )
    with proxy_for(script) as proxy:
        meter = RecordingMeter()
        access = proxy.grant(meter, model=MODEL)
        ctx = context(place, access, earlier="Attempt 1 renamed nothing and ran the tests.")
        result = cli_executor(spec, found, goal="every test passes").execute(TASK, ctx)
        requests = list(proxy.upstream.requests)

    assert result.status == "finished", result.summary
    assert (place.worktree / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    # Its calls went through the proxy: each with the harness's key upstream, each metered.
    assert requests and all(r.key == UPSTREAM_KEY for r in requests)
    assert len(meter.records) == len(requests)
    assert proxy.revoked == [access.token]
    # The prompt: the preamble, the brief, the verify, the goal, the instructions, and what
    # an earlier attempt did.
    first = request_text(requests[0])
    for part in (
        PREAMBLE.splitlines()[0],
        "calc.add subtracts instead of adding. Fix it.",
        "python3 -m pytest -q test_calc.py",
        "every test passes",
        "Keep the style of the file.",
        "Attempt 1 renamed nothing and ran the tests.",
        "do not repeat it",
    ):
        assert part in first, part
    # Every model it asked for was the spec's.
    assert {r.body.get("model") for r in requests} == {MODEL}
    # Its events, in the trace.
    calls = [e["tool"] for e in place.cli_events("tool_call")]
    assert calls == ["Read", "Edit"]
    assert place.cli_events("init")[0]["version"] == found.version
    assert [e["turn"] for e in place.cli_events("turn")] == [1, 2, 3]
    (said,) = place.cli_events("result")
    assert said["cli_success"] is True and isinstance(said["cli_reported_cost_usd"], float)
    (end,) = place.cli_events("end")
    assert end["changed"] == ["calc.py"] and end["calls"] == len(requests)
    # Its own account is in the summary, as its own; its output is kept.
    assert "By its own account (not the harness's)" in result.summary
    assert "Done: add now adds." in result.summary
    log = Path(result.artifacts[0])
    assert log == ctx.task_log and '"type":"result"' in log.read_text()


def test_inside_it_has_no_key_no_home_of_the_user_and_no_network(place: Place) -> None:
    spec, found = find("claude-code", max_turns=4)
    probe = (
        "env; echo ---; cat {secret} || true; echo ---; ls -a ~ ; echo ---; "
        "{python} -c 'import socket; print(sorted(n for _, n in socket.if_nameindex()))'; "
        "{python} -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 3)' "
        "|| echo upstream unreachable"
    )
    seen: dict[str, str] = {}

    def script(request: Received) -> Turn:
        body = request.body
        if not body.get("tools"):
            return text("ok")
        results = tool_results(request)
        if not results:
            command = probe.format(
                secret=place.secret_file, python=sys.executable, port=upstream_port[0]
            )
            return tool_calls(call("Bash", command=command, description="look around"))
        seen["output"] = results[-1]
        seen["request"] = request_text(request)
        return text("Looked around; changed nothing.")

    upstream_port = [0]
    with proxy_for(script) as proxy:
        upstream_port[0] = proxy.upstream.port
        access = proxy.grant(RecordingMeter(), model=MODEL)
        result = cli_executor(spec, found).execute(TASK, context(place, access))

    output = seen["output"]
    assert "HOME=/tmp/home" in output
    assert f"ANTHROPIC_API_KEY={access.token}" in output  # the one-time token, nothing more
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:" in output
    assert "DISABLE_TELEMETRY=1" in output and "DISABLE_AUTOUPDATER=1" in output
    assert "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1" in output
    assert "No such file or directory" in output  # the file outside the worktree
    assert "['lo']" in output  # no interface but its own loopback
    assert "upstream unreachable" in output  # the upstream only through the proxy
    # The harness's key is nowhere the CLI could see it, nor in what it sent.
    assert UPSTREAM_KEY not in seen["request"]
    assert "sk-ant" not in output
    assert result.status == "gave_up" and "exited without changes" in result.summary


def test_a_cli_that_hangs_is_stopped_at_its_time_with_everything_it_started(
    place: Place,
) -> None:
    spec, found = find("claude-code", max_turns=4, timeout_s=8)
    marker = f"overnight-hang-{secrets.token_hex(6)}"
    script = agent(
        tool_calls(call("Bash", command=_hang(marker), description="wait", timeout=600000))
    )
    with proxy_for(script) as proxy:
        access = proxy.grant(RecordingMeter(), model=MODEL)
        started = time.monotonic()
        result = cli_executor(spec, found).execute(TASK, context(place, access))
        took = time.monotonic() - started

    assert result.status == "gave_up"
    assert "ran past its time (8 s)" in result.summary
    assert took < 30
    assert _running(marker) == []
    assert proxy.revoked == [access.token]


def test_an_answer_without_changes_is_a_failed_attempt(place: Place) -> None:
    spec, found = find("claude-code", max_turns=3)
    with proxy_for(agent()) as proxy:
        access = proxy.grant(RecordingMeter(), model=MODEL)
        result = cli_executor(spec, found).execute(TASK, context(place, access))
    assert result.status == "gave_up"
    assert result.summary.startswith("claude-code exited without changes")


def test_a_refused_call_ends_the_attempt_as_a_limit(place: Place) -> None:
    spec, found = find("claude-code", max_turns=3)
    with proxy_for(agent()) as proxy:
        meter = RecordingMeter(refuse="the night's budget is spent")
        access = proxy.grant(meter, model=MODEL)
        started = time.monotonic()
        result = cli_executor(spec, found).execute(TASK, context(place, access))
        took = time.monotonic() - started
        requests = list(proxy.upstream.requests)
    assert result.status == "limit_reached"
    assert "refused a model call: the night's budget is spent" in result.summary
    assert requests == []  # nothing reached the upstream
    assert meter.refused and took < 30


def test_a_stop_of_the_night_ends_the_run(place: Place) -> None:
    spec, found = find("claude-code", max_turns=4)
    script = agent(tool_calls(call("Bash", command=_hang("stop"), description="wait")))
    asked_at = time.monotonic() + 3
    with proxy_for(script) as proxy:
        access = proxy.grant(RecordingMeter(), model=MODEL)
        ctx = context(
            place, access, stop=lambda: "SIGTERM" if time.monotonic() > asked_at else None
        )
        result = cli_executor(spec, found).execute(TASK, ctx)
    assert result.status == "gave_up"
    assert result.summary.startswith("stop requested (SIGTERM)")


def _hang(marker: str) -> str:
    """A command that runs for ten minutes (Claude Code refuses a bare ``sleep``)."""
    return f"{sys.executable} -c 'import time; time.sleep(600)' {marker}"


def _running(marker: str) -> list[int]:
    """Processes of this machine whose command line holds ``marker``."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def test_its_max_turns_is_a_limit_not_a_crash(place: Place) -> None:
    spec, found = find("claude-code", max_turns=1)
    calc = str(place.worktree / "calc.py")
    script = agent(*[tool_calls(call("Read", file_path=calc))] * 5)
    with proxy_for(script) as proxy:
        access = proxy.grant(RecordingMeter(), model=MODEL)
        result = cli_executor(spec, found).execute(TASK, context(place, access))
    assert result.status == "limit_reached", result.summary
    assert result.summary.startswith("claude-code exited with code 1 at its max_turns (1)")
    (said,) = place.cli_events("result")
    assert said["cli_success"] is False and said["detail"] == "error_max_turns"
