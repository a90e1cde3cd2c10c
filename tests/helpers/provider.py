"""Local stand-ins for a model provider, on 127.0.0.1 only: an HTTP server that answers every
request by a function of it (``LocalProvider``, which may start refusing connections and begin
listening later), a port where nothing listens, and a server that accepts a request and closes
the connection without a word (``Hangup``)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

#: (method, path, JSON body or None) -> (status, JSON body)
Responder = Callable[[str, str, Any], tuple[int, Any]]


def status_only(status: int, error_type: str = "error") -> Responder:
    """Every request answered with ``status`` and a provider-shaped error body."""

    def answer(method: str, path: str, body: Any) -> tuple[int, Any]:
        return status, {"type": "error", "error": {"type": error_type, "message": "as set"}}

    return answer


class LocalProvider:
    """An HTTP server answering by ``responder``; with ``listening=False`` its port is bound
    but refuses connections until ``listen()``. ``received`` keeps (method, path) of each
    request."""

    def __init__(self, responder: Responder, *, listening: bool = True) -> None:
        self.responder = responder
        self.received: list[tuple[str, str]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                provider.received.append((self.command, self.path))
                status, answer = provider.responder(self.command, self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self.httpd.daemon_threads = True
        self.httpd.server_bind()
        self.thread: threading.Thread | None = None
        if listening:
            self.listen()

    def listen(self) -> None:
        if self.thread is not None:
            return
        self.httpd.server_activate()
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        if self.thread is not None:
            self.httpd.shutdown()
            self.thread.join(timeout=5)
        self.httpd.server_close()

    def __enter__(self) -> LocalProvider:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def unbound_port() -> int:
    """A port of 127.0.0.1 where nothing listens (a connection to it is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class Hangup:
    """Accepts each connection, reads the whole request, and closes without answering: the
    provider had the request, and said nothing of what it did with it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.1)
        self.requests = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                _read_request(conn)
                self.requests += 1

    def close(self) -> None:
        self._stop.set()
        self.thread.join(timeout=5)
        self.sock.close()

    def __enter__(self) -> Hangup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk
