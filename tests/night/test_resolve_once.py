"""A spec is resolved once a night: ``overnight run`` checks it, builds its sandbox and starts
its MCP server once, and the night works through that same server. Counted from the server's
own record of its starts (``starts.jsonl``), never from a stand-in: one start for the night,
one more for a resume."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from overnight.config.spec import parse_spec
from overnight.night.resolve import check_spec, resolve
from tests.helpers.kills import kill_marked, marked_env, overnight
from tests.helpers.nights import load_result, write_spec
from tests.tools.test_mcp import ROOT, lines, night_data, stdio_entry


@pytest.fixture
def record(tmp_path: Path) -> Path:
    path = tmp_path / "record"
    path.mkdir()
    return path


def cli(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env, mark = marked_env(ROOT)
    try:
        return subprocess.run(
            overnight(*args),
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        kill_marked(mark)


def lookups(record: Path) -> list[dict[str, Any]]:
    return [c for c in lines(record, "calls.jsonl") if c["tool"] == "lookup"]


def mcp_night(repo: Path, record: Path, tmp_path: Path, **extra: Any) -> Path:
    data = night_data(repo, stdio_entry(record, ["lookup"]), record, **extra)
    data["model"]["target"] = "tests.tools.mcp_model:model"
    return write_spec(tmp_path / "night.toml", data)


def test_overnight_run_starts_an_mcp_server_once_and_the_night_calls_that_one(
    repo: Path, record: Path, tmp_path: Path
) -> None:
    spec = mcp_night(repo, record, tmp_path)
    run = tmp_path / "run"

    done = cli(tmp_path, "run", spec, "--run-dir", run, "--quiet")

    assert done.returncode in (0, 2, 3), done.stderr
    starts = lines(record, "starts.jsonl")
    assert len(starts) == 1, f"the server was started {len(starts)} times for one night"
    [call] = lookups(record)
    assert call["args"] == {"item": "toner"}
    assert call["pid"] == starts[0]["pid"]  # the night called the server the check started
    assert load_result(run)["stop_reason"]


def test_a_resume_starts_the_server_once_more(repo: Path, record: Path, tmp_path: Path) -> None:
    spec = mcp_night(repo, record, tmp_path)
    data = parse_spec_data(spec)
    data["tasks"].append({"id": "t2", "brief": 'CALL lookup {"item": "paper"}', "verify": "true"})
    data["budget"]["steps"] = 1  # the first night stops after one task, to be resumed
    write_spec(spec, data)
    run = tmp_path / "run"

    first = cli(tmp_path, "run", spec, "--run-dir", run, "--quiet")
    assert first.returncode == 2, first.stderr
    assert load_result(run)["stop_reason"] == "BUDGET_EXHAUSTED:steps"
    assert len(lines(record, "starts.jsonl")) == 1

    again = cli(tmp_path, "resume", run, "--steps", "10", "--quiet")

    assert again.returncode in (0, 2, 3), again.stderr
    starts = lines(record, "starts.jsonl")
    assert len(starts) == 2
    assert [(c["args"]["item"], c["pid"]) for c in lookups(record)] == [
        ("toner", starts[0]["pid"]),
        ("paper", starts[1]["pid"]),
    ]


def parse_spec_data(path: Path) -> dict[str, Any]:
    with path.open("rb") as fh:
        return tomllib.load(fh)


def test_the_spec_check_stops_what_it_started(repo: Path, record: Path, tmp_path: Path) -> None:
    """``check_spec`` is resolve's error path: the server it started for the check is
    stopped again, and a resolution handed to no night stops its server when closed."""
    spec = parse_spec(parse_spec_data(mcp_night(repo, record, tmp_path)), tmp_path)
    check_spec(spec)
    night = resolve(spec, tmp_path / "run", reach=False)
    [server] = night.mcp_servers
    assert server.listing(eager=False) is not None  # started and listed, before any night
    night.close()
    assert night.mcp_servers == []
    assert len(lines(record, "starts.jsonl")) == 2  # one for the check, one for the resolution
    assert not (tmp_path / "run").exists()
