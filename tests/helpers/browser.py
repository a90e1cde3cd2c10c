"""Headless Chromium for the tests that look at a page in a real browser (the HTML report,
the docs site).

Skipped when Chromium is not installed, except under ``CI=true``, where that is a failure
(.ci/run installs it). Every Chromium is bounded by a timeout and its whole process group is
killed afterwards, so no browser process outlives its test.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

#: Screenshots go here when OVERNIGHT_SCREENSHOTS names a folder (for a person to look at);
#: otherwise under the test's temporary directory, never into the repository.
SCREENSHOTS = os.environ.get("OVERNIGHT_SCREENSHOTS")
TIMEOUT_S = 60.0
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
)
#: A page's console output, as --enable-logging=stderr writes it:
#: ``[pid:tid:time:INFO:CONSOLE:12] "message", source: file:///... (12)`` (older builds write
#: ``CONSOLE(12)``). Every console message is logged at INFO whatever its level, so the level
#: cannot be told apart here.
CONSOLE = re.compile(r"CONSOLE[(:]")


@dataclass(frozen=True)
class Browsed:
    returncode: int
    stdout: str
    stderr: str

    def console(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if CONSOLE.search(line)]


def chromium_binary() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("chromium is not installed; under CI=true it must be (see .ci/run)")
    pytest.skip("chromium is not installed (apt-get install -y chromium)")


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def browse(binary: str, profile: Path, *args: str) -> Browsed:
    """One Chromium in its own process group, bounded by ``TIMEOUT_S``, group killed after."""
    proc = subprocess.Popen(
        [binary, *FLAGS, f"--user-data-dir={profile}", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        raise
    finally:
        _kill_group(proc)  # helpers (zygote, renderer, crash handler) share the group
        proc.wait()
    return Browsed(proc.returncode, out, err)


def screenshot_folder(tmp_path: Path) -> Path:
    folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height
