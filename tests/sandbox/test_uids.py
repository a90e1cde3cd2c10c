"""A uid of its own for each sandbox a root harness builds, held machine-wide by a lock file
(``overnight.sandbox.uids``): against real bubblewrap and real processes. Each test takes its
uids from a small range of its own, so that the tests running beside it (other workers, other
ranges) cannot take them."""

from __future__ import annotations

import gc
import os
import pwd
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from overnight.core.errors import ConfigError
from overnight.process import run_command
from overnight.sandbox import Sandbox, SandboxSpec, build_sandbox, probe
from overnight.sandbox.identity import Identity
from overnight.sandbox.uids import RANGE_ENV, SANDBOX_IDS, lock_directory, sandbox_ids
from tests.helpers.bomb import BOMB, FORKS, release, wait_until_full
from tests.helpers.sandbox import bwrap

__all__ = ["bwrap"]

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="only a root harness drops to a uid")
with_bwrap = pytest.mark.usefixtures("bwrap")


def ids(first: int, count: int = 4) -> range:
    """``count`` uids counting down from ``first``; the test skips when an account has one."""
    out = range(first, first - count, -1)
    for uid in out:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            continue
        pytest.skip(f"uid {uid} is an account's on this machine: pick another range")
    return out


def sandbox(uids: range, **spec: object) -> Sandbox:
    return build_sandbox(SandboxSpec.model_validate(spec), sealed=[], uids=uids)


def uid_inside(sb: Sandbox, place: Path) -> int:
    return int(run_command("id -u", cwd=place, timeout_s=60, confine=sb).output)


@needs_root
@with_bwrap
def test_two_sandboxes_built_at_once_run_as_uids_of_their_own(tmp_path: Path) -> None:
    uids = ids(61_103)
    a, b = sandbox(uids), sandbox(uids)
    try:
        assert a.identity.uid != b.identity.uid and {a.identity.uid, b.identity.uid} <= set(uids)
        probe(a)
        probe(b)
        assert uid_inside(a, tmp_path) == a.identity.uid
        assert uid_inside(b, tmp_path) == b.identity.uid
        assert a.process_limit == f"per night: uid {a.identity.uid} of its own (RLIMIT_NPROC 4096)"
    finally:
        a.close()
        b.close()


@needs_root
@with_bwrap
def test_a_closed_sandbox_hands_its_uid_to_the_next_one() -> None:
    uids = ids(61_113)
    a, b = sandbox(uids), sandbox(uids)
    a.close()
    a.close()  # idempotent
    with pytest.raises(RuntimeError, match="was closed"):
        a.command(["true"], cwd=Path("/"))  # its uid may be another night's now
    c = sandbox(uids)
    assert c.identity.uid == a.identity.uid != b.identity.uid
    # One nobody closed gives its uid back once it is collected.
    held = c.identity.uid
    del c
    gc.collect()
    d = sandbox(uids)
    assert d.identity.uid == held
    for sb in (b, d):
        sb.close()


HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("held", flush=True)
sys.stdin.read()
"""


@needs_root
@with_bwrap
def test_a_uid_another_process_holds_is_skipped_until_that_process_is_killed() -> None:
    uids = ids(61_123)
    first = uids[0]
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock_directory() / str(first))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        skipped = sandbox(uids)
        assert skipped.identity.uid == uids[1]
        skipped.close()
    finally:
        holder.send_signal(signal.SIGKILL)  # no clean-up of its own: the kernel drops the lock
        holder.wait(timeout=30)
    after = sandbox(uids)
    assert after.identity.uid == first
    after.close()


@needs_root
@with_bwrap
def test_when_every_uid_is_held_the_next_sandbox_shares_one_and_says_so() -> None:
    uids = ids(61_133, count=1)
    own, shared = sandbox(uids), sandbox(uids)
    try:
        assert own.identity.uid == shared.identity.uid == uids[0]
        assert own.process_limit.startswith("per night:")
        assert shared.process_limit == (
            f"shared: uid {uids[0]}, with other sandboxes of this machine (every uid of the "
            "range is held by another sandbox; RLIMIT_NPROC 4096)"
        )
    finally:
        own.close()
        shared.close()
    assert sandbox(uids).process_limit.startswith("per night:")


@pytest.mark.parametrize("own_uids", [True, False], ids=["own uids", "one uid shared"])
@needs_root
@with_bwrap
def test_a_fork_bomb_takes_only_its_own_sandboxs_processes(tmp_path: Path, own_uids: bool) -> None:
    """While one sandbox's fork bomb holds every process its limit allows, another sandbox
    with the same limit starts eight: with uids of their own it can; forced onto one uid (the
    old design, through a range of one), it cannot."""
    uids = ids(61_143 if own_uids else 61_153, count=2 if own_uids else 1)
    bombed, other = tmp_path / "bombed", tmp_path / "other"
    bombed.mkdir()
    other.mkdir()
    (bombed / "bomb.py").write_text(BOMB)
    a, b = sandbox(uids, processes=32), sandbox(uids, processes=32)
    assert (a.identity.uid == b.identity.uid) is not own_uids
    said: dict[str, str] = {}

    def bomb() -> None:
        done = run_command(f"{sys.executable} bomb.py", cwd=bombed, timeout_s=150, confine=a)
        said["bomb"] = done.output

    thread = threading.Thread(target=bomb)
    thread.start()
    try:
        assert wait_until_full(bombed) < 32
        forks = run_command(FORKS, cwd=other, timeout_s=60, confine=b)
    finally:
        release(bombed)
        thread.join(timeout=150)
        a.close()
        b.close()
    assert "bomb released after" in said["bomb"], said
    if own_uids:
        assert forks.exit_code == 0 and "forked eight" in forks.output, forks.output
    else:
        assert forks.exit_code != 0, forks.output
        assert re.search("Cannot fork|Resource temporarily unavailable", forks.output), forks.output


def test_the_range_comes_from_the_environment_or_is_refused_naming_it() -> None:
    assert sandbox_ids({}) == SANDBOX_IDS and len(SANDBOX_IDS) == 1024
    assert SANDBOX_IDS[0] == 65_533 and 65_534 not in SANDBOX_IDS
    assert list(sandbox_ids({RANGE_ENV: "60000-60002"})) == [60002, 60001, 60000]
    assert list(sandbox_ids({RANGE_ENV: " 60005 "})) == [60005]
    for bad in ("0-10", "lots", "65000-65534", "1-99999999999"):
        with pytest.raises(ConfigError) as caught:
            sandbox_ids({RANGE_ENV: bad})
        assert caught.value.field == RANGE_ENV and "FIRST-LAST" in str(caught.value)


def test_each_identity_says_what_binds_its_process_limit() -> None:
    assert Identity(0, 0).process_limit(64).startswith("not bound: the sandbox ran as root")
    assert Identity(1000, 1000).process_limit(64) == (
        "per user: uid 1000, the harness's own, shared with its other processes (RLIMIT_NPROC 64)"
    )
    assert Identity(61_000, 61_000, setpriv="setpriv").process_limit(0) == (
        "none: [sandbox] processes = 0"
    )
