"""``[[tools.mcp]]``: MCP servers as tool sources, against a real server (``mcp_server.py``)
over stdio (in the real sandbox, and unsandboxed) and streamable HTTP on localhost.

Only allowed tools exist; a tool the server marks read-only is called directly and every other
one goes through the effects ledger (intent first, the run-step key in the request's
``_meta``, a task key from the entry's template); arguments the schema refuses reach neither
the ledger nor the server; a server that dies, hangs or answers garbage fails the call, never
the night; the spec check lists the servers and refuses an entry they do not satisfy; and a
kill -9 between the intent and the answer, or a second night on the same ledger, never gets
an effect done twice.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from overnight.config.sandbox import SandboxSpec
from overnight.config.spec import parse_spec
from overnight.config.tools import McpServerSpec, ToolsSpec
from overnight.core.errors import ConfigError
from overnight.effects.store import SqliteEffectStore
from overnight.messages.types import ModelRequest
from overnight.night.resolve import check_spec
from overnight.process import Confinement
from overnight.sandbox.bwrap import build_sandbox
from overnight.seams import ToolContext
from overnight.testing import FunctionModel, text_answer, tool_answer, usage_dict
from overnight.tools.mcp import McpTool, mcp_tools
from overnight.tools.mcp_client import McpConnection
from overnight.tools.toolbox import Toolbox
from tests.helpers.kills import kill_everything, kill_marked, marked_env, overnight, start_cli
from tests.helpers.nights import make_spec, run_night, spec_data, write_spec
from tests.helpers.sandbox import require_bwrap

SERVER = Path(__file__).with_name("mcp_server.py")
ROOT = Path(__file__).resolve().parents[2]
TICKET = {"title": "printer on fire", "priority": 2}
KEYS = {
    "create_ticket": "{title}:ticket",
    "crash": "{reason}:crash",
    "hang": "{reason}:hang",
    "garbage": "{reason}:garbage",
    "refuse": "{reason}:refuse",
    "clear_cache": "{scope}:clear",
}
#: The test server's tools that only read (what the entries say; the server's hints differ).
READ_ONLY = ("lookup", "env_report", "peek")
#: Names any process gets that nobody passed it: Python's own locale coercion.
OWN_NAMES = {"LC_CTYPE"}


# --------------------------------------------------------------------------- helpers


def lines(record: Path, name: str) -> list[dict[str, Any]]:
    path = record / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stdio_entry(
    record: Path, allow: list[str], *, hold_s: float = 0.0, **extra: Any
) -> dict[str, Any]:
    command = [sys.executable, str(SERVER), "--record", str(record)]
    if hold_s:
        command += ["--hold-s", str(hold_s)]
    entry: dict[str, Any] = {"name": "desk", "command": [*command, "stdio"], "allow": allow}
    entry["read_only"] = [t for t in allow if t in READ_ONLY]
    entry["task_keys"] = {t: k for t, k in KEYS.items() if t in allow}
    entry.update(extra)
    return entry


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_server(record: Path) -> Iterator[str]:
    """The test server on streamable HTTP, in a process of its own on a free port."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--record", str(record), "http", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        end = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert proc.poll() is None and time.monotonic() < end, "the HTTP server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def record(tmp_path: Path) -> Path:
    path = tmp_path / "record"
    path.mkdir()
    return path


def sandbox_for(record: Path) -> Confinement:
    require_bwrap()
    return build_sandbox(SandboxSpec(writable=[str(record)]), sealed=[], writable=[record])


class Desk:
    """A toolbox over the test server with a real effects ledger, called as the agent does."""

    def __init__(self, tmp: Path, entry: dict[str, Any], store: SqliteEffectStore) -> None:
        self.tools = ToolsSpec.model_validate({"allow": [], "mcp": [entry]})
        self.mcp = mcp_tools(self.tools, base_dir=tmp, confine=lambda: None)
        self.box = Toolbox(self.mcp)
        self.store = store
        self.tmp = tmp
        self.refused: list[dict[str, Any]] = []

    def call(self, tool: str, args: dict[str, Any], run_id: str = "run-a") -> Any:
        ctx = ToolContext(
            root=self.tmp,
            artifacts=self.tmp,
            call_id="c",
            run_id=run_id,
            task_id="t1",
            effects=self.store,
            effect_key=lambda t, a: f"{run_id}:t1:{t}:{json.dumps(a, sort_keys=True)}",
            on_refused=self.refused.append,
        )
        return self.box.dispatch(tool, args, ctx)

    def close(self) -> None:
        for tool in self.mcp:
            assert isinstance(tool, McpTool)
            tool.server.connection.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteEffectStore]:
    s = SqliteEffectStore(tmp_path / "effects.sqlite")
    yield s
    s.close()


@contextlib.contextmanager
def desk(tmp: Path, entry: dict[str, Any], store: SqliteEffectStore) -> Iterator[Desk]:
    d = Desk(tmp, entry, store)
    try:
        yield d
    finally:
        d.close()


# --------------------------------------------------------------------------- the connection


@pytest.mark.parametrize("transport", ["stdio", "stdio-sandboxed", "http"])
def test_a_server_is_listed_and_called(transport: str, record: Path) -> None:
    confine = sandbox_for(record) if transport == "stdio-sandboxed" else None
    with contextlib.ExitStack() as stack:
        if transport == "http":
            entry = {"name": "desk", "url": stack.enter_context(http_server(record))}
        else:
            entry = stdio_entry(record, ["lookup"])
            entry.pop("task_keys")
        entry["allow"] = entry["read_only"] = ["lookup"]
        conn = McpConnection(
            McpServerSpec.model_validate(entry), base_dir=record, confine=lambda: confine
        )
        stack.callback(conn.close)
        listed = conn.list_tools()
        assert {"lookup", "env_report", "create_ticket", "clear_cache", "crash"} <= set(listed)
        assert listed["create_ticket"].input_schema["required"] == ["title", "priority"]
        assert conn.call("lookup", {"item": "toner"}, None, 10) == "toner: 3 in stock"
    assert lines(record, "calls.jsonl")[-1]["tool"] == "lookup"


@pytest.mark.parametrize("sandboxed", [False, True])
def test_a_stdio_server_sees_only_the_names_its_entry_lists(
    sandboxed: bool, record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-do-not-leak-0123456789")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-do-not-leak-0123456789")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_listed_token_0123456789")
    monkeypatch.setenv("UNLISTED_SETTING", "the harness's own")
    confine = sandbox_for(record) if sandboxed else None
    entry = stdio_entry(record, ["env_report"], env=["GITHUB_TOKEN"])
    conn = McpConnection(
        McpServerSpec.model_validate(entry), base_dir=record, confine=lambda: confine
    )
    try:
        answer = conn.call("env_report", {}, None, 10)
    finally:
        conn.close()
    seen = lines(record, "env.jsonl")[-1]
    assert seen["github_token"] == "ghp_listed_token_0123456789"
    assert seen["anthropic_key"] is None
    assert set(seen["names"]) - OWN_NAMES == {"GITHUB_TOKEN", "PATH", "HOME"}
    assert "UNLISTED_SETTING" not in answer and "OPENAI_API_KEY" not in answer


def test_a_provider_key_reaches_a_server_only_when_listed(
    record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-listed-on-purpose-0123")
    entry = stdio_entry(record, ["env_report"], env=["ANTHROPIC_API_KEY"])
    conn = McpConnection(McpServerSpec.model_validate(entry), base_dir=record, confine=lambda: None)
    try:
        conn.call("env_report", {}, None, 10)
    finally:
        conn.close()
    assert lines(record, "env.jsonl")[-1]["anthropic_key"] == "sk-ant-listed-on-purpose-0123"


@pytest.mark.parametrize("word", ["server.py", "./server.py", "../spec/server.py"])
def test_a_server_file_next_to_the_spec_is_found_from_the_private_directory(
    word: str, record: Path, tmp_path: Path
) -> None:
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    (spec_dir / "server.py").write_text(SERVER.read_text())
    entry = {"name": "desk", "allow": ["lookup"]}
    entry["command"] = [sys.executable, word, "--record", str(record), "stdio"]  # type: ignore[assignment]
    conn = McpConnection(
        McpServerSpec.model_validate(entry), base_dir=spec_dir, confine=lambda: None
    )
    try:
        assert conn.call("lookup", {"item": "ink"}, None, 10) == "ink: 3 in stock"
    finally:
        conn.close()
    [start] = lines(record, "starts.jsonl")
    assert start["cwd"] != str(spec_dir) and not Path(start["cwd"]).exists()  # removed after


@pytest.mark.parametrize("sealed", [False, True])
def test_a_sandboxed_server_sees_its_own_program_wherever_it_lies_and_nothing_beside_it(
    sealed: bool, record: Path, tmp_path: Path
) -> None:
    # tmp_path is under /tmp, which the sandbox replaces with a private one; a sealed
    # directory (a workspace, a run directory) is emptied too. The file the entry names is
    # shown at its own path; the secret next to it stays out of sight.
    require_bwrap()
    spec_dir = tmp_path / "servers"
    spec_dir.mkdir()
    (spec_dir / "server.py").write_text(SERVER.read_text())
    secret = spec_dir / "checkpoint.json"
    secret.write_text('{"budget": "the run\'s own"}')
    confine = build_sandbox(
        SandboxSpec(writable=[str(record)]),
        sealed=[spec_dir] if sealed else [],
        writable=[record],
    )
    entry = {"name": "desk", "allow": ["lookup", "peek"]}
    entry["command"] = [sys.executable, "./server.py", "--record", str(record), "stdio"]  # type: ignore[assignment]
    conn = McpConnection(
        McpServerSpec.model_validate(entry), base_dir=spec_dir, confine=lambda: confine
    )
    try:
        assert conn.call("lookup", {"item": "ink"}, None, 10) == "ink: 3 in stock"
        seen = conn.call("peek", {"path": str(secret)}, None, 10)
    finally:
        conn.close()
    assert "the run's own" not in seen and "missing" in seen


# --------------------------------------------------------------------------- toolbox and ledger


def test_only_allowed_tools_exist_for_the_model(
    tmp_path: Path, record: Path, store: SqliteEffectStore
) -> None:
    with desk(tmp_path, stdio_entry(record, ["lookup", "create_ticket"]), store) as d:
        assert [s.name for s in d.box.specs()] == ["lookup", "create_ticket"]
        assert d.box.specs()[0].description.startswith("Look an item up")
        for name in ("crash", "env_report", "refuse"):  # offered by the server, not allowed
            out = d.call(name, {"reason": "x"})
            assert out.is_error and f"there is no tool called {name!r}" in out.content
    assert {c["tool"] for c in lines(record, "calls.jsonl")} == set()
    assert store.all() == []


def test_a_read_only_tool_bypasses_the_ledger_and_a_mutating_one_goes_through_it(
    tmp_path: Path, record: Path, store: SqliteEffectStore
) -> None:
    with desk(tmp_path, stdio_entry(record, ["lookup", "create_ticket"]), store) as d:
        assert not d.box.mutating("lookup") and d.box.mutating("create_ticket")
        out = d.call("lookup", {"item": "toner"})
        assert not out.is_error and "toner: 3 in stock" in out.content
        assert store.all() == []
        out = d.call("create_ticket", TICKET)
        assert not out.is_error and '"ticket": 1' in out.content
        again = d.call("create_ticket", TICKET)  # the same step: replayed, not called
        assert "already done in an earlier attempt" in again.content
    [row] = store.all()
    assert (row.tool, row.state, row.task_key) == (
        "create_ticket",
        "confirmed",
        "printer on fire:ticket",
    )
    [effect] = lines(record, "effects.jsonl")
    assert effect["key"] == row.step_key  # the run-step key reached the server in _meta
    # under a reverse-DNS prefix; nothing else without telemetry
    assert [c["meta"] for c in lines(record, "calls.jsonl")] == [
        {},
        {"dev.overnight/idempotency_key": row.step_key},
    ]


def test_a_tool_the_server_marks_read_only_goes_through_the_ledger_all_the_same(
    tmp_path: Path, record: Path, store: SqliteEffectStore
) -> None:
    """``readOnlyHint: true`` is the server's word, and the server is not trusted: a tool the
    entry does not list in ``read_only`` is written down before it is called."""
    entry = stdio_entry(record, ["clear_cache"])
    entry["command"].insert(-1, "--ledger")
    entry["command"].insert(-1, str(store.path))
    with desk(tmp_path, entry, store) as d:
        assert d.box.mutating("clear_cache")
        out = d.call("clear_cache", {"scope": "all"})
        assert not out.is_error and "cleared all" in out.content
    [row] = store.all()
    assert (row.tool, row.state, row.task_key) == ("clear_cache", "confirmed", "all:clear")
    [effect] = lines(record, "effects.jsonl")
    assert effect["key"] == row.step_key and effect["ledger_state"] == "intended"


def test_a_tool_the_entry_lists_as_read_only_is_called_outside_the_ledger(
    tmp_path: Path, record: Path, store: SqliteEffectStore
) -> None:
    entry = stdio_entry(record, ["lookup", "clear_cache"])
    entry["read_only"], entry["task_keys"] = ["clear_cache"], {}
    with desk(tmp_path, entry, store) as d:
        assert not d.box.mutating("clear_cache")
        assert not d.call("clear_cache", {"scope": "all"}).is_error
    assert store.all() == []
    [effect] = lines(record, "effects.jsonl")
    assert effect["key"] is None


def test_arguments_the_schema_refuses_reach_neither_the_ledger_nor_the_server(
    tmp_path: Path, record: Path, store: SqliteEffectStore
) -> None:
    bad = [{"title": 5, "priority": 2}, {"title": "x"}, {"title": "x", "priority": "high"}, []]
    with desk(tmp_path, stdio_entry(record, ["create_ticket"]), store) as d:
        for args in bad:
            out = d.call("create_ticket", args)  # type: ignore[arg-type]
            assert out.is_error, args
            assert "invalid arguments" in out.content or "must be an object" in out.content
    assert store.all() == []
    assert lines(record, "calls.jsonl") == [] and lines(record, "effects.jsonl") == []


@pytest.mark.parametrize("tool", ["crash", "hang", "garbage"])
def test_a_server_that_dies_hangs_or_answers_garbage_fails_the_call_not_the_toolbox(
    tool: str, tmp_path: Path, record: Path, store: SqliteEffectStore
) -> None:
    entry = stdio_entry(record, ["lookup", tool], timeout_s=2)
    with desk(tmp_path, entry, store) as d:
        started = time.monotonic()
        out = d.call(tool, {"reason": "why"})
        assert time.monotonic() - started < 30  # a loaded machine starts servers slowly
        assert out.is_error and "may or may not have happened" in out.content
        assert "Do not call it again" in out.content
        after = d.call("lookup", {"item": "toner"})  # a fresh server answers the next call
        assert not after.is_error and "toner: 3 in stock" in after.content
    [row] = store.all()
    assert (row.tool, row.state) == (tool, "unknown")
    assert len({s["pid"] for s in lines(record, "starts.jsonl")}) == 2  # restarted once


def test_a_server_that_says_no_records_a_failed_effect(
    tmp_path: Path, record: Path, store: SqliteEffectStore
) -> None:
    with desk(tmp_path, stdio_entry(record, ["refuse"]), store) as d:
        out = d.call("refuse", {"reason": "nope"})
    assert out.is_error and "did not happen" in out.content
    assert [r.state for r in store.all()] == ["failed"]


def test_a_second_delivery_on_the_same_ledger_is_refused(
    tmp_path: Path, record: Path, store: SqliteEffectStore
) -> None:
    with desk(tmp_path, stdio_entry(record, ["create_ticket"]), store) as d:
        assert not d.call("create_ticket", TICKET, run_id="run-a").is_error
        # another run, another step key, the same effect: the task key holds it
        out = d.call("create_ticket", {"title": TICKET["title"], "priority": 9}, run_id="run-b")
        assert out.is_error and "already attempted by run run-a" in out.content
        assert d.refused and d.refused[0]["task_key"] == "printer on fire:ticket"
    assert len(lines(record, "effects.jsonl")) == 1


def test_a_server_that_cannot_be_reached_fails_the_call_before_the_ledger_says_it_happened(
    tmp_path: Path, store: SqliteEffectStore
) -> None:
    entry = {
        "name": "gone",
        "command": [sys.executable, "-c", "raise SystemExit(3)"],
        "allow": ["create_ticket"],
        "task_keys": {"create_ticket": "{title}:ticket"},
        "connect_timeout_s": 5,
    }
    with desk(tmp_path, entry, store) as d:
        assert d.box.specs()[0].input_schema == {"type": "object"}  # a placeholder, not a crash
        out = d.call("create_ticket", TICKET)
    assert out.is_error and "not available" in out.content
    assert store.all() == []


# --------------------------------------------------------------------------- the spec


def test_entries_the_spec_refuses_on_their_own(record: Path) -> None:
    good = stdio_entry(record, ["lookup"], read_only=[])
    cases = [
        ({**good, "url": "http://127.0.0.1:1/mcp"}, "exactly one"),
        ({"name": "x", "url": "ftp://host/mcp", "allow": ["a"]}, "not an http"),
        ({"name": "x", "url": "http://127.0.0.1:1/mcp", "allow": ["a"], "env": ["T"]}, "env"),
        ({**good, "allow": []}, "at least 1"),
        ({**good, "allow": ["a.b"]}, "cannot be given to a model"),
        ({**good, "task_keys": {"create_ticket": "{title}"}}, "not in allow"),
        ({**good, "allow": ["lookup", "t"], "task_keys": {"t": "always"}}, "names no argument"),
        ({**good, "allow": ["read_file"]}, "is taken"),
        ({**good, "env": ["NOT-A-NAME"]}, "not an environment variable name"),
        ({**good, "read_only": ["lookup", "peek"]}, "not in allow"),
        (
            {
                **good,
                "allow": ["lookup", "create_ticket"],
                "read_only": ["create_ticket"],
                "task_keys": {"create_ticket": KEYS["create_ticket"]},
            },
            "read-only and has a task key",
        ),
    ]
    for entry, words in cases:
        with pytest.raises((ConfigError, ValueError), match=words):
            ToolsSpec.model_validate({"mcp": [entry]})


def night_data(repo: Path, entry: dict[str, Any], record: Path, **extra: Any) -> dict[str, Any]:
    return spec_data(
        repo,
        predicate="false",
        tasks=[{"id": "t1", "brief": 'CALL lookup {"item": "toner"}', "verify": "true"}],
        tools={"allow": [], "mcp": [entry], "commands": ["true"]},
        run={"replan": False, "retries": 0, "drift_every": 50},
        agent={"max_calls": 4},
        sandbox={"writable": [str(record)]},
        **extra,
    )


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"allow": ["lookup", "missing_tool"]}, "allow", "offers no tool 'missing_tool'"),
        ({"allow": ["lookup", "create_ticket"], "task_keys": {}}, "task_keys", "task_keys = {"),
        # The server marks clear_cache readOnlyHint: true; the entry does not say it reads.
        ({"allow": ["lookup", "clear_cache"], "task_keys": {}}, "task_keys", "task_keys = {"),
        (
            {
                "allow": ["create_ticket"],
                "read_only": [],
                "task_keys": {"create_ticket": "{ticket_id}:t"},
            },
            "task_keys.create_ticket",
            "ticket_id",
        ),
        ({"command": [sys.executable, "-c", "pass"]}, "", "cannot be used"),
    ],
)
def test_the_spec_check_lists_the_server_and_refuses_what_it_does_not_offer(
    change: dict[str, Any], field: str, words: str, repo: Path, record: Path
) -> None:
    entry = {**stdio_entry(record, ["lookup"]), **change}
    spec = parse_spec(night_data(repo, entry, record), repo)
    with pytest.raises(ConfigError) as caught:
        check_spec(spec, model=FunctionModel(lambda r: text_answer("x")))
    assert caught.value.field == f"tools.mcp.desk.{field}".rstrip(".")
    assert words in str(caught.value)
    if field == "task_keys":
        tool = change["allow"][1]
        assert "not in read_only" in caught.value.problem and tool in caught.value.fix
        assert f'read_only = ["{tool}"]' in caught.value.fix


def test_a_bad_entry_exits_64_before_anything_is_written(
    repo: Path, record: Path, tmp_path: Path
) -> None:
    entry = {**stdio_entry(record, ["lookup", "create_ticket"]), "task_keys": {}}
    data = night_data(repo, entry, record)
    data["model"]["target"] = "tests.tools.mcp_model:model"
    spec_path = write_spec(tmp_path / "night.toml", data)
    env, mark = marked_env(ROOT)
    try:
        done = subprocess.run(
            overnight("run", spec_path, "--run-dir", tmp_path / "run", "--quiet"),
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        kill_marked(mark)
    assert done.returncode == 64, done.stderr
    assert "tools.mcp.desk.task_keys" in done.stderr and "create_ticket" in done.stderr
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------- nights


def ticket_model(calls: list[tuple[str, dict[str, Any]]], seen: list[str]) -> FunctionModel:
    """Makes ``calls`` in order, one per model call, keeping every tool result it reads."""

    def answer(request: ModelRequest) -> dict[str, Any]:
        usage = usage_dict(input=900, output=60)
        if request.purpose != "execute":
            return text_answer("summary", usage)
        last = request.messages[-1]
        if isinstance(last["content"], list):
            seen.extend(
                str(b.get("content")) for b in last["content"] if b.get("type") == "tool_result"
            )
        step = sum(1 for m in request.messages if m["role"] == "assistant")
        if step < len(calls):
            return tool_answer(*calls[step], usage)
        return text_answer("done", usage)

    return FunctionModel(answer)


def test_a_night_over_http_uses_the_ledger_and_a_second_night_on_it_is_refused(
    repo: Path, record: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "shared" / "effects.sqlite"
    calls = [("lookup", {"item": "toner"}), ("crash", {"reason": "x"}), ("create_ticket", TICKET)]
    results = []
    with http_server(record) as url:
        entry = {"name": "desk", "url": url, "allow": ["lookup", "create_ticket"]}
        entry["read_only"] = ["lookup"]
        entry["task_keys"] = {"create_ticket": KEYS["create_ticket"]}
        for n in (1, 2):
            seen: list[str] = []
            spec = make_spec(
                repo,
                predicate="false",
                tasks=[{"id": "ticket", "brief": "open the ticket", "verify": "true"}],
                tools={"allow": [], "mcp": [entry], "commands": ["true"]},
                run={"replan": False, "retries": 0, "drift_every": 50},
                agent={"max_calls": 5},
                effects={"database": str(ledger)},
            )
            check_spec(spec, model=FunctionModel(lambda r: text_answer("x")))
            _rd, result = run_night(spec, tmp_path / f"run{n}", model=ticket_model(calls, seen))
            results.append((result, seen))
    (first, seen1), (second, seen2) = results
    assert "toner: 3 in stock" in seen1[0]
    assert "there is no tool called 'crash'" in seen1[1]  # offered, not allowed
    assert [(e["tool"], e["state"]) for e in first.effects] == [("create_ticket", "confirmed")]
    assert [e["state"] for e in second.effects] == ["refused"]
    assert "already attempted" in seen2[2]
    assert len(lines(record, "effects.jsonl")) == 1
    assert [c["tool"] for c in lines(record, "calls.jsonl")].count("create_ticket") == 1


def test_a_night_goes_on_after_a_server_crash_and_reports_the_effect_unknown(
    repo: Path, record: Path, tmp_path: Path
) -> None:
    entry = stdio_entry(record, ["lookup", "crash", "create_ticket"])
    calls = [("crash", {"reason": "x"}), ("lookup", {"item": "toner"}), ("create_ticket", TICKET)]
    seen: list[str] = []
    spec = make_spec(
        repo,
        predicate="false",
        tasks=[{"id": "ticket", "brief": "open the ticket", "verify": "true"}],
        tools={"allow": [], "mcp": [entry], "commands": ["true"]},
        run={"replan": False, "retries": 0, "drift_every": 50},
        agent={"max_calls": 5},
        sandbox={"writable": [str(record)]},
    )
    _rd, result = run_night(spec, tmp_path / "run", model=ticket_model(calls, seen))
    assert "may or may not have happened" in seen[0]
    assert "toner: 3 in stock" in seen[1] and '"ticket": 1' in seen[2]
    assert {e["tool"]: e["state"] for e in result.effects} == {
        "crash": "unknown",
        "create_ticket": "confirmed",
    }
    starts = lines(record, "starts.jsonl")
    assert len(starts) == 2 and all(s["cwd"] != str(repo) for s in starts)


def effect_count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)
        try:
            return int(con.execute("SELECT COUNT(*) FROM effects").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


@pytest.mark.chaos
def test_kill_9_between_intent_and_answer_then_resume_never_does_the_effect_twice(
    repo: Path, record: Path, tmp_path: Path
) -> None:
    """The server records the effect and holds its answer; the night is killed (with its
    sandboxed server) in that window. The resume finds the intent with no answer: it is
    reported as unknown and the task parked, never called again; a fresh night sharing the
    ledger is refused by the task key."""
    ledger = tmp_path / "shared" / "effects.sqlite"
    entry = stdio_entry(record, ["create_ticket"], hold_s=30)
    data = spec_data(
        repo,
        predicate="false",
        tasks=[
            {
                "id": "ticket",
                "brief": f"CALL create_ticket {json.dumps(TICKET)}",
                "verify": "test -f never-there",
            }
        ],
        tools={"allow": [], "mcp": [entry], "commands": ["test"]},
        run={"replan": False, "retries": 0, "drift_every": 50},
        agent={"max_calls": 3},
        sandbox={"writable": [str(record)]},
        effects={"database": str(ledger)},
    )
    data["model"]["target"] = "tests.tools.mcp_model:model"
    spec_path = write_spec(tmp_path / "night.toml", data)
    run = tmp_path / "run"
    env, mark = marked_env(ROOT)
    try:
        proc = start_cli(overnight("run", spec_path, "--run-dir", run, "--quiet"), env, tmp_path)
        end = time.monotonic() + 60
        while not lines(record, "effects.jsonl"):
            assert proc.poll() is None, f"the night ended early ({proc.returncode})"
            assert time.monotonic() < end, "the effect never happened"
            time.sleep(0.02)
        assert effect_count(ledger) == 1  # the intent was written before the call
        kill_everything(proc, mark)

        done = subprocess.run(
            overnight("resume", run, "--json"),
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode in (0, 2, 3, 4), done.stderr
        result = json.loads(done.stdout)
        listed = subprocess.run(
            overnight("review", "--runs", run, "--json"),
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        again = subprocess.run(
            overnight("run", spec_path, "--run-dir", tmp_path / "run2", "--json"),
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        kill_marked(mark)
    assert len(lines(record, "effects.jsonl")) == 1  # never twice
    assert [c["tool"] for c in lines(record, "calls.jsonl")] == ["create_ticket"]
    assert [(e["tool"], e["state"]) for e in result["effects"]] == [("create_ticket", "unknown")]
    assert [p["id"] for p in result["plan"]["parked"]] == ["ticket"]
    items = [i for i in json.loads(listed.stdout) if i["kind"] == "effect of unknown outcome"]
    assert len(items) == 1 and "printer on fire" in items[0]["summary"]
    second = json.loads(again.stdout)
    assert [e["state"] for e in second["effects"]] == ["refused"]


# --------------------------------------------------------------------------- the extra


def test_the_docs_example_is_a_valid_entry() -> None:
    text = (ROOT / "docs" / "guides" / "mcp.md").read_text()
    block = text.split("```toml", 1)[1].split("```", 1)[0]
    import tomllib

    [entry] = ToolsSpec.model_validate(tomllib.loads(block)["tools"]).mcp
    assert entry.allow == ["search_issues", "create_issue"] and entry.env == ["GITHUB_TOKEN"]
    assert entry.read_only == ["search_issues"]


def test_nothing_outside_the_mcp_modules_imports_the_sdk() -> None:
    code = (
        "import sys, overnight.night.compose, overnight.night.preflight, overnight.tools.mcp, "
        "overnight.cli.handlers; print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('mcp', 'mcp_types')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_without_the_extra_a_server_is_a_spec_error_naming_it(record: Path) -> None:
    code = f"""
import sys
class NoMcp:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("mcp", "mcp_types"):
            raise ImportError("No module named " + repr(name))
sys.meta_path.insert(0, NoMcp())
from pathlib import Path
from overnight.config.tools import ToolsSpec
from overnight.core.errors import ConfigError
from overnight.tools.mcp import check_servers
spec = ToolsSpec.model_validate({{"mcp": [{json.dumps(stdio_entry(record, ["lookup"]))}]}})
try:
    check_servers(spec, base_dir=Path("."), confine=lambda: None)
except ConfigError as exc:
    print(exc.field, "|", exc.fix)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "tools.mcp.desk | pip install 'overnight[mcp]'", done.stderr
