#!/usr/bin/env python3
"""A CLI agent for ``kind = "command"`` that writes its own request bodies, as a model driving
a CLI can: it sends each request of ``plan.json`` (in the directory named by its first
argument) to the model endpoint it was given, keeps every byte it receives (the status line,
the headers and the body, in ``received/<n>.bin`` of the directory named by its second
argument), then fixes ``calc.py`` and exits 0.

A request is ``{"path": "/v1/messages", "body": {...}, "headers": {...}, "hang_up": true}``:
``hang_up`` closes the connection after the first bytes of the answer."""

from __future__ import annotations

import http.client
import json
import os
import sys
import urllib.parse
from pathlib import Path


def endpoint() -> tuple[str, str]:
    for base, key in (
        ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"),
        ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
    ):
        if base in os.environ:
            return os.environ[base], os.environ[key]
    raise SystemExit("no model endpoint in the environment")


def send(base: str, token: str, request: dict[str, object]) -> bytes:
    url = urllib.parse.urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=60)
    path = str(request["path"])
    if path.startswith("/v1/") and url.path.rstrip("/").endswith("/v1"):
        path = path[3:]
    headers = {"content-type": "application/json", "x-api-key": token}
    headers["authorization"] = f"Bearer {token}"
    headers.update(dict(request.get("headers") or {}))  # type: ignore[call-overload]
    body = json.dumps(request["body"]).encode()
    connection.request("POST", url.path.rstrip("/") + path, body=body, headers=headers)
    response = connection.getresponse()
    head = f"{response.status}\n" + "".join(f"{k}: {v}\n" for k, v in response.getheaders())
    if request.get("hang_up"):
        first = response.read1(200) if hasattr(response, "read1") else response.read(200)
        connection.close()
        return head.encode() + b"\n" + first
    data = response.read()
    connection.close()
    return head.encode() + b"\n" + data


def main(argv: list[str]) -> int:
    plan = json.loads((Path(argv[0]) / "plan.json").read_text())
    received = Path(argv[1]) / "received"
    received.mkdir(parents=True, exist_ok=True)
    base, token = endpoint()
    for number, request in enumerate(plan):
        try:
            got = send(base, token, request)
        except OSError as exc:
            got = f"error {exc!r}".encode()
        (received / f"{number}.bin").write_bytes(got)
        print(f"hostile agent: request {number}: {got[:60]!r}", flush=True)
    Path("calc.py").write_text("def add(a, b):\n    return a + b\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
