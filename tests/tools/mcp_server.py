"""An MCP server for the tests, written with the SDK's ``MCPServer`` (the former FastMCP).

    python mcp_server.py --record DIR [--hold-s S] [--die-once] [--ledger DB] stdio
    python mcp_server.py --record DIR http --port N

Every call it receives is appended to ``DIR/calls.jsonl`` (tool, arguments, the request's
whole ``_meta`` and the idempotency key in it); every real effect of the mutating tool to
``DIR/effects.jsonl``, flushed to disk before it answers. Its tools:

- ``lookup`` (``readOnlyHint: true``): answers from a fixed table;
- ``env_report`` (read-only): the names of its environment, and whether the two secrets the
  tests set reached it;
- ``create_ticket``: the one tool with a real effect; with ``--hold-s`` it waits that long
  after the effect, before answering (a kill lands between the two); with ``--die-once`` the
  server dies after the effect, before answering, the first time (``DIR/died`` marks it);
- ``clear_cache``: marked ``readOnlyHint: true``, yet it has an effect (written to
  ``effects.jsonl``, with the state of its row in the ledger named by ``--ledger`` as the
  server sees it during the call): a server's hints are not to be trusted;
- ``crash``: the server process dies mid-call;
- ``hang``: never answers;
- ``garbage``: answers its request with something that is not an MCP result (stdio only);
- ``refuse``: answers ``isError``, doing nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)
app = MCPServer("overnight-test-server", log_level="WARNING")
settings: dict[str, Any] = {
    "record": Path("."),
    "hold_s": 0.0,
    "die_once": False,
    "ledger": None,
    "wire_inode": None,
}


def _append(name: str, entry: dict[str, Any]) -> None:
    with open(settings["record"] / name, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _seen(tool: str, args: dict[str, Any], ctx: Context | None = None) -> str | None:
    meta = dict(ctx.request_context.meta or {}) if ctx is not None else {}
    sdk_own = [k for k in meta if k == "progressToken" or k.startswith("io.modelcontextprotocol/")]
    for name in sdk_own:  # what the SDK's client adds of its own accord
        del meta[name]
    key = meta.get("dev.overnight/idempotency_key")
    entry = {"tool": tool, "args": args, "key": key, "meta": meta, "pid": os.getpid()}
    _append("calls.jsonl", entry)
    return key if isinstance(key, str) else None


@app.tool(annotations=READ_ONLY)
def lookup(item: str, ctx: Context) -> str:
    """Look an item up in the stock table (reads only)."""
    _seen("lookup", {"item": item}, ctx)
    return f"{item}: 3 in stock"


@app.tool(annotations=READ_ONLY)
def env_report() -> str:
    """The names of this server's environment variables."""
    names = sorted(os.environ)
    _append(
        "env.jsonl",
        {
            "names": names,
            "github_token": os.environ.get("GITHUB_TOKEN"),
            "anthropic_key": os.environ.get("ANTHROPIC_API_KEY"),
        },
    )
    return " ".join(names)


@app.tool(annotations=READ_ONLY)
def peek(path: str) -> str:
    """What a file holds, as this server sees it, or "missing"."""
    try:
        return Path(path).read_text()
    except OSError:
        return "missing"


@app.tool()
def create_ticket(title: str, priority: int, ctx: Context) -> dict[str, Any]:
    """Open a support ticket (a real effect: written to effects.jsonl)."""
    key = _seen("create_ticket", {"title": title, "priority": priority}, ctx)
    effects = settings["record"] / "effects.jsonl"
    number = 1 + (len(effects.read_text().splitlines()) if effects.exists() else 0)
    _append("effects.jsonl", {"ticket": number, "title": title, "key": key, "pid": os.getpid()})
    if settings["hold_s"]:
        time.sleep(settings["hold_s"])
    died = settings["record"] / "died"
    if settings["die_once"] and not died.exists():
        died.write_text(str(os.getpid()))
        os._exit(17)
    return {"ticket": number, "title": title}


@app.tool(annotations=READ_ONLY)
def clear_cache(scope: str, ctx: Context) -> str:
    """Look at the cache (says the hint; it clears it)."""
    key = _seen("clear_cache", {"scope": scope}, ctx)
    state = None
    if settings["ledger"] is not None and key is not None:
        con = sqlite3.connect(f"file:{settings['ledger']}?mode=ro", uri=True, timeout=5.0)
        try:
            row = con.execute("SELECT state FROM effects WHERE step_key = ?", (key,)).fetchone()
        finally:
            con.close()
        state = None if row is None else row[0]
    _append("effects.jsonl", {"cleared": scope, "key": key, "ledger_state": state})
    return f"cleared {scope}"


@app.tool()
def crash(reason: str, ctx: Context) -> str:
    """Dies in the middle of the call."""
    _seen("crash", {"reason": reason}, ctx)
    os._exit(17)


@app.tool()
def hang(reason: str, ctx: Context) -> str:
    """Never answers."""
    _seen("hang", {"reason": reason}, ctx)
    time.sleep(3600)
    return "late"


@app.tool()
def garbage(reason: str, ctx: Context) -> str:
    """Answers with something that is not a tool result, on the wire itself."""
    _seen("garbage", {"reason": reason}, ctx)
    wire = _wire_fd()
    if wire is not None:
        answer = {"jsonrpc": "2.0", "id": ctx.request_context.request_id, "result": {"content": 7}}
        os.write(wire, (json.dumps(answer) + "\n").encode())
        time.sleep(3600)  # the real answer never comes
    return "not garbage after all"


@app.tool()
def refuse(reason: str, ctx: Context) -> str:
    """Says no (isError), doing nothing."""
    _seen("refuse", {"reason": reason}, ctx)
    raise ValueError(f"refused: {reason}")


def _wire_fd() -> int | None:
    """The descriptor the SDK writes the protocol to (a duplicate of the original stdout)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd < 3:
            continue
        try:
            if os.fstat(fd).st_ino == settings["wire_inode"]:
                return fd
        except OSError:
            continue
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", type=Path, required=True)
    parser.add_argument("--hold-s", type=float, default=0.0)
    parser.add_argument("--die-once", action="store_true")
    parser.add_argument("--ledger", type=Path)
    sub = parser.add_subparsers(dest="transport", required=True)
    sub.add_parser("stdio")
    http = sub.add_parser("http")
    http.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    settings["record"] = args.record
    settings["hold_s"] = args.hold_s
    settings["die_once"] = args.die_once
    settings["ledger"] = args.ledger
    _append("starts.jsonl", {"pid": os.getpid(), "cwd": os.getcwd(), "argv": sys.argv[1:]})
    if args.transport == "stdio":
        settings["wire_inode"] = os.fstat(1).st_ino
        app.run("stdio")
    else:
        app.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
