"""A small fake billing service: payments, email and support tickets behind one JSON API.

It behaves like a real provider where it matters for the example: every mutating request
may carry an ``Idempotency-Key`` header, and a key it has seen gets the first answer back
(same refund id, no second refund) instead of a second effect. A request without a key, or
with a new key, is a new effect: like the provider in a duplicate-refund incident, it does
not stop a second refund of the same order by itself.

API (all JSON):

- ``GET  /charges/<order_id>``          the charge, and what was refunded of it
- ``POST /refunds``        {order_id, amount_cents}   -> {id, order_id, amount_cents, ...}
- ``POST /emails``         {to, template}             -> {id, to, template, ...}
- ``POST /tickets/<id>/notes``  {text}                -> {id, ticket_id, text, ...}
- ``POST /tickets/<id>/close``                        -> {ticket_id, status, closed_at}
- ``GET  /state``          everything it has done (refunds, emails, notes, closed tickets,
  and every request it answered), for checks and tests
- ``POST /_faults``        {path, status, times, apply}: answer the next ``times`` requests
  whose path starts with ``path`` with ``status``, after applying them (``apply``: the
  ambiguous case, the effect happened and the answer says it failed) or not

State is kept in a JSON file (written atomically after every change), so a service that is
restarted remembers what it did, keys included.

Run it: ``python service.py --port 0 --state state.json`` prints its URL on the first line.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import json
import os
import random
import re
import signal
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: What the service knows before anything happens: one charge, one open ticket.
SEED: dict[str, Any] = {
    "charges": {
        "4471": {
            "order_id": "4471",
            "amount_cents": 2400,
            "currency": "usd",
            "customer_email": "dana.whitfield@example.com",
            "ticket_id": "88231",
            "status": "succeeded",
        }
    },
    "tickets": {
        "88231": {
            "id": "88231",
            "order_id": "4471",
            "subject": "Charged for an order that never shipped",
            "status": "open",
        }
    },
}

TEMPLATES = ("refund_issued", "refund_denied", "order_delayed")


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _empty_state() -> dict[str, Any]:
    return {
        **copy.deepcopy(SEED),
        "refunds": [],
        "emails": [],
        "notes": [],
        "closed": [],
        "requests": [],
        "idempotency": {},
        "seq": 0,
    }


def write_json_atomic(path: Path, data: Any) -> None:
    """Write beside, fsync, rename over, fsync the directory: the file is old or new, whole."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Billing:
    """The service's memory and rules, apart from HTTP (one lock; every change persisted)."""

    def __init__(
        self,
        state_path: Path | None = None,
        *,
        latency_s: tuple[float, float] = (0.0, 0.0),
        seed: int | None = None,
    ) -> None:
        self.state_path = state_path
        self.latency_s = latency_s
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.faults: list[dict[str, Any]] = []
        if state_path is not None and state_path.exists():
            self.state: dict[str, Any] = json.loads(state_path.read_text(encoding="utf-8"))
        else:
            self.state = _empty_state()
            self._save()

    # -- plumbing --------------------------------------------------------------------------

    def _save(self) -> None:
        if self.state_path is not None:
            write_json_atomic(self.state_path, self.state)

    def _pause(self) -> None:
        low, high = self.latency_s
        if high > 0:
            with self.lock:
                delay = self.random.uniform(low, high)
            time.sleep(delay)

    def _next_id(self, prefix: str) -> str:
        self.state["seq"] += 1
        return f"{prefix}_{self.state['seq']:06d}"

    def _fault_for(self, path: str) -> dict[str, Any] | None:
        for fault in self.faults:
            if path.startswith(fault["path"]) and fault["times"] > 0:
                fault["times"] -= 1
                return fault
        return None

    # -- the API ---------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, body: dict[str, Any], key: str | None
    ) -> tuple[int, Any, bool]:
        """Answer one request: (status, JSON body, replayed)."""
        if method == "GET":
            with self.lock:
                status, payload = self._get(path)
                if path not in ("/state", "/health"):  # what the checks read is not logged
                    entry = {"method": method, "path": path, "key": None, "status": status}
                    self.state["requests"].append({**entry, "at": _now()})
                    self._save()
            return status, payload, False
        if path == "/_faults":
            with self.lock:
                self.faults.append(
                    {
                        "path": str(body.get("path", "/")),
                        "status": int(body.get("status", 503)),
                        "times": int(body.get("times", 1)),
                        "apply": bool(body.get("apply", False)),
                    }
                )
            return 200, {"ok": True}, False
        self._pause()  # before the effect: a client can give up (or die) while it waits
        with self.lock:
            fault = self._fault_for(path)
            replayed = False
            if fault is not None and not fault["apply"]:
                status, payload = fault["status"], {"error": "injected failure (not applied)"}
            else:
                status, payload, replayed = self._post(path, body, key)
                if fault is not None:
                    status, payload = fault["status"], {"error": "injected failure (applied)"}
            self.state["requests"].append(
                {
                    "method": method,
                    "path": path,
                    "key": key,
                    "status": status,
                    "replayed": replayed,
                    "at": _now(),
                }
            )
            self._save()
        self._pause()  # after the effect: the answer can be lost on its way back
        return status, payload, replayed

    def _get(self, path: str) -> tuple[int, Any]:
        if path == "/state":
            return 200, self.snapshot()
        if path == "/health":
            return 200, {"ok": True}
        match = re.fullmatch(r"/charges/([^/]+)", path)
        if match:
            charge = self.state["charges"].get(match.group(1))
            if charge is None:
                return 404, {"error": f"no charge for order {match.group(1)}"}
            refunded = sum(
                r["amount_cents"]
                for r in self.state["refunds"]
                if r["order_id"] == charge["order_id"]
            )
            return 200, {**charge, "refunded_cents": refunded}
        return 404, {"error": f"no such resource: GET {path}"}

    def _post(self, path: str, body: dict[str, Any], key: str | None) -> tuple[int, Any, bool]:
        fingerprint = hashlib.sha256(
            json.dumps([path, body], sort_keys=True).encode("utf-8")
        ).hexdigest()
        if key is not None:
            seen = self.state["idempotency"].get(key)
            if seen is not None:
                if seen["fingerprint"] != fingerprint:
                    return (
                        422,
                        {
                            "error": f"idempotency key {key!r} was used for a different request "
                            f"({seen['path']})"
                        },
                        False,
                    )
                return seen["status"], seen["response"], True
        try:
            status, payload = 200, self._apply(path, body, key)
        except ApiError as exc:
            status, payload = exc.status, {"error": exc.message}
        if key is not None and status < 500:
            self.state["idempotency"][key] = {
                "path": path,
                "fingerprint": fingerprint,
                "status": status,
                "response": payload,
            }
        return status, payload, False

    def _apply(self, path: str, body: dict[str, Any], key: str | None) -> dict[str, Any]:
        if path == "/refunds":
            return self._refund(body, key)
        if path == "/emails":
            return self._email(body, key)
        match = re.fullmatch(r"/tickets/([^/]+)/(notes|close)", path)
        if match:
            ticket = self.state["tickets"].get(match.group(1))
            if ticket is None:
                raise ApiError(404, f"no ticket {match.group(1)}")
            if match.group(2) == "notes":
                return self._note(ticket, body, key)
            return self._close(ticket, key)
        raise ApiError(404, f"no such resource: POST {path}")

    def _refund(self, body: dict[str, Any], key: str | None) -> dict[str, Any]:
        order_id = str(body.get("order_id", ""))
        amount = body.get("amount_cents")
        if not order_id or not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
            raise ApiError(400, "a refund needs order_id and a positive integer amount_cents")
        charge = self.state["charges"].get(order_id)
        if charge is None:
            raise ApiError(404, f"no charge for order {order_id}")
        if amount > charge["amount_cents"]:
            raise ApiError(
                400, f"amount_cents {amount} is more than the charge ({charge['amount_cents']})"
            )
        refund = {
            "id": self._next_id("re"),
            "order_id": order_id,
            "amount_cents": amount,
            "currency": charge["currency"],
            "status": "succeeded",
            "idempotency_key": key,
            "created_at": _now(),
        }
        self.state["refunds"].append(refund)
        return refund

    def _email(self, body: dict[str, Any], key: str | None) -> dict[str, Any]:
        to, template = str(body.get("to", "")), str(body.get("template", ""))
        if "@" not in to:
            raise ApiError(400, f"not an email address: {to!r}")
        if template not in TEMPLATES:
            raise ApiError(400, f"unknown template {template!r}; known: {', '.join(TEMPLATES)}")
        email = {
            "id": self._next_id("em"),
            "to": to,
            "template": template,
            "status": "sent",
            "idempotency_key": key,
            "created_at": _now(),
        }
        self.state["emails"].append(email)
        return email

    def _note(self, ticket: dict[str, Any], body: dict[str, Any], key: str | None) -> Any:
        text = str(body.get("text", "")).strip()
        if not text:
            raise ApiError(400, "a note needs text")
        if ticket["status"] == "closed":
            raise ApiError(409, f"ticket {ticket['id']} is closed")
        note = {
            "id": self._next_id("nt"),
            "ticket_id": ticket["id"],
            "text": text,
            "idempotency_key": key,
            "created_at": _now(),
        }
        self.state["notes"].append(note)
        return note

    def _close(self, ticket: dict[str, Any], key: str | None) -> dict[str, Any]:
        if ticket["status"] != "closed":  # closing a closed ticket changes nothing
            ticket["status"] = "closed"
            ticket["closed_at"] = _now()
            self.state["closed"].append(
                {"ticket_id": ticket["id"], "idempotency_key": key, "at": ticket["closed_at"]}
            )
        return {"ticket_id": ticket["id"], "status": "closed", "closed_at": ticket["closed_at"]}

    def snapshot(self) -> dict[str, Any]:
        s = self.state
        return copy.deepcopy(
            {
                "charges": s["charges"],
                "tickets": s["tickets"],
                "refunds": s["refunds"],
                "emails": s["emails"],
                "notes": s["notes"],
                "closed": s["closed"],
                "requests": s["requests"],
            }
        )


class _Handler(BaseHTTPRequestHandler):
    server: BillingServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _answer(self, status: int, payload: Any, replayed: bool = False) -> None:
        data = json.dumps(payload, sort_keys=True).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if replayed:
            self.send_header("Idempotent-Replayed", "true")
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)

    def do_GET(self) -> None:
        status, payload, _ = self.server.billing.handle("GET", self.path, {}, None)
        self._answer(status, payload)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._answer(400, {"error": "the body is not JSON"})
            return
        if not isinstance(body, dict):
            self._answer(400, {"error": "the body must be a JSON object"})
            return
        key = self.headers.get("Idempotency-Key") or None
        status, payload, replayed = self.server.billing.handle("POST", self.path, body, key)
        self._answer(status, payload, replayed)


class BillingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, billing: Billing, port: int = 0, *, verbose: bool = False) -> None:
        self.billing = billing
        self.verbose = verbose
        super().__init__(("127.0.0.1", port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


def serve_in_thread(
    state_path: Path | None = None,
    *,
    port: int = 0,
    latency_s: tuple[float, float] = (0.0, 0.0),
    seed: int | None = None,
) -> tuple[BillingServer, threading.Thread]:
    """Start the service on a thread of this process; stop it with ``server.shutdown()`` and
    ``server.server_close()``."""
    server = BillingServer(Billing(state_path, latency_s=latency_s, seed=seed), port)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="billing", daemon=True
    )
    thread.start()
    return server, thread


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="A fake payment, email and ticket service.")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    p.add_argument("--state", type=Path, required=True, help="JSON file the service keeps")
    p.add_argument(
        "--latency-ms",
        default="0",
        help="random delay before and after each change, e.g. 5,60 (min,max milliseconds)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of the random delays")
    p.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = p.parse_args(argv)
    low, _, high = args.latency_ms.partition(",")
    latency = (float(low) / 1000.0, float(high or low) / 1000.0)
    server = BillingServer(
        Billing(args.state, latency_s=latency, seed=args.seed), args.port, verbose=args.verbose
    )

    def stop(_signum: int, _frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(server.url, flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
