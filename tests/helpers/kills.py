"""Driving the CLI as a real process that can be killed: process groups, signals, leftovers.

Every CLI started here gets a marker in its environment (``OVERNIGHT_TEST_MARK``). Commands
the harness runs inherit it, even though they live in process groups (sessions) of their
own, so a test can find and end everything a run started, whatever happened to the run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.helpers.nights import cli_env

MARK = "OVERNIGHT_TEST_MARK"

#: The exit codes that are a run's own verdict (not a usage error, not a kill).
RUN_EXIT_CODES = frozenset({0, 2, 3, 4})


def marked_env(extra_path: Path | None = None) -> tuple[dict[str, str], str]:
    """``cli_env()`` plus a marker of its own; returns the environment and the marker."""
    mark = uuid.uuid4().hex
    env = cli_env(extra_path)
    env[MARK] = mark
    return env, mark


def overnight(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "overnight", *(str(a) for a in args)]


def start_cli(
    args: list[str], env: dict[str, str], cwd: Path, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start the CLI as the leader of a process group (a session) of its own."""
    sink = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        return subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            start_new_session=True,
        )
    finally:
        if log is not None:
            sink.close()  # type: ignore[union-attr]


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the whole process group of ``proc`` and reap ``proc``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def kill_everything(proc: subprocess.Popen[bytes], mark: str) -> None:
    """What a power cut or a container kill does: ``proc``'s group and every process group
    carrying ``mark`` (the commands it runs have sessions of their own) die at one instant.

    Everything is stopped first (SIGSTOP cannot be caught), found, and only then killed, so
    nothing moves on between the first kill and the last.
    """
    groups = {proc.pid}
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGSTOP)
    while True:
        found = set()
        for pid in marked_pids(mark):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                found.add(os.getpgid(pid))
        if found <= groups:
            break
        for pgid in found - groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGSTOP)
        groups |= found
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    proc.wait()
    kill_marked(mark)


def run_cli(
    args: list[str], env: dict[str, str], cwd: Path, timeout: float = 60.0, log: Path | None = None
) -> int:
    """Run the CLI to its end and return its exit code; on a timeout, kill it and fail."""
    proc = start_cli(args, env, cwd, log)
    try:
        return proc.wait(timeout=timeout)
    finally:
        if proc.returncode is None:
            kill_group(proc)


def _stat_fields(pid: str) -> list[bytes] | None:
    try:
        stat = Path("/proc", pid, "stat").read_bytes()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def is_running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    fields = _stat_fields(str(pid))
    return fields is not None and fields[0] not in (b"Z", b"X")


def group_running(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is running (zombies do not count)."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(entry.name)
            if fields and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X"):
                return True
    return False


def marked_pids(mark: str) -> list[int]:
    """Running processes whose environment carries ``mark`` (this process excluded)."""
    needle = f"{MARK}={mark}".encode()
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and is_running(int(entry.name)):
            found.append(int(entry.name))
    return found


def kill_marked(mark: str, deadline_s: float = 10.0) -> list[int]:
    """SIGKILL every process carrying ``mark``, and its group, until none is left running.
    Returns the pids found on the first pass."""
    first: list[int] | None = None
    end = time.monotonic() + deadline_s
    while True:
        pids = marked_pids(mark)
        if first is None:
            first = pids
        if not pids:
            return first
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > end:
            raise AssertionError(f"processes marked {mark} would not die: {pids}")
        time.sleep(0.01)


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)
