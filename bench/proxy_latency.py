"""What the metering proxy adds to a model call: figures, not a timed test.

``python3 -m bench.proxy_latency`` starts the scripted upstream (``overnight.testing.upstream``)
and the proxy in front of it (on a TCP port, and on a unix socket reached through the bridge
in a subprocess, as a CLI in the sandbox reaches it), then makes the same calls, interleaved,
to the upstream directly, through the proxy's TCP port, and through the bridge:

- ``whole``: a non-streamed Anthropic Messages call, request to last byte;
- ``first_byte``: a streamed call, request to the first byte of its body (time to first
  streamed byte);
- ``stream``: the same streamed call, request to its last byte.

For each path it records the median and 99th percentile, and what the proxy adds to the direct
call at each (goal: under 2 ms at the median, for ``whole`` and ``first_byte``). The client is
one keep-alive ``httpx2.Client`` per path (as the SDKs hold one); the meter is the in-memory
``RecordingMeter``, so the ledger's own time is not in these figures. Each piece (upstream,
proxy, bridge, client) runs in a process of its own, as in a night; ``proxy_cpu_ms_per_call``
is the proxy process's CPU time per request, a figure the machine's load does not move much
(the latencies it does). The results go to ``bench/proxy_latency_results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: bench/proxy_latency.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2

import overnight.proxy.bridge
from overnight.core.budget import Usage
from overnight.proxy.server import MeteringProxy, upstreams_from_env
from overnight.testing.meters import RecordingMeter
from overnight.testing.upstream import Received, ScriptedUpstream, Turn

HERE = Path(__file__).resolve().parent
GOAL_MS = 2.0
KEY = "sk-bench-key"
TOKEN = "ovn-bench-token"
TURN = Turn(
    text="The failing assertion compared a float with an exact decimal; fixed with approx.",
    usage=Usage(input=1800, output=40, cache_read=12_000, cache_write_5m=300),
)


def body(stream: bool) -> bytes:
    content = "Fix the failing test in calc.py. " * 40  # a small but real-looking request
    data = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "stream": stream,
        "messages": [{"role": "user", "content": content}],
    }
    return json.dumps(data).encode()


def whole(client: httpx2.Client, url: str, key: str) -> float:
    start = time.perf_counter()
    response = client.post(f"{url}/v1/messages", content=body(False), headers=_headers(key))
    response.read()
    elapsed = time.perf_counter() - start
    assert response.status_code == 200, response.text
    return elapsed


def streamed(client: httpx2.Client, url: str, key: str) -> tuple[float, float]:
    """Seconds to the first byte of the body, and to its last."""
    start = time.perf_counter()
    with client.stream(
        "POST", f"{url}/v1/messages", content=body(True), headers=_headers(key)
    ) as response:
        chunks = response.iter_raw()
        next(chunks)
        first = time.perf_counter() - start
        for _ in chunks:
            pass
    assert response.status_code == 200
    return first, time.perf_counter() - start


def _headers(key: str) -> dict[str, str]:
    return {"x-api-key": key, "content-type": "application/json", "anthropic-version": "2023-06-01"}


def summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1e3 for s in seconds)
    return {
        "median_ms": round(statistics.median(ms), 3),
        "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 3),
        "mean_ms": round(statistics.fmean(ms), 3),
    }


def _serve(kind: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    """This file run as one piece of the bench in a process of its own: it prints what it
    serves on, and serves until its stdin closes."""
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve", kind, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def _stop(process: subprocess.Popen[str]) -> str:
    """Close its stdin, and what it printed last."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.close()
    last = process.stdout.read().strip()
    process.wait(timeout=30)
    return last


def serve(kind: str, args: list[str]) -> int:
    if kind == "upstream":

        def script(_request: Received) -> Turn:
            return TURN

        with ScriptedUpstream(script, key=KEY) as upstream:
            print(upstream.url, flush=True)
            sys.stdin.read()
        return 0
    if kind == "proxy":
        url, sock = args
        env = {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": KEY}
        with MeteringProxy(upstreams_from_env(env), socket_path=sock, tcp_port=0) as proxy:
            meter = RecordingMeter(max_output=4096)
            proxy.admit(TOKEN, meter)
            print(proxy.url, flush=True)
            cpu = time.process_time()
            sys.stdin.read()
            cpu = time.process_time() - cpu
            print(json.dumps({"cpu_s": cpu, "requests": len(meter.records)}), flush=True)
        return 0
    # the bridge, as the sandbox runs it: by path, isolated, no site-packages
    bridge = Path(overnight.proxy.bridge.__file__)
    python = [sys.executable, "-I", "-S"]
    wait = (
        "import os, sys; print(os.environ['OVERNIGHT_BRIDGE_PORT'], flush=True); sys.stdin.read()"
    )
    command = [*python, str(bridge), "--listen", "127.0.0.1:0", "--socket", args[0], "--"]
    return subprocess.call([*command, *python, "-c", wait])


def measure(calls: int, warmup: int) -> dict[str, Any]:
    sock = Path(tempfile.mkdtemp(prefix="ovn-bench-")) / "proxy.sock"
    upstream, upstream_url = _serve("upstream")
    proxy, proxy_url = _serve("proxy", upstream_url, str(sock))
    bridge, bridge_port = _serve("bridge", str(sock))
    try:
        paths: dict[str, tuple[str, str]] = {
            "direct": (upstream_url, KEY),
            "proxy_tcp": (proxy_url, TOKEN),
            "proxy_bridge": (f"http://127.0.0.1:{bridge_port}", TOKEN),
        }
        clients = {name: httpx2.Client(timeout=30) for name in paths}
        times: dict[str, dict[str, list[float]]] = {
            name: {"whole": [], "first_byte": [], "stream": []} for name in paths
        }
        for i in range(warmup + calls):
            for name, (url, key) in paths.items():
                w = whole(clients[name], url, key)
                first, last = streamed(clients[name], url, key)
                if i >= warmup:
                    times[name]["whole"].append(w)
                    times[name]["first_byte"].append(first)
                    times[name]["stream"].append(last)
        for client in clients.values():
            client.close()
    finally:
        _stop(bridge)
        spent = _stop(proxy)
        _stop(upstream)
        sock.parent.rmdir()
    cpu = json.loads(spent)
    figures: dict[str, Any] = {
        name: {kind: summary(values) for kind, values in kinds.items()}
        for name, kinds in times.items()
    }
    added: dict[str, Any] = {}
    for name in ("proxy_tcp", "proxy_bridge"):
        added[name] = {
            kind: {
                stat: round(figures[name][kind][stat] - figures["direct"][kind][stat], 3)
                for stat in ("median_ms", "p99_ms")
            }
            for kind in ("whole", "first_byte", "stream")
        }
    per_call = 1e3 * cpu["cpu_s"] / max(1, cpu["requests"])
    return {"paths": figures, "added": added, "proxy_cpu_ms_per_call": round(per_call, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.proxy_latency")
    parser.add_argument("--calls", type=int, default=1000, help="measured calls per path and kind")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--out", type=Path, default=HERE / "proxy_latency_results.json")
    parser.add_argument("--serve", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.serve[0], args.serve[1:])
    load_before = os.getloadavg()
    started = time.monotonic()
    measured = measure(args.calls, args.warmup)
    added = measured["added"]
    met = all(
        added[path][kind]["median_ms"] < GOAL_MS
        for path in ("proxy_tcp", "proxy_bridge")
        for kind in ("whole", "first_byte")
    )
    results = {
        "kind": "overnight-proxy-latency-bench",
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
        "seconds": round(time.monotonic() - started, 1),
        "calls": args.calls,
        "warmup": args.warmup,
        "what": (
            "Anthropic Messages calls to the scripted upstream: direct, through the proxy's TCP "
            "port, and through the bridge and the proxy's unix socket; 'added' is the proxied "
            "figure less the direct one at the same statistic"
        ),
        **measured,
        "goal": {"added_median_ms_under": GOAL_MS, "kinds": ["whole", "first_byte"]},
        "met": met,
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    for path in ("direct", "proxy_tcp", "proxy_bridge"):
        row = measured["paths"][path]
        print(
            f"{path:>13}: "
            + ", ".join(f"{k} {v['median_ms']:.2f}/{v['p99_ms']:.2f} ms" for k, v in row.items())
            + "  (median/p99)"
        )
    for path, kinds in added.items():
        print(
            f"added {path:>12}: "
            + ", ".join(
                f"{k} +{v['median_ms']:.2f}/+{v['p99_ms']:.2f} ms" for k, v in kinds.items()
            )
        )
    print(f"the proxy's CPU per call: {measured['proxy_cpu_ms_per_call']:.2f} ms")
    print(f"goal: under {GOAL_MS} ms added at the median: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
