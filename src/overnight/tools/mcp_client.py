"""The client side of ``[[tools.mcp]]``: one MCP server, started (stdio) or reached (streamable
HTTP) through the official ``mcp`` SDK, listed once, and called from the synchronous night.

The SDK is asynchronous; each server gets an event loop of its own in a daemon thread, and
the night talks to it through an anyio blocking portal. A connection is opened on first use
and kept; one that failed (the server died, hung past a call's timeout, or answered something
that is not MCP) is closed, and the next call starts a fresh one.

A stdio server is the user's program, but the model chooses what it is asked: it runs in the
night's sandbox when it has one, in an empty private directory, with PATH, HOME and the
environment names its entry lists and nothing else of the harness's environment.

This is the only module that imports the ``mcp`` extra.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TextIO, cast

import anyio
from anyio.from_thread import BlockingPortal
from mcp import Client, StdioServerParameters
from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, stdio_client
from mcp_types import RequestParamsMeta

from overnight.config.tools import McpServerSpec
from overnight.effects.ledger import ToolFailure
from overnight.process import Confinement
from overnight.sandbox.bwrap import SANDBOX_HOME
from overnight.secrecy import secret_values

#: The ``_meta`` key of a ``tools/call`` request that carries the run-step key of a mutating
#: call: the same on every attempt of the same step, so a server can refuse a repeat. A
#: reverse-DNS prefix, as MCP asks of keys that are not its own.
IDEMPOTENCY_META_KEY = "dev.overnight/idempotency_key"

#: The W3C trace context keys a request's ``_meta`` may carry (unprefixed: the MCP
#: specification's exception for them, SEP-414), so that a server's spans join the night.
TRACE_META_KEYS = ("traceparent", "tracestate")

#: Seconds beyond a call's own timeout that the night waits for the SDK to give up on it.
_GRACE_S = 5.0

#: Seconds a connection may take to shut down before it is abandoned (the SDK kills a stdio
#: server's process group within about six).
_CLOSE_S = 10.0


class McpUnavailable(Exception):
    """The server could not be started, reached or listed."""


@dataclass(frozen=True)
class ListedTool:
    """One tool as the server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass
class _Place:
    """Where a stdio server runs (an empty private directory) and where its stderr goes."""

    scratch: Path | None = None
    errlog: TextIO | None = None

    def tail(self) -> str:
        """The end of what the server wrote on stderr, for a failure's message."""
        if self.errlog is None:
            return ""
        try:
            self.errlog.flush()
            with open(self.errlog.name, encoding="utf-8", errors="replace") as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - 600))
                lines = [line for line in fh.read().splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        return str(_redacted(" | ".join(lines[-3:])))[-400:]

    def remove(self) -> None:
        if self.errlog is not None:
            self.errlog.close()
            Path(self.errlog.name).unlink(missing_ok=True)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


@dataclass
class _Session:
    """One open connection: the client, and the task on the loop that holds it open."""

    client: Client
    closing: anyio.Event
    held: concurrent.futures.Future[None]
    place: _Place

    def shut(self, loop: _Loop) -> None:
        """Let the holding task leave the client (the SDK ends a stdio server: stdin closed,
        then its process group killed); cancel it if it does not."""
        try:
            loop.run(self.closing.set, timeout=_CLOSE_S)
            self.held.result(timeout=_CLOSE_S)
        except BaseException:
            self.held.cancel()
        self.place.remove()


class McpConnection:
    """One ``[[tools.mcp]]`` server for the life of a night (or of a spec check)."""

    def __init__(
        self,
        spec: McpServerSpec,
        *,
        base_dir: Path,
        confine: Callable[[], Confinement | None],
    ) -> None:
        self.spec = spec
        self.base_dir = base_dir
        self.confine = confine
        self._lock = threading.RLock()
        self._loop = _Loop(f"overnight-mcp-{spec.name}")
        self._session: _Session | None = None
        weakref.finalize(self, self._loop.stop)

    # -- listing and calling --------------------------------------------------------------

    def list_tools(self) -> dict[str, ListedTool]:
        """Every tool the server offers, by name (a fresh connection when there is none).
        Raises ``McpUnavailable``."""
        with self._lock:
            session = self._session or self._open()
            limit = self.spec.connect_timeout_s
            try:
                tools: dict[str, ListedTool] = self._loop.run(
                    _list_all, session.client, limit, timeout=limit + _GRACE_S
                )
            except BaseException as exc:
                self._drop(session)
                raise McpUnavailable(
                    f"the server did not list its tools: {_said(exc, session.place)}"
                ) from exc
        return tools

    def ensure(self) -> None:
        """Open the connection now if there is none (a stdio server started), so that a
        call's own timeout is not spent starting it. Raises ``McpUnavailable``."""
        with self._lock:
            if self._session is None:
                self._open()

    def call(
        self,
        name: str,
        args: Mapping[str, Any],
        key: str | None,
        timeout_s: float,
        trace: Mapping[str, str] | None = None,
    ) -> Any:
        """Call ``name``, with ``key`` (a mutating call's run-step key) and ``trace`` (the W3C
        trace context of the call's span) in the request's ``_meta``; what it answered (its
        text, parsed when it is a JSON object or array; without text, its structured content),
        with secret values of this environment replaced. Raises ``ToolFailure``: retryable
        when the call may have done something (no answer, a dead server, an answer that is
        not MCP), not retryable when it was never sent or the server answered that it failed
        (``isError``).

        Calls are made one at a time: a call the night gave up on still holds the connection
        until the SDK gives up on it too, so the next call finds it dropped and opens a fresh
        one instead of having it closed under its feet."""
        with self._lock:
            try:
                session = self._session or self._open()
            except McpUnavailable as exc:
                raise ToolFailure(f"{exc}; the call was not sent", retryable=False) from None
            fields = {k: v for k, v in (trace or {}).items() if k in TRACE_META_KEYS}
            if key is not None:
                fields[IDEMPOTENCY_META_KEY] = key
            call = partial(
                session.client.call_tool,
                name,
                dict(args),
                read_timeout_seconds=timeout_s,
                meta=cast(RequestParamsMeta, fields) if fields else None,
            )
            try:
                result = self._loop.run(call, timeout=timeout_s + _GRACE_S)
            except BaseException as exc:
                self._drop(session)
                raise ToolFailure(
                    f"the MCP server {self.spec.name!r} gave no usable answer "
                    f"({_said(exc, session.place)}); it is restarted for the next call",
                    retryable=True,
                ) from None
        text = "\n".join(_block_text(b) for b in result.content).strip()
        if result.is_error:
            raise ToolFailure(_redacted(text or "the server reported an error"), retryable=False)
        if not text:
            return _redacted(result.structured_content)
        with contextlib.suppress(ValueError):
            parsed = json.loads(text)  # a JSON answer is kept as JSON, not as a quoted string
            if isinstance(parsed, dict | list):
                return _redacted(parsed)
        return _redacted(text)

    def close(self) -> None:
        """End the connection (and a stdio server) and the loop; waits a few seconds at most,
        whatever call is still under way."""
        session, self._session = self._session, None
        if session is not None:
            session.shut(self._loop)
        self._loop.stop()

    # -- connections ------------------------------------------------------------------------

    def _open(self) -> _Session:
        """A new connection (the caller holds the lock). Raises ``McpUnavailable``."""
        place = _Place()
        try:
            target = self._target(place)
        except Exception as exc:
            place.remove()
            raise McpUnavailable(f"the server cannot be started: {_said(exc)}") from exc
        ready: concurrent.futures.Future[tuple[Client, anyio.Event]] = concurrent.futures.Future()

        async def hold() -> None:
            closing = anyio.Event()  # made on the loop: an anyio event needs one
            try:
                async with Client(target, read_timeout_seconds=self.spec.connect_timeout_s) as c:
                    ready.set_result((c, closing))
                    await closing.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                raise

        try:
            held = self._loop.submit(hold)
        except BaseException:
            place.remove()
            raise
        try:
            client, closing = ready.result(timeout=self.spec.connect_timeout_s + _GRACE_S)
        except BaseException as exc:
            said = _said(exc, place)
            held.cancel()
            place.remove()
            raise McpUnavailable(f"the server could not be reached: {said}") from exc
        self._session = _Session(client, closing, held, place)
        return self._session

    def _drop(self, session: _Session) -> None:
        """Close a failed ``session`` in the background: the caller learns of the failure at
        once, and the next call opens a fresh connection."""
        with self._lock:
            if self._session is session:
                self._session = None
        threading.Thread(
            target=session.shut,
            args=(self._loop,),
            name=f"overnight-mcp-close-{self.spec.name}",
            daemon=True,
        ).start()

    def _target(self, place: _Place) -> Any:
        """What ``Client`` connects to: the url, or a stdio transport that starts the
        server (confined when the night has a sandbox)."""
        if self.spec.url is not None:
            return self.spec.url
        assert self.spec.command is not None
        confinement = self.confine()
        place.scratch = Path(tempfile.mkdtemp(prefix=f"overnight-mcp-{self.spec.name}-"))
        place.errlog = cast(
            TextIO,
            tempfile.NamedTemporaryFile(  # noqa: SIM115  # closed by place.remove
                "w+", prefix=f"overnight-mcp-{self.spec.name}-", suffix=".stderr", delete=False
            ),
        )
        words = [self._word(w) for w in self.spec.command]
        env = server_env(self.spec.env, sandboxed=confinement is not None)
        # The SDK adds HOME, LOGNAME, PATH, SHELL, TERM and USER of its own accord, bubblewrap
        # PWD; what the entry does not list is removed again just before the server starts
        # (names only on the command line, never a value).
        unset = [n for n in (*DEFAULT_INHERITED_ENV_VARS, "PWD") if n not in env]
        argv = [shutil.which("env") or "/usr/bin/env", *(f"-u{n}" for n in unset), "--", *words]
        if confinement is not None:
            argv = confinement.command(argv, cwd=place.scratch, files=program_files(words))
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=place.scratch)
        return stdio_client(params, errlog=place.errlog)

    def _word(self, word: str) -> str:
        """A path relative to the spec's directory made absolute (the server runs elsewhere):
        a word starting with ``./`` or ``../``, or one naming a file that is there."""
        if word.startswith(("./", "../")):
            return str((self.base_dir / word).resolve())
        if word and not word.startswith("-") and not Path(word).is_absolute():
            candidate = self.base_dir / word
            if candidate.is_file():
                return str(candidate.resolve())
        return word


def program_files(words: list[str]) -> list[Path]:
    """The files a server's command names by absolute path (its script, its binary), which
    the sandbox must show even when they lie in a hidden place or under ``/tmp``. A symlink is
    left alone: a virtualenv's ``python`` finds its environment through the link, and the
    environment is visible already."""
    return [
        Path(w)
        for w in words
        if Path(w).is_absolute() and Path(w).is_file() and os.path.realpath(w) == w
    ]


def server_env(
    names: list[str], *, sandboxed: bool, source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The whole environment of a stdio server: PATH, HOME (the sandbox's own when
    sandboxed), and the listed names this process has."""
    src = os.environ if source is None else source
    env = {"PATH": src.get("PATH", os.defpath)}
    home = SANDBOX_HOME if sandboxed else src.get("HOME")
    if home:
        env["HOME"] = home
    env.update({n: src[n] for n in names if n in src})
    return env


async def _list_all(client: Client, timeout_s: float) -> dict[str, ListedTool]:
    found: dict[str, ListedTool] = {}
    cursor: str | None = None
    with anyio.fail_after(timeout_s):
        for _ in range(100):  # a server whose pages never end cannot hang the listing
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:  # its annotations are hints: the entry decides
                found[tool.name] = ListedTool(
                    name=tool.name,
                    description=tool.description or tool.title or tool.name,
                    input_schema=dict(tool.input_schema),
                )
            cursor = page.next_cursor
            if cursor is None:
                break
    return found


def _block_text(block: Any) -> str:
    text = getattr(block, "text", None)
    if isinstance(text, str):
        return text
    return f"[{getattr(block, 'type', 'unknown')} content not shown]"


def _redacted(value: Any) -> Any:
    secrets = secret_values()
    if not secrets or value is None:
        return value
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    for secret in secrets:
        text = text.replace(secret, "[redacted]")
    return text if isinstance(value, str) else json.loads(text)


def _said(exc: BaseException, place: _Place | None = None) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, concurrent.futures.TimeoutError | TimeoutError):
        said = "no answer in time"
    else:
        lines = str(exc).strip().splitlines()
        said = f"{type(exc).__name__}: {lines[0][:300]}" if lines else type(exc).__name__
    tail = place.tail() if place is not None else ""
    return f"{said}; its stderr ends: {tail}" if tail else said


class _Loop:
    """An event loop in a daemon thread, reached through a blocking portal. Started on first
    use; a daemon, so a night that ends without closing it does not hang its process."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._portal: BlockingPortal | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def portal(self) -> BlockingPortal:
        with self._lock:
            if self._stopped:
                raise McpUnavailable("the connection is closed")
            if self._portal is None:
                self._portal = self._start()
            return self._portal

    def _start(self) -> BlockingPortal:
        ready: concurrent.futures.Future[BlockingPortal] = concurrent.futures.Future()

        async def main() -> None:
            async with BlockingPortal() as portal:
                ready.set_result(portal)
                await portal.sleep_until_stopped()

        self._thread = threading.Thread(target=anyio.run, args=(main,), name=self.name, daemon=True)
        self._thread.start()
        return ready.result(timeout=30)

    def submit(self, fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        return self.portal().start_task_soon(fn)

    def run(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
        """``fn(*args)`` on the loop (awaited if it is a coroutine function); the wait is
        bounded by ``timeout``, after which the task is cancelled."""

        async def task() -> Any:
            out = fn(*args)
            if hasattr(out, "__await__"):
                out = await out
            return out

        future = self.portal().start_task_soon(task)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def stop(self) -> None:
        """Cancel what still runs on the loop and wait (a few seconds at most) for the loop to
        end: the SDK's shielded shutdown of a stdio server, which kills its process group,
        runs to its end first."""
        with self._lock:
            self._stopped = True
            portal, self._portal = self._portal, None
            thread, self._thread = self._thread, None
        if portal is None or thread is None:
            return
        # The stop cancels the task it runs in, so its own future is no sign of the end.
        with contextlib.suppress(BaseException):
            portal.start_task_soon(portal.stop, True)
        thread.join(timeout=_CLOSE_S)
