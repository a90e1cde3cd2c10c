"""The process that ends a worker's commands when the worker dies.

A command a night runs lives in a process group (a session) of its own, so that it can be
ended whole; that also means it outlives a worker killed outright (kill -9, the out-of-memory
killer), and another worker resuming the night would then run beside it. A sandboxed command
dies with its worker (bubblewrap's ``--die-with-parent`` ends its PID namespace); for the
others the worker starts this guard, in a session of its own, holding the write end of a pipe
to its standard input. When the worker dies, the kernel closes that end: the guard reads EOF
and kills every process that carries the worker's mark in its environment (every command's
environment is a copy of the worker's), then exits.

    python -m overnight.fleet.guard MARK WORKER_PID
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

#: The environment variable carrying a worker's mark into every command its nights run.
MARK_ENV = "OVERNIGHT_FLEET_WORKER"


def marked(mark: str, spare: set[int]) -> list[int]:
    """Processes (of this PID namespace) whose environment carries ``mark``."""
    needle = f"{MARK_ENV}={mark}".encode()
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in spare:
            continue
        try:
            with open(os.path.join(entry.path, "environ"), "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def end_marked(mark: str, spare: set[int], rounds: int = 40) -> int:
    """SIGKILL every marked process until none is left (a fork may race the first round)."""
    killed = 0
    for _ in range(rounds):
        pids = marked(mark, spare)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.05)
    return killed


def main(argv: list[str]) -> int:
    mark, worker = argv[1], int(argv[2])
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only the pipe's end ends the guard
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):
        pass
    end_marked(mark, {os.getpid(), worker})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
