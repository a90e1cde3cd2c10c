"""The bridge, run as the sandbox runs it (a file path, a Python without site-packages): a TCP
port inside whose connections reach the proxy's unix socket, a command run beside it, and the
command's exit code as its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anthropic
import httpx2
import pytest

import overnight.proxy.bridge
from overnight.core.budget import Usage
from overnight.testing.upstream import Turn, call, text, tool_calls
from tests.proxy.stack import TOKEN, anthropic_client, ask, stack

BRIDGE = Path(overnight.proxy.bridge.__file__)
#: As the sandbox runs it: by path, isolated, no site-packages (the standard library only).
PYTHON = [sys.executable, "-I", "-S"]


def bridge(sock: Path, *command: str, port: int = 0) -> list[str]:
    return [
        *PYTHON,
        str(BRIDGE),
        "--listen",
        f"127.0.0.1:{port}",
        "--socket",
        str(sock),
        "--",
        *command,
    ]


def short_socket(tmp_path: Path) -> Path:
    # a unix socket path must stay under ~100 bytes
    path = Path(f"/tmp/ovn-{os.getpid()}-{tmp_path.name[-12:]}.sock")
    return path


@pytest.fixture
def sock(tmp_path: Path) -> Iterator[Path]:
    path = short_socket(tmp_path)
    yield path
    path.unlink(missing_ok=True)


CLIENT = textwrap.dedent(
    """
    import http.client, json, os, sys
    port = int(os.environ["OVERNIGHT_BRIDGE_PORT"])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    results = []
    for stream in (False, True):
        body = {"model": "claude-sonnet-4-5", "max_tokens": 500, "stream": stream,
                "messages": [{"role": "user", "content": "hi"}]}
        conn.request("POST", "/v1/messages", body=json.dumps(body),
                     headers={"x-api-key": sys.argv[1], "content-type": "application/json"})
        response = conn.getresponse()
        results.append([response.status, response.read().decode()])
    print(json.dumps(results))
    sys.exit(3)
    """
)


def test_a_command_beside_the_bridge_reaches_the_proxy_through_the_unix_socket(
    sock: Path,
) -> None:
    bill = Usage(input=30, output=12, cache_read=700)
    with stack([text("through the bridge", bill)] * 2, socket_path=sock, tcp=False) as s:
        assert s.proxy.port is None and sock.is_socket()
        assert (sock.stat().st_mode & 0o777) == 0o600
        done = subprocess.run(
            bridge(sock, *PYTHON, "-c", CLIENT, TOKEN), capture_output=True, text=True, timeout=60
        )
        settled = s.meter.settled(2)

    assert done.returncode == 3, done.stderr
    whole, streamed = json.loads(done.stdout)
    assert whole[0] == 200 and json.loads(whole[1])["content"][0]["text"] == "through the bridge"
    assert streamed[0] == 200 and "event: message_stop" in streamed[1]
    assert [r.answer.usage for r in settled if r.answer] == [bill, bill]
    assert [r.asked.stream for r in settled] == [False, True]
    assert not sock.exists()  # the proxy removed its socket on close


@contextmanager
def bridged(sock: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A bridge whose command prints the port and waits for its stdin to close."""
    wait = (
        "import os, sys; print(os.environ['OVERNIGHT_BRIDGE_PORT'], flush=True); sys.stdin.read()"
    )
    process = subprocess.Popen(
        bridge(sock, *PYTHON, "-c", wait),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield process, port
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def test_the_sdks_stream_through_the_bridge(sock: Path) -> None:
    script = [
        tool_calls(call("run_tests", path="tests"), usage=Usage(input=400, output=40)),
        text("all green", Usage(input=500, output=8, cache_read=380)),
        text("and again", Usage(input=10, output=4)),
    ]
    with stack(script, socket_path=sock, tcp=False) as s, bridged(sock) as (process, port):
        url = f"http://127.0.0.1:{port}"
        _, tools = ask("anthropic", url, stream=True)
        answer, _ = ask("openai-chat", url, stream=True)
        again, _ = ask("openai-responses", url, stream=True)
        settled = s.meter.settled(3)
        assert process.stdin is not None
        process.stdin.close()
        assert process.wait(timeout=10) == 0

    assert tools == ["run_tests"]
    assert (answer, again) == ("all green", "and again")
    assert [r.answer.usage for r in settled if r.answer] == [t.usage for t in script]


def test_many_connections_at_once_through_the_bridge(sock: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with stack([text("ok")] * 16, socket_path=sock, tcp=False) as s, bridged(sock) as (_, port):
        url = f"http://127.0.0.1:{port}"
        with ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(lambda i: ask("anthropic", url, stream=bool(i % 2))[0], range(16))
            )
        s.meter.settled(16)

    assert answers == ["ok"] * 16


def test_the_bridge_passes_on_a_signal_and_the_exit_it_caused(sock: Path) -> None:
    with bridged(sock) as (process, _port):
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 128 + signal.SIGTERM


def test_the_bridge_without_a_proxy_drops_the_connection_and_keeps_running(sock: Path) -> None:
    with bridged(sock) as (process, port):
        with pytest.raises(httpx2.TransportError):
            httpx2.post(f"http://127.0.0.1:{port}/v1/messages", json={}, timeout=5)
        assert process.poll() is None
        with stack([text("late")], socket_path=sock, tcp=False) as s:
            message = anthropic_client(f"http://127.0.0.1:{port}").messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
            s.meter.settled(1)
        assert process.stdin is not None
        process.stdin.close()
        assert process.wait(timeout=10) == 0

    assert message.content[0].type == "text"


def test_a_command_that_cannot_run_is_127_and_a_port_in_use_is_70(sock: Path) -> None:
    missing = subprocess.run(
        bridge(sock, "/nonexistent/cli"), capture_output=True, text=True, timeout=30
    )
    assert missing.returncode == 127
    assert "cannot run /nonexistent/cli" in missing.stderr

    with bridged(sock) as (_process, port):
        taken = subprocess.run(
            bridge(sock, "true", port=port), capture_output=True, text=True, timeout=30
        )
    assert taken.returncode == 70
    assert "cannot listen" in taken.stderr


def test_a_stream_cut_upstream_is_cut_for_the_client_behind_the_bridge(sock: Path) -> None:
    cut = Turn(text="x " * 100, usage=Usage(input=5, output=50), cut_after=5)
    with stack([cut], socket_path=sock, tcp=False) as s, bridged(sock) as (_, port):
        with pytest.raises(anthropic.APIConnectionError, match="incomplete chunked read"):
            ask("anthropic", f"http://127.0.0.1:{port}", stream=True)
        [settled] = s.meter.settled(1)

    assert settled.failure is not None and settled.failure.sent is True
