"""``MeteringProxy``: an HTTP/1.1 server in the harness process, on a unix socket (bound into
the sandbox) and optionally on a TCP port of 127.0.0.1, that forwards the provider APIs of
``overnight.proxy.protocols`` upstream with the harness's own key.

A request is served only with a token admitted for a task (``admit``), in ``x-api-key`` or
``Authorization: Bearer``; its worst case is held by that task's ``Meter`` before it is
forwarded, and its answer settles what was held (``overnight.proxy.relay``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socketserver
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx2

from overnight.proxy.metering import Meter
from overnight.proxy.protocols import Family
from overnight.proxy.relay import Handler, Upstream
from overnight.secrecy import SecretScan, secret_values

__all__ = ["MeteringProxy", "Upstream", "Upstreams", "new_token", "upstreams_from_env"]

ANTHROPIC_URL = "https://api.anthropic.com"
OPENAI_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class Upstreams:
    """Where each API family is forwarded; a family without one is answered 403."""

    anthropic: Upstream | None = None
    openai: Upstream | None = None

    def of(self, family: Family) -> Upstream | None:
        return self.anthropic if family == "anthropic" else self.openai


def upstreams_from_env(environ: Mapping[str, str]) -> Upstreams:
    """The providers as the harness's own environment reaches them: ``ANTHROPIC_BASE_URL``
    (default the public API, without ``/v1``) with ``ANTHROPIC_API_KEY``, ``OPENAI_BASE_URL``
    (default the public API, with ``/v1``, as the OpenAI SDKs write it) with
    ``OPENAI_API_KEY``. A family whose key is unset or empty has no upstream."""

    def one(url_var: str, default: str, key_var: str) -> Upstream | None:
        key = environ.get(key_var, "")
        if not key:
            return None
        return Upstream(base_url=environ.get(url_var) or default, key=key)

    return Upstreams(
        anthropic=one("ANTHROPIC_BASE_URL", ANTHROPIC_URL, "ANTHROPIC_API_KEY"),
        openai=one("OPENAI_BASE_URL", OPENAI_URL, "OPENAI_API_KEY"),
    )


def new_token() -> str:
    """A token to ``admit`` for one task: unguessable, and nothing like a provider key."""
    return "overnight-" + secrets.token_urlsafe(32)


class _Quiet(socketserver.BaseServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up or goes idle is not news; anything else is a fault to see.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _UnixServer(_Quiet, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _TcpServer(_Quiet, socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


@dataclass
class _State:
    meters: dict[str, Meter] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    open: dict[int, int] = field(default_factory=dict)
    """Unsettled exchanges, by the id of their meter."""
    settled: threading.Condition = field(default_factory=threading.Condition)


class MeteringProxy:
    """The proxy: ``start()`` it (or use it as a context manager), ``admit`` a token per
    task, hand the token and an address to the CLI, ``revoke`` it after, ``close()``.

    ``socket_path``: the unix socket to listen on (made, mode 0600, and removed on close);
    ``tcp_port``: also listen on 127.0.0.1 at this port (0: any free one; see ``port``).
    ``read_timeout`` bounds the wait for each piece of an upstream answer.
    """

    def __init__(
        self,
        upstreams: Upstreams,
        *,
        socket_path: str | os.PathLike[str] | None = None,
        tcp_port: int | None = None,
        read_timeout: float = 600.0,
        connect_timeout: float = 10.0,
    ) -> None:
        if socket_path is None and tcp_port is None:
            raise ValueError("the proxy needs a unix socket path, a TCP port, or both")
        self.upstreams = upstreams
        self.socket_path = Path(socket_path) if socket_path is not None else None
        self._tcp_port = tcp_port
        self._state = _State()
        self._timeout = httpx2.Timeout(read_timeout, connect=connect_timeout)
        self._clients: dict[Family, httpx2.Client] = {}
        self._servers: list[socketserver.BaseServer] = []
        self._threads: list[threading.Thread] = []
        self.port: int | None = None
        """The TCP port listened on, once started (None without one)."""
        self._scan: SecretScan | None = None

    # --- tokens ---

    def admit(self, token: str, meter: Meter) -> None:
        """Serve requests carrying ``token``, each held by ``meter`` before it is sent."""
        if not token:
            raise ValueError("an empty token cannot be admitted")
        with self._state.lock:
            self._state.meters[token] = meter

    def revoke(self, token: str, *, settle_s: float = 60.0) -> None:
        """Refuse ``token`` from now on (401); requests already forwarded finish, and this
        waits (at most ``settle_s``) until they are settled: a stream its client hung up on is
        read to its end, so that what it bills is booked to the task that asked for it."""
        with self._state.lock:
            meter = self._state.meters.pop(token, None)
        if meter is None:
            return
        with self._state.settled:
            self._state.settled.wait_for(
                lambda: self._state.open.get(id(meter), 0) == 0, timeout=settle_s
            )

    @contextlib.contextmanager
    def settling(self, meter: Meter) -> Iterator[None]:
        with self._state.settled:
            self._state.open[id(meter)] = self._state.open.get(id(meter), 0) + 1
        try:
            yield
        finally:
            with self._state.settled:
                left = self._state.open[id(meter)] - 1
                if left:
                    self._state.open[id(meter)] = left
                else:
                    del self._state.open[id(meter)]
                self._state.settled.notify_all()

    def meter_of(self, token: str | None) -> Meter | None:
        if not token:
            return None
        with self._state.lock:
            return self._state.meters.get(token)

    def upstream_of(self, family: Family) -> Upstream | None:
        return self.upstreams.of(family)

    def secrets(self) -> SecretScan:
        """The upstreams' keys and every secret of the harness's environment."""
        if self._scan is None:
            keys = [u.key for u in (self.upstreams.anthropic, self.upstreams.openai) if u]
            self._scan = SecretScan([*keys, *secret_values()])
        return self._scan

    def client_of(self, family: Family) -> httpx2.Client:
        """The pooled HTTP client of ``family``'s upstream, made on its first request."""
        with self._state.lock:
            client = self._clients.get(family)
            if client is None:
                limits = httpx2.Limits(max_connections=256, max_keepalive_connections=32)
                client = httpx2.Client(timeout=self._timeout, limits=limits)
                self._clients[family] = client
            return client

    # --- lifecycle ---

    @property
    def url(self) -> str | None:
        """``http://127.0.0.1:PORT`` once started with a TCP port: the Anthropic SDKs' base
        URL (OpenAI's is this with ``/v1``)."""
        return f"http://127.0.0.1:{self.port}" if self.port is not None else None

    def start(self) -> MeteringProxy:
        if self._servers:
            return self
        try:
            if self.socket_path is not None:
                self._listen_unix(self.socket_path)
            if self._tcp_port is not None:
                self._listen_tcp(self._tcp_port)
        except BaseException:
            self.close()
            raise
        for server in self._servers:
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="overnight-proxy",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)
        return self

    def _listen_unix(self, path: Path) -> None:
        if path.is_socket():
            path.unlink()
        handler = type("UnixHandler", (Handler,), {"gate": self})
        server = _UnixServer(str(path), handler, bind_and_activate=False)
        self._servers.append(server)
        server.server_bind()
        os.chmod(path, 0o600)  # before it listens: no connection is taken before this
        server.server_activate()

    def _listen_tcp(self, port: int) -> None:
        handler = type("TcpHandler", (Handler,), {"gate": self, "disable_nagle_algorithm": True})
        server = _TcpServer(("127.0.0.1", port), handler, bind_and_activate=False)
        self._servers.append(server)
        server.server_bind()
        server.server_activate()
        self.port = server.socket.getsockname()[1]

    def close(self, *, settle_s: float = 60.0) -> None:
        """Stop listening, remove the socket, and close the upstream connections, once every
        exchange in flight is settled (waiting at most ``settle_s``)."""
        with self._state.settled:
            self._state.settled.wait_for(lambda: not self._state.open, timeout=settle_s)
        for server, thread in zip(self._servers, self._threads, strict=False):
            server.shutdown()
            thread.join(timeout=5)
        for server in self._servers:
            server.server_close()
        self._servers.clear()
        self._threads.clear()
        if self.socket_path is not None and self.socket_path.is_socket():
            self.socket_path.unlink()
        with self._state.lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for client in clients:
            client.close()

    def __enter__(self) -> MeteringProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
