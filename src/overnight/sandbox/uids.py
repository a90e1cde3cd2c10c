"""The uids a root harness's sandboxes run as: one of its own for each sandbox alive on the
machine, so that ``RLIMIT_NPROC`` (counted per uid) binds per night.

A uid is held by an exclusive, non-blocking ``flock`` on one file per uid in a directory only
root may write. ``flock`` excludes another open of the same file in the same process as well
as in another one, so the threads of one fleet worker and the other harnesses of the machine
take different uids; and the kernel drops the lock when its descriptor closes, however it
closes (``UidClaim.release``, the claim being collected, the process exiting or killed with
-9), so a crashed harness never strands a uid.
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import itertools
import os
import pwd
import stat
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from overnight.core.errors import ConfigError

#: 1024 ids counting down from 65_533 (just below ``nobody``): a fleet worker runs about a
#: hundred nights at once, and a night builds a sandbox or two more for short checks (the
#: preflight probe, an audit), so this leaves a wide margin. Rarely named by accounts
#: (distributions allocate system users from the bottom and people from 1000 up); an id the
#: user or group database does name is skipped.
SANDBOX_IDS = range(65_533, 65_533 - 1024, -1)
NOBODY = 65_534

#: Names another range, ``FIRST-LAST`` (or one uid), for a machine where the default one is in
#: use (container id maps, a directory service that does not enumerate): every harness of the
#: machine must then name the same range.
RANGE_ENV = "OVERNIGHT_SANDBOX_UIDS"

_MAX_ID = 2**31 - 2

#: Where the locks live, the first that is safe. ``/run`` is a root-owned tmpfs for runtime
#: state: only root can create a directory in it, so no other user can plant or replace the
#: lock files, and it is empty after a reboot, when no lock can be held anyway. A machine
#: without a writable ``/run`` (some containers) uses ``/tmp``, whose sticky bit keeps others
#: from renaming a directory there; one that another user created first is refused (its
#: owner and mode are checked after it is opened), never used.
_LOCK_PLACES = (Path("/run/overnight-uids"), Path(f"/tmp/overnight-uids-{os.geteuid()}"))


class UidClaim:
    """One uid held for one sandbox, machine-wide, until ``release`` (idempotent; also done
    when the claim is collected and at exit, and by the kernel whenever the process ends)."""

    def __init__(self, uid: int, fd: int) -> None:
        self.uid = uid
        self._close = weakref.finalize(self, os.close, fd)

    @property
    def held(self) -> bool:
        return self._close.alive

    def release(self) -> None:
        self._close()  # a finalizer runs once: later calls do nothing


@dataclass(frozen=True)
class Allotment:
    """The uid (and gid of the same number) a sandbox gets."""

    uid: int
    claim: UidClaim | None
    """The hold on ``uid``; None when it is shared."""
    shared: str = ""
    """Why ``uid`` is shared with other sandboxes of the machine (empty: it is held)."""


def sandbox_ids(environ: Mapping[str, str] | None = None) -> range:
    """The range to take uids from: ``OVERNIGHT_SANDBOX_UIDS`` when set, else
    ``SANDBOX_IDS``; a ``ConfigError`` naming the variable when it is not a range."""
    text = (os.environ if environ is None else environ).get(RANGE_ENV, "").strip()
    if not text:
        return SANDBOX_IDS
    first, _, last = text.partition("-")
    try:
        low, high = sorted((int(first), int(last or first)))
    except ValueError:
        low = high = -1
    if low < 1 or high > _MAX_ID or low <= NOBODY <= high:
        raise ConfigError(
            RANGE_ENV,
            f"{text!r} is not a range of unprivileged uids",
            f"name one as FIRST-LAST from 1 to {_MAX_ID}, without {NOBODY} (nobody), e.g. "
            f"{SANDBOX_IDS[-1]}-{SANDBOX_IDS[0]}, or unset it",
        )
    return range(high, low - 1, -1)


def allot(ids: Iterable[int] | None = None) -> Allotment:
    """The first uid of ``ids`` (default: ``sandbox_ids()``) that no account or group is named
    for and no other sandbox holds, claimed. When every one is held, or the locks have no
    safe place, the first unnamed one, shared; ``nobody`` when every one is named."""
    unnamed = (i for i in (sandbox_ids() if ids is None else ids) if not _named(i))
    first = next(unnamed, None)
    if first is None:
        return Allotment(NOBODY, None, "every uid of the range is named in the user database")
    try:
        directory = _open_lock_directory()
    except (OSError, _Unsafe) as exc:
        return Allotment(first, None, f"the uids' locks have no safe place ({exc})")
    try:
        for uid in itertools.chain((first,), unnamed):  # lazily: a name only when reached
            claim = _take(directory, uid)
            if claim is not None:
                return Allotment(uid, claim)
    except OSError as exc:
        return Allotment(first, None, f"a uid's lock could not be taken ({exc})")
    finally:
        os.close(directory)
    return Allotment(first, None, "every uid of the range is held by another sandbox")


def lock_directory() -> Path:
    """Where the uids' lock files are (created when missing); ``OSError`` when nowhere safe."""
    for place in _LOCK_PLACES:
        with contextlib.suppress(OSError, _Unsafe):
            os.close(_open_safe(place))
            return place
    raise OSError(f"no safe place for the uids' locks among {', '.join(map(str, _LOCK_PLACES))}")


def _named(i: int) -> bool:
    try:
        pwd.getpwuid(i)
    except KeyError:
        try:
            grp.getgrgid(i)
        except KeyError:
            return False
    return True


class _Unsafe(Exception):
    """A lock directory someone else could change."""


def _open_lock_directory() -> int:
    problems = []
    for place in _LOCK_PLACES:
        try:
            return _open_safe(place)
        except (OSError, _Unsafe) as exc:
            problems.append(f"{place}: {exc}")
    raise _Unsafe("; ".join(problems))


def _open_safe(place: Path) -> int:
    """A descriptor on ``place``, created 0700 when missing, once its parent and itself have
    been shown to be writable by this user alone (or, for the parent, sticky)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    parent = os.open(place.parent, flags)
    try:
        up = os.fstat(parent)
        if up.st_uid not in (0, os.geteuid()) or (
            up.st_mode & 0o022 and not up.st_mode & stat.S_ISVTX
        ):
            raise _Unsafe(f"{place.parent} may be changed by another user")
        with contextlib.suppress(FileExistsError):
            os.mkdir(place.name, 0o700, dir_fd=parent)
        fd = os.open(place.name, flags | os.O_NOFOLLOW, dir_fd=parent)
    finally:
        os.close(parent)
    own = os.fstat(fd)
    if own.st_uid != os.geteuid() or own.st_mode & 0o022:
        os.close(fd)
        raise _Unsafe(f"owned by uid {own.st_uid}, mode {stat.S_IMODE(own.st_mode):o}")
    return fd


def _take(directory: int, uid: int) -> UidClaim | None:
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(str(uid), flags, 0o600, dir_fd=directory)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    # Who holds it, for a person looking at the directory; nothing reads it back.
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return UidClaim(uid, fd)
