"""The billing night's external tools: thin clients of the billing service at ``BILLING_URL``.

Each is called by the harness as ``fn(args, idempotency_key)``. Mutating tools send the key
as the ``Idempotency-Key`` header, so the provider itself turns a repeated request into the
first one's answer. Failures raise ``ToolFailure``: ``retryable=True`` when the effect may
have happened (a timeout, a dropped connection, a 5xx), ``retryable=False`` when the
service said no (a 4xx) and nothing happened.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from http.client import HTTPException
from typing import Any

from overnight.effects import ToolFailure

TIMEOUT_S = float(os.environ.get("BILLING_TIMEOUT_S", "10"))
ORDER_ID = TICKET_ID = r"[0-9]{1,12}"
EMAIL = r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}"


def _base_url() -> str:
    url = os.environ.get("BILLING_URL", "").rstrip("/")
    if not url:
        raise ToolFailure("BILLING_URL is not set: no billing service to call", retryable=False)
    return url


def _call(method: str, path: str, body: dict[str, Any] | None, key: str | None) -> Any:
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    if key:
        headers["Idempotency-Key"] = key
    request = urllib.request.Request(_base_url() + path, data, headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read() or b"{}").get("error") or exc.reason
        except (ValueError, AttributeError, OSError):
            detail = exc.reason
        # A 4xx (429 included) was turned away before anything happened; a 5xx may have
        # happened: the server got the request and failed somewhere, maybe after the effect.
        may_have_happened = exc.code >= 500
        raise ToolFailure(
            f"{method} {path}: {exc.code} {detail}", retryable=may_have_happened
        ) from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError, HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise ToolFailure(f"{method} {path}: no answer ({reason})", retryable=True) from exc
    except ValueError as exc:  # the answer was not JSON: it may have happened
        raise ToolFailure(f"{method} {path}: unreadable answer ({exc})", retryable=True) from exc


def _text(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ToolFailure(f"missing argument {name!r}", retryable=False)
    return value


def _canonical(args: dict[str, Any], name: str, pattern: str, form: str) -> str:
    """An identifier exactly as the provider writes it, or a refusal. Never cleaned up here:
    the harness derives the task key (``{order_id}:refund``) from the arguments as the model
    sent them, so " 4471" must not become a refund of order 4471 under another key."""
    value = _text(args, name)
    if not re.fullmatch(pattern, value):
        raise ToolFailure(f"{name} must be {form}, got {value!r}", retryable=False)
    return value


def lookup_charge(args: dict[str, Any], idempotency_key: str | None = None) -> Any:
    """Look up the charge of an order: amount, currency, customer email, refunded so far."""
    order_id = _canonical(args, "order_id", ORDER_ID, "digits only")
    return _call("GET", f"/charges/{order_id}", None, None)


def issue_refund(args: dict[str, Any], idempotency_key: str | None) -> Any:
    """Refund ``amount_cents`` of the order's charge to the customer. Moves money."""
    order_id = _canonical(args, "order_id", ORDER_ID, "digits only")
    amount = args.get("amount_cents")
    if not isinstance(amount, int) or isinstance(amount, bool):
        raise ToolFailure("amount_cents must be an integer number of cents", retryable=False)
    body = {"order_id": order_id, "amount_cents": amount}
    return _call("POST", "/refunds", body, idempotency_key)


def send_email(args: dict[str, Any], idempotency_key: str | None) -> Any:
    """Send the customer an email from a template (refund_issued, refund_denied, ...)."""
    to = _canonical(args, "to", EMAIL, "a lower-case address with no spaces")
    body = {"to": to, "template": _text(args, "template")}
    return _call("POST", "/emails", body, idempotency_key)


def write_ticket_note(args: dict[str, Any], idempotency_key: str | None) -> Any:
    """Add an internal note to a support ticket."""
    ticket = _canonical(args, "ticket_id", TICKET_ID, "digits only")
    body = {"text": _text(args, "text")}
    return _call("POST", f"/tickets/{ticket}/notes", body, idempotency_key)


def close_ticket(args: dict[str, Any], idempotency_key: str | None) -> Any:
    """Close a support ticket."""
    ticket = _canonical(args, "ticket_id", TICKET_ID, "digits only")
    return _call("POST", f"/tickets/{ticket}/close", {}, idempotency_key)
