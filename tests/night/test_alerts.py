"""Alerts: the right people are told, and a failing alert changes nothing but its own record."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from overnight.config.alerts import AlertsSpec
from overnight.night.alerts import send_alert
from overnight.testing import ScriptedModel
from tests.helpers.nights import command_task, make_spec, run_night


@pytest.fixture
def hook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(json.loads(body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/secret-token", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def drained(repo: Path, alerts: dict[str, Any], **kw: Any) -> Any:
    tasks = [command_task("t_1", "true", "true")]
    return make_spec(repo, tasks=tasks, predicate="false", alerts=alerts, **kw)


def test_a_command_alert_gets_result_json_on_stdin(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "alert.json"
    spec = drained(repo, {"alert": {"command": f"cat > {out}"}})
    rd, r = run_night(spec, tmp_path / "run", model=ScriptedModel())
    assert r.stop_reason == "QUEUE_EMPTY_GOAL_UNMET"
    sent = json.loads(out.read_text())
    assert sent["stop_reason"] == "QUEUE_EMPTY_GOAL_UNMET" and sent["run_id"] == r.run_id
    [record] = r.alerts
    assert record["ok"] is True and record["action"] == "alert"
    assert json.loads((rd.path / "result.json").read_text())["alerts"] == [record]


def test_a_failing_alert_is_recorded_and_changes_nothing_else(repo: Path, tmp_path: Path) -> None:
    spec = drained(repo, {"alert": {"command": "echo no mail server >&2; exit 7"}})
    _rd, r = run_night(spec, tmp_path / "run", model=ScriptedModel())
    assert (r.stop_reason, r.exit_code, r.status) == ("QUEUE_EMPTY_GOAL_UNMET", 3, "FAILURE")
    [record] = r.alerts
    assert record["ok"] is False and "exited 7" in record["detail"]
    assert "no mail server" in record["detail"]


def test_webhook_and_page_for_drift(
    repo: Path, tmp_path: Path, hook: tuple[str, list[dict[str, Any]]]
) -> None:
    url, received = hook
    tasks = [command_task(f"t_{i}", "true", "true") for i in range(3)]
    verdict = {"reasoning": "off", "off_goal_task_ids": ["t_2"], "drift_score": 0.9}
    spec = make_spec(
        repo,
        tasks=tasks,
        predicate="false",
        run={"drift_every": 1},
        alerts={"alert": {"command": "exit 0"}, "page": {"webhook": url}},
    )
    _, r = run_night(spec, tmp_path / "run", model=ScriptedModel(drift=verdict))
    assert r.stop_reason == "DRIFT_DETECTED"
    [record] = r.alerts
    assert record["action"] == "page" and record["ok"] is True
    assert "secret-token" not in json.dumps(record)  # the URL's path is not echoed
    [payload] = received
    assert payload["stop_reason"] == "DRIFT_DETECTED"


def test_an_unreachable_webhook_is_a_recorded_failure(repo: Path, tmp_path: Path) -> None:
    spec = drained(repo, {"alert": {"webhook": "http://127.0.0.1:9/nowhere", "timeout_s": 2}})
    _, r = run_night(spec, tmp_path / "run", model=ScriptedModel())
    assert r.exit_code == 3
    [record] = r.alerts
    assert record["ok"] is False and "could not send" in record["detail"]


def test_success_is_quiet_unless_routed(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "alert.json"
    tasks = [command_task("t_1", "touch ok", "test -f ok")]
    quiet = make_spec(
        repo, tasks=tasks, predicate="test -f ok", alerts={"alert": {"command": f"cat > {out}"}}
    )
    _, r = run_night(quiet, tmp_path / "run1", model=ScriptedModel())
    assert r.stop_reason == "GOAL_MET" and r.alerts == [] and not out.exists()
    routed = make_spec(
        repo,
        tasks=tasks,
        predicate="test -f ok",
        alerts={"alert": {"command": f"cat > {out}"}, "routes": {"SUCCESS": "alert"}},
    )
    _, r = run_night(routed, tmp_path / "run2", model=ScriptedModel())
    assert r.alerts[0]["ok"] is True and out.exists()


def test_a_page_without_a_page_action_falls_back_to_alert(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "alert.json"
    spec = drained(
        repo, {"alert": {"command": f"cat > {out}"}, "routes": {"QUEUE_EMPTY_GOAL_UNMET": "page"}}
    )
    _, r = run_night(spec, tmp_path / "run", model=ScriptedModel())
    assert r.alerts[0]["action"] == "page" and r.alerts[0]["ok"] is True and out.exists()


@pytest.mark.parametrize(
    "alerts",
    [
        {"alert": {}},
        {"alert": {"command": "x", "webhook": "http://h"}},
        {"alert": {"webhook": "ftp://h"}},
        {"routes": {"MAYBE": "alert"}},
        {"routes": {"GOAL_MET": "shout"}},
    ],
)
def test_bad_alert_specs_are_configuration_errors(repo: Path, alerts: dict[str, Any]) -> None:
    from overnight.core.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        make_spec(repo, tasks=[command_task("t", "true", "true")], alerts=alerts)
    assert info.value.field.startswith("alerts")


def test_no_alerts_configured_records_nothing(repo: Path, tmp_path: Path) -> None:
    _, r = run_night(drained(repo, {}), tmp_path / "run", model=ScriptedModel())
    assert r.exit_code == 3 and r.alerts == []


def test_a_route_to_an_unconfigured_action_is_recorded(repo: Path, tmp_path: Path) -> None:
    spec = drained(repo, {"page": {"command": "exit 0"}})  # FAILURE routes to "alert"
    _, r = run_night(spec, tmp_path / "run", model=ScriptedModel())
    [record] = r.alerts
    assert record["ok"] is False and "no [alerts.alert]" in record["detail"]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def test_an_alert_command_runs_in_a_process_group_of_its_own(tmp_path: Path) -> None:
    """An alert that leaves a background job behind: the job holds the command's output open,
    which used to keep the alert waiting until its timeout (and the job running after it). Like
    every other command, the alert's whole group is ended once it exits."""
    pid_file, late = tmp_path / "job.pid", tmp_path / "late"
    command = f"(sleep 20; touch '{late}') & echo $! > '{pid_file}'; cat > /dev/null; echo sent"
    spec = AlertsSpec.model_validate({"alert": {"command": command, "timeout_s": 10}})
    result = {"ending": "QUEUE_EMPTY_GOAL_UNMET", "status": "FAILURE", "run_id": "r"}

    start = time.monotonic()
    record = send_alert(spec, result)
    took = time.monotonic() - start

    assert record is not None and record["ok"] is True and record["detail"] == "sent"
    assert took < 8, f"the alert waited {took:.1f} s on a job it left behind"
    job = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(job) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(job), "the alert's background job outlived it"


def test_an_alert_command_past_its_timeout_is_ended(tmp_path: Path) -> None:
    spec = AlertsSpec.model_validate({"alert": {"command": "sleep 30", "timeout_s": 0.5}})
    result = {"ending": "QUEUE_EMPTY_GOAL_UNMET", "status": "FAILURE", "run_id": "r"}

    start = time.monotonic()
    record = send_alert(spec, result)

    assert time.monotonic() - start < 8
    assert record == {
        "action": "alert",
        "via": "command",
        "ok": False,
        "detail": "timed out after 0.5s",
    }
