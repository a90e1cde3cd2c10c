"""Codex CLI, the pinned release, as a task's executor: ``codex exec --json`` headless in a
real worktree in the real sandbox, its model (the Responses API) through the metering proxy to
a scripted upstream; no login, its own sandbox off inside ours."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from overnight.executors import cli_executor
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
)

MODEL = "gpt-test-model"
PATCH = (
    "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: calc.py\n@@\n"
    "-    return a - b\n+    return a + b\n*** End Patch\nEOF\n"
)


@pytest.fixture
def place(tmp_path: Path) -> Place:
    return make_place(tmp_path)


def outputs(request: Received) -> list[str]:
    """The results of its tool calls that a request sends back."""
    items = request.body.get("input", []) if isinstance(request.body, dict) else []
    return [
        str(item.get("output"))
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


def steps(*turns: Turn) -> Any:
    def answer(request: Received) -> Turn:
        done = len(outputs(request))
        return turns[done] if done < len(turns) else text("Done: add now adds.")

    return answer


def test_it_fixes_the_bug_with_its_own_patch_tool(place: Place) -> None:
    spec, found = find("codex")
    assert found.version == pinned("@openai/codex")
    with proxy_for(steps(tool_calls(call("exec_command", cmd=PATCH)))) as proxy:
        meter = RecordingMeter()
        access = proxy.grant(meter, model=MODEL)
        ctx = context(place, access, earlier="Attempt 1 read calc.py.")
        result = cli_executor(spec, found, goal="every test passes").execute(TASK, ctx)
        requests = list(proxy.upstream.requests)

    assert result.status == "finished", result.summary
    assert (place.worktree / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert requests and all(r.path == "/v1/responses" for r in requests)
    assert all(r.key == UPSTREAM_KEY for r in requests)
    assert {r.body.get("model") for r in requests} == {MODEL}
    assert len(meter.records) == len(requests)
    first = request_text(requests[0])
    for part in ("calc.add subtracts", "python3 -m pytest -q test_calc.py", "every test passes"):
        assert part in first, part
    assert "Attempt 1 read calc.py." in first
    assert [e["tool"] for e in place.cli_events("tool_call")] == ["apply_patch"]
    assert place.cli_events("turn")
    assert "Done: add now adds." in result.summary


def test_inside_it_has_no_key_and_no_network(place: Place) -> None:
    spec, found = find("codex")
    upstream_port = [0]

    def probe(request: Received) -> Turn:
        command = (
            f"env; cat {place.secret_file} || true; "
            f"{sys.executable} -c 'import socket; print(sorted(n for _, n in "
            "socket.if_nameindex()))'; "
            f"{sys.executable} -c 'import socket; socket.create_connection("
            f'("127.0.0.1", {upstream_port[0]}), 3)\' || echo upstream unreachable'
        )
        return tool_calls(call("exec_command", cmd=command))

    seen: list[Received] = []

    def script(request: Received) -> Turn:
        seen.append(request)
        return steps(probe(request))(request)

    with proxy_for(script) as proxy:
        upstream_port[0] = proxy.upstream.port
        access = proxy.grant(RecordingMeter(), model=MODEL)
        result = cli_executor(spec, found).execute(TASK, context(place, access))

    output = "\n".join(outputs(seen[-1]))
    assert f"OVERNIGHT_MODEL_TOKEN={access.token}" in output
    assert "CODEX_HOME=/tmp/home/.codex" in output and "HOME=/tmp/home" in output
    assert "No such file or directory" in output
    assert "['lo']" in output and "upstream unreachable" in output
    assert UPSTREAM_KEY not in "".join(request_text(r) for r in seen)
    assert result.status == "gave_up" and "exited without changes" in result.summary
