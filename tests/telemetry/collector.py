"""A local OTLP/HTTP collector for the tests: a real HTTP server on a free localhost port that
keeps every POSTed body and decodes it as an ``ExportTraceServiceRequest``."""

from __future__ import annotations

import gzip
import socket
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

Mode = Literal["ok", "fail", "hang"]


def free_port() -> int:
    """A localhost port nothing listens on (bound, then let go)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def value_of(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [value_of(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which) if which else None


@dataclass
class Got:
    """One decoded span, with its resource's attributes."""

    span: Span
    resource: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.span.name)

    @property
    def id(self) -> bytes:
        return bytes(self.span.span_id)

    @property
    def parent(self) -> bytes:
        return bytes(self.span.parent_span_id)

    @property
    def attrs(self) -> dict[str, Any]:
        return {kv.key: value_of(kv.value) for kv in self.span.attributes}

    @property
    def events(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            (e.name, {kv.key: value_of(kv.value) for kv in e.attributes}) for e in self.span.events
        ]


@dataclass
class Collector:
    mode: Mode = "ok"
    bodies: list[bytes] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    posts: int = 0
    _release: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Collector:
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                collector.posts += 1
                if collector.mode == "hang":
                    collector._release.wait(60)
                    return
                if collector.mode == "fail":
                    self.send_response(500)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                collector.bodies.append(body)
                collector.paths.append(self.path)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self._release.set()
        self.server.shutdown()
        self.server.server_close()

    def raw(self) -> bytes:
        return b"".join(self.bodies)

    def spans(self) -> list[Got]:
        found: list[Got] = []
        for body in self.bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for rs in request.resource_spans:
                resource = {kv.key: value_of(kv.value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    found += [Got(s, resource) for s in ss.spans]
        return found


def named(spans: list[Got], prefix: str) -> Iterator[Got]:
    return (s for s in spans if s.name.startswith(prefix))
