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
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from overnight.core.endings import ALERT, Ending
from overnight.core.errors import OvernightError
from overnight.process import run_command

Action = Literal["none", "alert", "page"]


class AlertAction(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    command: str | None = None
    """A shell command run with result.json on its standard input (secrets scrubbed from its
    environment)."""
    webhook: str | None = None
    """A URL that receives result.json as a JSON POST."""
    timeout_s: float = Field(default=30.0, gt=0)
    """Seconds before the command or the POST is abandoned (and recorded as failed)."""

    @model_validator(mode="after")
    def _one_way(self) -> AlertAction:
        if (self.command is None) == (self.webhook is None):
            raise ValueError("an alert action has exactly one of `command` or `webhook`")
        if self.webhook is not None and urlsplit(self.webhook).scheme not in ("http", "https"):
            raise ValueError("webhook must be an http:// or https:// URL")
        return self


class AlertsSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    alert: AlertAction | None = None
    """What ``alert`` does (by default: PARTIAL and FAILURE endings)."""
    page: AlertAction | None = None
    """What ``page`` does (by default: DRIFT_DETECTED, the run was spending on the wrong
    problem). Without a ``page`` action, a page falls back to ``alert``."""
    routes: dict[str, Action] = Field(default_factory=dict)
    """Override the urgency of an ending or a class, e.g. ``QUEUE_EMPTY_GOAL_UNMET = "page"``
    or ``SUCCESS = "alert"``. Endings win over classes."""

    @model_validator(mode="after")
    def _known_routes(self) -> AlertsSpec:
        known = {str(e) for e in Ending} | {"SUCCESS", "PARTIAL", "FAILURE"}
        unknown = sorted(set(self.routes) - known)
        if unknown:
            raise ValueError(f"unknown endings or classes in routes: {unknown}")
        return self


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
