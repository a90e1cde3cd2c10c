"""A full disk ends the run in a named way, with result.json written.

The run directory sits on a small tmpfs that a task fills up; mounting needs root, so the test
is skipped where that is not possible.
"""

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from overnight.testing import ScriptedModel
from tests.helpers.nights import command_task, make_spec, run_night


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_task_that_fills_the_disk_ends_disk_full_with_a_result(
    repo: Path, small_disk: Path
) -> None:
    # Long titles make every checkpoint far larger than the few pages the harness frees on
    # its own (a log closed, a pid file removed), so the first write after the disk fills
    # fails whatever the filesystem's page accounting.
    pad = "x" * 40_000
    tasks = [
        command_task("t_1", "echo small > a.txt", "test -f a.txt", title=f"first {pad}"),
        command_task(
            "t_2", "head -c 30000000 /dev/zero > big.bin; true", "true", title=f"fill {pad}"
        ),
        command_task("t_3", "echo never > c.txt", "test -f c.txt", title=f"third {pad}"),
    ]
    spec = make_spec(repo, tasks=tasks, predicate="false")
    rd, r = run_night(spec, small_disk / "run", model=ScriptedModel())
    assert r.stop_reason == "UNRECOVERABLE_ERROR:disk_full", r.message
    assert r.exit_code == 4 and r.resumable is True
    data = json.loads((rd.path / "result.json").read_text())
    assert data["stop_reason"] == "UNRECOVERABLE_ERROR:disk_full"
    assert "t_1" in data["plan"]["done"]
    assert data["partial_output"]
    # result.json only fit because the megabyte set aside at the start was given back
    assert not rd.disk_reserve.exists()
