"""Nights whose agent writes its own request bodies (``hostile_agent.py``, a ``command``
executor), run as a user runs them (``overnight run``), every request through the metering
proxy to a scripted upstream that bills what each request really asks for; and the checks
every such night must pass: nothing answered that was not reserved at or above its bill, the
booked total equal to what the upstream billed, the cap never passed, no byte the sandbox
received carrying the key."""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from overnight.core.budget import NANOS, Price, Usage
from overnight.store.journal import read_intact_records, read_journal
from overnight.testing.upstream import Fail, Received, ScriptedUpstream, Turn, text
from tests.executors.clis import UPSTREAM_KEY
from tests.executors.test_cli_nights import BUGGY, CHECK
from tests.helpers.nights import make_repo
from tests.helpers.toml import dumps

AGENT = Path(__file__).with_name("hostile_agent.py")
MODEL = "claude-sonnet-4-5"
OPENAI_MODEL = "gpt-5"
PRICE = Price.from_input_output(3.0, 15.0)
MARK = "x-client-request-id"


def hostile(n: int) -> dict[str, str]:
    """The header that marks the agent's ``n``-th request (on the proxy's allowlist)."""
    return {MARK: f"hostile-{n}"}


@dataclass
class Bill:
    """What the upstream billed one forwarded request: its tokens at a multiplier, and fees."""

    number: int
    usage: Usage
    rate: Decimal = Decimal(1)
    fees_usd: Decimal = Decimal(0)

    def nanos(self, price: Price = PRICE) -> int:
        return usage_nanos(self.usage, price, self.rate) + int(self.fees_usd * NANOS)


def usage_nanos(usage: Usage, price: Price, rate: Decimal) -> int:
    return usage.cost_nanos(price, rate)


@dataclass
class Night:
    tmp: Path
    plan: list[dict[str, Any]]
    api: str = "anthropic"
    usd: float = 5.0
    prices: dict[str, Any] = field(default_factory=dict)
    sandbox: dict[str, Any] = field(default_factory=dict)
    run_dir: Path = field(init=False)
    out: Path = field(init=False)

    def __post_init__(self) -> None:
        self.run_dir = self.tmp / "run"
        self.out = self.tmp / "out"

    def write(self) -> Path:
        repo = make_repo(self.tmp / "repo", BUGGY)
        plan_dir = self.tmp / "plan"
        plan_dir.mkdir()
        (plan_dir / "plan.json").write_text(json.dumps(self.plan))
        self.out.mkdir()
        model = MODEL if self.api == "anthropic" else OPENAI_MODEL
        spec = {
            "goal": "Every test passes.",
            "workspace": str(repo),
            "budget": {"usd": self.usd, "hours": 1.0},
            "predicate": {"command": CHECK, "timeout_s": 120},
            "model": {
                "provider": "anthropic" if self.api == "anthropic" else "openai",
                "name": model,
                "max_attempts": 1,
            },
            "prices": {model: {"input": 3.0, "output": 15.0, **self.prices}},
            "executor": {
                "kind": "command",
                "command": ["python3", str(AGENT), str(plan_dir), str(self.out)],
                "api": self.api,
                "timeout_s": 120,
            },
            "sandbox": {
                "readable": [str(plan_dir), str(AGENT.parent)],
                "writable": [str(self.out)],
                **self.sandbox,
            },
            "run": {"replan": False, "retries": 0},
            "tasks": [
                {
                    "id": "fix_add",
                    "title": "add adds",
                    "brief": "calc.add subtracts instead of adding. Fix calc.py.",
                    "verify": CHECK,
                    "timeout_s": 300,
                }
            ],
        }
        path = self.tmp / "night.toml"
        path.write_text(dumps(spec))
        return path

    def received(self) -> list[bytes]:
        folder = self.out / "received"
        return [
            (folder / f"{n}.bin").read_bytes() if (folder / f"{n}.bin").exists() else b""
            for n in range(len(self.plan))
        ]

    def spend(self) -> list[dict[str, Any]]:
        return [
            r for r in read_journal(self.run_dir / "spend.jsonl") if r.get("purpose") == "execute"
        ]

    def trace(self) -> list[dict[str, Any]]:
        return list(read_intact_records(self.run_dir / "trace.jsonl"))

    def result(self) -> dict[str, Any]:
        return dict(json.loads((self.run_dir / "result.json").read_text()))


def number_of(request: Received) -> int | None:
    mark = request.headers.get(MARK, "")
    return int(mark.removeprefix("hostile-")) if mark.startswith("hostile-") else None


def run_night(
    night: Night, bill: Callable[[int, Received], tuple[Turn | Fail, Bill]]
) -> tuple[subprocess.CompletedProcess[str], list[Received], list[Bill]]:
    """Run ``night`` against an upstream that answers the agent's ``n``-th request with
    ``bill(n, request)`` and anything else (the harness's own summary) with text."""
    spec = night.write()
    bills: list[Bill] = []

    def answer(request: Received) -> Turn | Fail:
        number = number_of(request)
        if number is None:
            return text("The night fixed add.")
        turn, billed = bill(number, request)
        bills.append(billed)
        return turn

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    with ScriptedUpstream(answer, key=UPSTREAM_KEY) as upstream:
        env.update(upstream.env())
        done = subprocess.run(
            [sys.executable, "-m", "overnight", "run", str(spec), "--run-dir", str(night.run_dir)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        forwarded = [r for r in upstream.requests if number_of(r) is not None]
    return done, forwarded, bills


def capped(usage: Usage, request: Received) -> Usage:
    """``usage`` with its output capped by the request's own cap, as the upstream caps it."""
    cap = request.max_tokens
    if cap is None or usage.output <= cap:
        return usage
    return Usage(
        input=usage.input,
        output=cap,
        cache_read=usage.cache_read,
        cache_write_5m=usage.cache_write_5m,
        cache_write_1h=usage.cache_write_1h,
    )


def assert_bounded(
    night: Night,
    done: subprocess.CompletedProcess[str],
    forwarded: list[Received],
    bills: list[Bill],
) -> dict[str, Any]:
    """The checks every night of this kind must pass; the result."""
    result = night.result()
    assert result["stop_reason"] in ("GOAL_MET", "QUEUE_EMPTY_GOAL_UNMET") or result[
        "stop_reason"
    ].startswith("BUDGET_EXHAUSTED"), done.stderr[-3000:]
    spend = night.spend()
    reserves = [r for r in spend if r["kind"] == "reserve"]
    booked = [r for r in spend if r["kind"] == "spend"]
    # nothing reached the upstream that was not held first, at or above what it billed
    assert len(reserves) == len(forwarded) == len(bills)
    for reserve, billed in zip(reserves, bills, strict=True):
        assert round(reserve["usd"] * NANOS) >= billed.nanos(), (reserve, billed)
    # what the night booked is what the upstream billed
    assert sum(round(r["usd"] * NANOS) for r in booked) == sum(b.nanos() for b in bills), (
        booked,
        bills,
    )
    # the cap is never passed
    assert result["spend"]["total_usd"] <= night.usd
    assert_no_key(night.received())
    # the audit re-prices every booking from its usage, multiplier and fees, and agrees
    audit = subprocess.run(
        [sys.executable, "-m", "overnight", "audit", str(night.run_dir), "--json", "--no-rerun"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    checked = json.loads(audit.stdout)
    money = [c for c in checked["checks"] if c["concern"] == "money"]
    assert money and all(c["verdict"] == "ok" for c in money), money
    assert checked["agrees"] is True, checked["disagreements"]
    return result


def assert_no_key(received: list[bytes]) -> None:
    """No byte the sandbox received carries the key: as written, decompressed, JSON-decoded
    (every escape undone, the parts of a stream joined), base64 or hex."""
    key = UPSTREAM_KEY.encode()
    forms = [key, key.hex().encode(), base64.b64encode(key)[:-4], UPSTREAM_KEY[::-1].encode()]
    for got in received:
        _head, _, body = got.partition(b"\n\n")
        texts = [got]
        for decode in (gzip.decompress, zlib.decompress):
            with contextlib.suppress(OSError, zlib.error, EOFError):
                texts.append(decode(body))
        for data in list(texts):
            for line in data.split(b"\n"):
                payload = line.removeprefix(b"data: ")
                try:
                    texts.append(json.dumps(json.loads(payload), ensure_ascii=False).encode())
                    texts.append("".join(_strings(json.loads(payload))).encode())
                except ValueError:
                    pass
            joined = "".join(
                s
                for line in data.split(b"\n")
                if line.startswith(b"data: ")
                for s in _strings(_loads(line[6:]))
            )
            texts.append(joined.encode())
        for data in texts:
            for form in forms:
                assert form not in data, f"the sandbox received the key: {data[:300]!r}"


def _loads(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except ValueError:
        return None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def refusals(night: Night) -> list[str]:
    """The trace's reasons for requests the proxy kept back."""
    return [
        str(e.get("detail", ""))
        for e in night.trace()
        if e.get("decision") in ("request_refused", "call_refused")
    ]
