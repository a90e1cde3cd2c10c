"""A local HTTP server that answers with recorded responses, in order, and keeps every request
it received. It listens on 127.0.0.1 only, in a thread; ``close`` stops it.

A response can also be broken the way networks break them: cut after some bytes (the
connection closes with the body short of its ``content-length``), or stalled after some bytes
(the rest follows only after a pause, long enough for a client's read timeout)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.models.cassettes import Interaction

#: Headers the server recomputes or that describe the recording's own connection.
_DROPPED = {"content-length", "transfer-encoding", "connection", "content-encoding", "keep-alive"}


@dataclass(frozen=True)
class Breakage:
    """How to break one response: stop after ``after`` bytes of its body, then either close
    the connection (``stall_s`` 0) or wait ``stall_s`` seconds before the rest."""

    after: int
    stall_s: float = 0.0


@dataclass
class Queued:
    interaction: Interaction
    headers: dict[str, str] = field(default_factory=dict)
    breakage: Breakage | None = None


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class ReplayServer:
    def __init__(self) -> None:
        self.queue: deque[Queued] = deque()
        self.received: list[Received] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
                with server._lock:
                    server.received.append(
                        Received(
                            self.command,
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            body,
                        )
                    )
                    item = server.queue.popleft() if server.queue else None
                if item is None:
                    payload = b'{"error": {"type": "api_error", "message": "replay exhausted"}}'
                    self._send(599, {"content-type": "application/json"}, payload, None)
                    return
                interaction = item.interaction
                headers = {k: v for k, v in interaction.headers.items() if k not in _DROPPED}
                headers.update(item.headers)
                if interaction.wire_encoding == "gzip":
                    body, encoding = interaction.wire_body, "gzip"
                else:
                    body, encoding = interaction.body, None
                self._send(interaction.status, headers, body, encoding, item.breakage)

            do_GET = do_POST

            def _send(
                self,
                status: int,
                headers: dict[str, str],
                body: bytes,
                encoding: str | None,
                breakage: Breakage | None = None,
            ) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                if encoding:
                    self.send_header("content-encoding", encoding)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                if breakage is None:
                    self.wfile.write(body)
                    return
                self.wfile.write(body[: breakage.after])
                self.wfile.flush()
                if breakage.stall_s > 0:
                    time.sleep(breakage.stall_s)
                    with contextlib.suppress(OSError):  # the client may have given up
                        self.wfile.write(body[breakage.after :])
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve(
        self, interaction: Interaction, breakage: Breakage | None = None, **extra_headers: str
    ) -> None:
        """Queue one recorded response (``extra_headers`` added or replaced, e.g. to compose a
        ``retry-after`` the recording did not keep), broken as ``breakage`` says."""
        headers = {k.replace("_", "-"): v for k, v in extra_headers.items()}
        self.queue.append(Queued(interaction, headers, breakage))

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
