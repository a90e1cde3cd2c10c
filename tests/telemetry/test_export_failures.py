"""A collector that is down, refuses or hangs never changes the night: the same ending, the
same result.json, no crash, and only a bounded wait at the end."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from overnight.config.telemetry import TelemetrySpec
from tests.helpers.nights import load_result, run_night
from tests.telemetry.collector import Collector, free_port
from tests.telemetry.nights import night_repo, night_spec, scripted_model

#: What differs between any two runs of the same night: ids, times, commits, places, and the
#: sandbox's uid (each night takes one of its own from the machine's free ones).
RUN_SPECIFIC = {
    *("run_id", "started_at", "ended_at", "trace_ref"),
    *("commit", "base_commit", "head", "name"),
    *("uid", "process_limit"),
}


def comparable(value: Any, places: list[str]) -> Any:
    if isinstance(value, dict):
        return {
            k: "<run>" if k in RUN_SPECIFIC else comparable(v, places) for k, v in value.items()
        }
    if isinstance(value, list):
        return [comparable(v, places) for v in value]
    if isinstance(value, str):
        for place in places:
            value = value.replace(place, "<place>")
        return re.sub(r"\d{8}-\d{6}-[0-9a-f]{6}", "<run>", value)
    return value


def one_night(where: Path, telemetry: dict[str, Any] | None) -> tuple[dict[str, Any], float]:
    spec = night_spec(night_repo(where), telemetry)
    started = time.monotonic()
    _, result = run_night(spec, where / "run", model=scripted_model())
    took = time.monotonic() - started
    written = load_result(where / "run")
    assert written["ending"] == result.ending
    return comparable(written, [str(where)]), took


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], float]:
    return one_night(tmp_path_factory.mktemp("baseline"), None)


@pytest.mark.parametrize("mode", ["down", "fail", "hang"])
def test_a_broken_collector_changes_nothing_in_the_night(
    tmp_path: Path, mode: str, baseline: tuple[dict[str, Any], float]
) -> None:
    expected, baseline_s = baseline
    assert expected["ending"] == "GOAL_MET"
    collector = None if mode == "down" else Collector(mode=mode).start()  # type: ignore[arg-type]
    try:
        url = f"http://127.0.0.1:{free_port()}" if collector is None else collector.url
        got, took = one_night(tmp_path, {"otlp_endpoint": url})
        if collector is not None:
            assert collector.posts >= 1  # the exporter did try
            assert collector.bodies == []
    finally:
        if collector is not None:
            collector.stop()
    assert got == expected
    # Default settings: at most about twice the export timeout on top of the night.
    bound = 2 * TelemetrySpec().export_timeout_s + 2.0
    assert took - baseline_s < bound, (took, baseline_s)


def test_a_collector_that_refuses_keeps_the_exit_code_of_the_cli(
    tmp_path: Path, baseline: tuple[dict[str, Any], float]
) -> None:
    """The same through the process a cron job runs: exit code and stdout's result.json."""
    import json
    import subprocess
    import sys

    from tests.helpers.nights import cli_env, spec_data, write_spec

    repo = night_repo(tmp_path)
    data = spec_data(
        repo,
        model=False,
        predicate="test -f made.txt",
        tasks=[{"id": "make", "command": "touch made.txt", "verify": "test -f made.txt"}],
        telemetry={"otlp_endpoint": f"http://127.0.0.1:{free_port()}", "export_timeout_s": 0.5},
    )
    spec = write_spec(tmp_path / "night.toml", data)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "overnight",
            "run",
            str(spec),
            "--json",
            "--quiet",
            "--run-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ending"] == "GOAL_MET"
