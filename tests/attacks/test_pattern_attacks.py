"""Attacks with the model's patterns: a regular expression or a glob that a backtracking
engine takes exponential time over. Neither is evaluated in the harness process, so the night
ends as any other, a stop during a search included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable

from tests.attacks.night import FIXED, AttackNight, write
from tests.helpers.kills import kill_group, overnight, start_cli
from tests.helpers.toml import dumps

#: (a+)+$ over a run of a's ending in b: Python's re backtracks through 2^n ways of cutting
#: the run before it gives up; ripgrep's engine answers in linear time.
CATASTROPHIC = "(a+)+$"
HAYSTACK = "a" * 5000 + "b\n"

#: Each * may take any share of a long name of a's before the final b fails to match.
STARRY = "*a*a*a*a*a*a*a*a*a*a*a*a*b"
LONG_NAME = "a" * 200


def test_a_catastrophic_regex_in_search_text_ends_normally(night: AttackNight) -> None:
    outcome = night.play(
        [
            write("haystack.txt", HAYSTACK),
            ("search_text", {"pattern": CATASTROPHIC}),
            write("calc.py", FIXED),
        ]
    )
    assert f"no matches for '{CATASTROPHIC}'" in night.tool_results()
    assert outcome.result["stop_reason"] == "GOAL_MET"
    night.assert_contained(outcome)


def test_a_glob_with_many_stars_in_list_files_ends_normally(night: AttackNight) -> None:
    outcome = night.play(
        [
            write(LONG_NAME, "x\n"),
            ("list_files", {"pattern": STARRY}),
            ("search_text", {"pattern": "x", "glob": STARRY}),
            write("calc.py", FIXED),
        ]
    )
    results = night.tool_results()
    assert f"no files matching '{STARRY}'" in results
    assert f"in files matching '{STARRY}'" in results
    assert outcome.result["stop_reason"] == "GOAL_MET"
    night.assert_contained(outcome)


def test_sigterm_during_a_search_ends_the_night_with_a_result(night: AttackNight) -> None:
    # A search that does not end by itself: a slow ripgrep on PATH (it marks the worktree
    # when it starts). Before the change, the catastrophic regex alone hung the harness.
    shim = night.tmp / "slow-bin"
    shim.mkdir()
    (shim / "rg").write_text("#!/bin/sh\ntouch .search-started\nexec sleep 600\n")
    (shim / "rg").chmod(0o755)
    night.script_path.write_text(
        json.dumps(
            {
                "execute": [
                    list(write("haystack.txt", HAYSTACK)),
                    ["search_text", {"pattern": CATASTROPHIC}],
                    list(write("calc.py", FIXED)),
                ]
            }
        )
    )
    night.spec_path.write_text(dumps(night.spec()))
    env = night.env()
    env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', os.defpath)}"
    started = night.run_dir / "worktree" / ".search-started"
    args = overnight("run", night.spec_path, "--run-dir", night.run_dir, "--quiet")
    proc = start_cli(args, env, night.tmp, log=night.tmp / "cli.log")
    try:
        # Before the change the search ran in the harness's own engine and no ripgrep ever
        # started: the signal is then sent once the model has asked for the search.
        if not _within(lambda: started.exists() or proc.poll() is not None, 60):
            assert _asked_to_search(night), "the night never reached the search"
        assert proc.poll() is None, "the night ended before the search"
        os.kill(proc.pid, signal.SIGTERM)  # the overnight process only, not its group
        try:
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            raise AssertionError("SIGTERM did not end the night during a search") from None
    finally:
        if proc.returncode is None:
            kill_group(proc)
    result = json.loads((night.run_dir / "result.json").read_text())
    assert started.exists(), "the search never ran"
    assert code == 2, (night.tmp / "cli.log").read_text()[-2000:]
    assert result["stop_reason"] == "TIME_LIMIT:sigterm"


def _within(check: Callable[[], bool], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def _asked_to_search(night: AttackNight) -> bool:
    return len([r for r in night.requests() if r.get("purpose") == "execute"]) >= 2
