"""SIGTERM while a model call hangs or a retry waits: the night ends within seconds, not when
the call or the wait would have, and the interrupted attempt is booked at its worst case."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.nights import cli_env, make_repo, spec_data, write_spec

OVERLOADED = json.dumps(
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
).encode()


class Provider:
    """A local stand-in for the Messages API that never answers (``hang``) or is overloaded
    and asks for a ten-minute wait (``overloaded``). Counts the requests it got."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        held = []
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            data = b""
            conn.settimeout(5)
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            self.requests += 1
            if self.mode == "hang":
                held.append(conn)  # read the request, never answer
                continue
            head = (
                "HTTP/1.1 529 Overloaded\r\ncontent-type: application/json\r\n"
                f"retry-after: 600\r\ncontent-length: {len(OVERLOADED)}\r\n"
                "connection: close\r\n\r\n"
            )
            conn.sendall(head.encode() + OVERLOADED)
            conn.close()
        for conn in held:
            conn.close()


@pytest.fixture
def provider(request: pytest.FixtureRequest) -> Iterator[Provider]:
    p = Provider(request.param)
    yield p
    p.stop.set()
    p.thread.join()
    p.sock.close()


@pytest.mark.parametrize("provider", ["hang", "overloaded"], indirect=True)
def test_sigterm_during_a_model_call_or_its_retry_wait_ends_the_night_in_seconds(
    tmp_path: Path, provider: Provider
) -> None:
    repo = make_repo(tmp_path / "repo")
    data = spec_data(repo, tasks=[{"id": "a1", "brief": "do it", "verify": "true"}])
    data["model"] = {
        "provider": "anthropic",
        "name": "claude-sonnet-4-5",
        "base_url": provider.url,
        "stream": False,
        "timeout_s": 600,
        "outage_limit_s": 3600,
    }
    del data["prices"]
    spec = write_spec(tmp_path / "night.toml", data)
    env = cli_env()
    env.update(ANTHROPIC_API_KEY="sk-ant-test-not-real", OVERNIGHT_HOME=str(tmp_path / "home"))
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "overnight", "run", str(spec), "--run-dir", str(run_dir), "--quiet"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    # The check before the night asks first (it gives up on a provider that never answers
    # within seconds and lets the night go on), then the night's own call.
    while provider.requests < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert provider.requests >= 2, "the night never called the provider"
    time.sleep(1.0)  # inside the call (hang) or the ten-minute retry wait (overloaded)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.monotonic() - sent
    assert took < 10, f"the drain took {took:.1f} s"
    assert code == 2, proc.stderr.read().decode() if proc.stderr else ""
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "TIME_LIMIT:sigterm"
    if provider.mode == "hang":
        # The provider had the request: the cut attempt may be billed, so it is booked.
        assert result["spend"]["total_usd"] > 0
        assert any(w["kind"] == "attempt_failed" for w in result["warnings"])
