"""A bounded fork bomb for the process-limit tests, and a command that needs a few processes.

The bomb forks until the kernel says EAGAIN (the sandbox's ``RLIMIT_NPROC``), never more than
``BOMB_CAP`` children whatever the limit, keeps them alive (paused, so they count), writes how
many it made to ``bomb-full`` in its working directory, then waits until ``release`` appears
there (two minutes at most). Its children die with the sandbox's PID namespace once it exits.
"""

from __future__ import annotations

import time
from pathlib import Path

BOMB_CAP = 400

BOMB = f"""
import os, signal, time
made = 0
while made < {BOMB_CAP}:
    try:
        pid = os.fork()
    except BlockingIOError:  # EAGAIN: the process limit holds
        break
    if pid == 0:
        signal.pause()
        os._exit(0)
    made += 1
with open("bomb-full", "w") as out:
    out.write(f"{{made}}\\n")
deadline = time.monotonic() + 120
while not os.path.exists("release") and time.monotonic() < deadline:
    time.sleep(0.05)
print("bomb released after", made, "children")
"""

#: A shell that starts eight processes at once and waits for them: a verify with a few
#: subprocesses of its own, as a test suite has.
FORKS = "for i in 1 2 3 4 5 6 7 8; do sleep 0.2 & done; wait; echo forked eight"


def wait_until_full(place: Path, timeout_s: float = 60.0) -> int:
    """How many children the bomb working in ``place`` made, once it has met its limit."""
    marker = place / "bomb-full"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = marker.read_text() if marker.exists() else ""
        if text.endswith("\n"):
            return int(text)
        time.sleep(0.05)
    raise AssertionError(f"the bomb in {place} never met its process limit")


def release(place: Path) -> None:
    (place / "release").write_text("")
