"""Alerts: who is told when a night ends, and how.

The endings table says how urgent each ending is (``none``, ``alert``, ``page``); the spec's
``[alerts]`` says what ``alert`` and ``page`` do: run a command with result.json on its
standard input, or POST result.json to a webhook. A failing alert is recorded in the result;
it never changes the ending or the exit code.

An alert command runs like every other command of the night: in a process group of its own,
with secrets scrubbed from its environment and its output in a file, so that neither a
background job it leaves behind nor its timeout can keep the night from ending.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from overnight.config.alerts import Action, AlertsSpec
from overnight.core.endings import ALERT, Ending
from overnight.core.errors import OvernightError
from overnight.process import run_command


def action_for(spec: AlertsSpec, ending: str, status: str) -> Action:
    if ending in spec.routes:
        return spec.routes[ending]
    if status in spec.routes:
        return spec.routes[status]
    return ALERT[Ending(ending)]  # type: ignore[return-value]


def send_alert(spec: AlertsSpec, result: dict[str, Any]) -> dict[str, Any] | None:
    """Carry out the alert a result calls for. Returns what happened (for the result), or None
    when nothing was to be done. Never raises."""
    action = action_for(spec, str(result["ending"]), str(result["status"]))
    if action == "none" or (spec.alert is None and spec.page is None):
        return None  # nothing asked for, or nobody to tell: not a failure
    how = spec.page if action == "page" else spec.alert
    if action == "page" and how is None:
        how = spec.alert
    if how is None:
        return {"action": action, "ok": False, "detail": f"no [alerts.{action}] is configured"}
    body = json.dumps(result, sort_keys=True).encode("utf-8")
    try:
        if how.command is not None:
            ran = run_command(
                how.command, cwd=_alert_cwd(), timeout_s=how.timeout_s, stdin=body, max_output=300
            )
            if ran.timed_out:
                return {
                    "action": action,
                    "via": "command",
                    "ok": False,
                    "detail": f"timed out after {how.timeout_s}s",
                }
            ok = ran.exit_code == 0
            tail = ran.output.strip()
            detail = "sent" if ok else f"command exited {ran.exit_code}: {tail}"
            return {"action": action, "via": "command", "ok": ok, "detail": detail}
        assert how.webhook is not None
        request = urllib.request.Request(
            how.webhook, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=how.timeout_s) as response:
            status = int(response.status)
        host = urlsplit(how.webhook).netloc  # not the path: it often holds a token
        return {
            "action": action,
            "via": f"webhook {host}",
            "ok": 200 <= status < 300,
            "detail": f"HTTP {status}",
        }
    except (urllib.error.URLError, OSError, ValueError, OvernightError) as exc:
        return {"action": action, "ok": False, "detail": f"could not send: {exc}"}


def _alert_cwd() -> Path:
    """Where an alert command runs: the current directory, or ``/`` if it is gone."""
    try:
        here = Path(os.getcwd())
    except OSError:
        return Path("/")
    return here if here.is_dir() else Path("/")
