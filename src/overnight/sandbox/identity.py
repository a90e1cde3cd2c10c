"""Who a sandboxed command runs as, and the places it may write handed to it while it runs.

A harness running as root does not run the model's code as root: bubblewrap builds the
namespaces as root (no user namespace, which would map the inside back to root), keeps only
the capabilities to change identity, and ``setpriv`` then becomes an unprivileged uid and gid
with no groups, no capabilities (bounding set included) and ``no_new_privs``. So
``RLIMIT_NPROC``, file permissions and capabilities bind as for any user.

Each sandbox takes a uid (and the gid of the same number) of its own from a range the
machine's user and group databases do not name (``overnight.sandbox.uids``: 1024 ids, or
the range ``OVERNIGHT_SANDBOX_UIDS`` names), held machine-wide while the sandbox lives (until
``Sandbox.close``) by an exclusive lock on one file per uid, so that no other sandbox of
this process (the fleet runs its nights as threads of one worker) nor of another harness on
the machine takes it. ``RLIMIT_NPROC`` counts processes per uid, so ``[sandbox] processes``
then binds per night: one night's fork bomb cannot take the processes another night's verify
needs. When every uid of the range is held the sandbox shares one (and says so: ``shared``);
the limit is then shared too, as it was for every sandbox before.

The places it writes (the worktree or the verify checkout, the spec's ``writable`` paths)
are lent to that uid for the command: everything in them is chowned to it, and back to the
owner each entry had once the command and its whole namespace are gone (what the command
created goes to the owner of the lent place). Git records only the executable bit, so
ownership never reaches a commit. The walks never follow a symbolic link, and set-user-id
and set-group-id bits are cleared on the way back.

A harness that is not root runs the sandbox in an unprivileged user namespace, as its own
uid: nothing to drop and nothing to lend, and the process limit is that user's, shared with
the harness's other processes.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from overnight.sandbox.machine_view import SANDBOX_HOME
from overnight.sandbox.uids import NOBODY as _NOBODY
from overnight.sandbox.uids import UidClaim, allot

SANDBOX_USER = "overnight"


@dataclass(frozen=True)
class Identity:
    """The uid and gid a sandboxed command has, seen from outside the sandbox."""

    uid: int
    gid: int
    setpriv: str | None = None
    """The ``setpriv`` that drops to ``uid``/``gid``; None: no drop (not root, or cannot)."""
    note: str = ""
    """Why a sandbox that runs as root does (empty otherwise)."""
    shared: str = ""
    """Why a dropped-to uid is shared with other sandboxes of the machine, and so is their
    process limit (empty: the uid is this sandbox's own, or there is no drop)."""
    claim: UidClaim | None = field(default=None, compare=False, repr=False)
    """The machine-wide hold on ``uid`` (``overnight.sandbox.uids``); None: nothing held."""

    @property
    def drops(self) -> bool:
        return self.setpriv is not None

    @property
    def as_root(self) -> bool:
        return self.uid == 0

    def drop_argv(self) -> list[str]:
        """The words that start the command as ``uid``/``gid`` (empty: no drop)."""
        if self.setpriv is None:
            return []
        return [
            self.setpriv,
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]

    def release(self) -> None:
        """Hand the uid back to the machine's range (idempotent): only once no command of
        this identity runs any more."""
        if self.claim is not None:
            self.claim.release()

    def process_limit(self, processes: int) -> str:
        """Whose processes ``[sandbox] processes`` (RLIMIT_NPROC, counted per uid) counts:
        one sentence for the night's result and report."""
        if processes == 0:
            return "none: [sandbox] processes = 0"
        if self.as_root:
            return "not bound: the sandbox ran as root, which RLIMIT_NPROC does not limit"
        limit = f"RLIMIT_NPROC {processes}"
        if not self.drops:
            return (
                f"per user: uid {self.uid}, the harness's own, shared with its other "
                f"processes ({limit})"
            )
        if self.claim is None:
            why = f"{self.shared}; " if self.shared else ""
            return f"shared: uid {self.uid}, with other sandboxes of this machine ({why}{limit})"
        return f"per night: uid {self.uid} of its own ({limit})"


def dropped_identity(setpriv: str, ids: Iterable[int] | None = None) -> Identity:
    """An unprivileged uid (and the gid of the same number) for one sandbox: of its own from
    ``ids`` (default: the machine's range, ``overnight.sandbox.uids``), held until
    ``release``; shared, and saying why, when none is free."""
    got = allot(ids)
    return Identity(got.uid, got.uid, setpriv=setpriv, shared=got.shared, claim=got.claim)


# -- lending the writable places -----------------------------------------------------------

_Owners = dict[tuple[int, int], tuple[int, int]]
_Visit = Callable[[str, os.stat_result, "int | None"], None]


@dataclass
class _Lease:
    identity: Identity
    count: int
    owner: tuple[int, int]
    """The owner of the lent place itself: what the command created goes to it."""
    owners: _Owners
    """(device, inode) -> (uid, gid) of every entry chowned to the sandbox."""


_LEASES: dict[tuple[Path, int], _Lease] = {}
_LOCK = threading.Lock()


def lend(identity: Identity, place: Path) -> None:
    """Make ``place`` (a directory) the sandbox uid's own until ``give_back``; the worktree's
    ``.git`` entry stays the harness's. Leases are counted: a place lent twice (an MCP server
    and a command at once) goes back when both are done."""
    if not identity.drops:
        return
    key = (place, identity.uid)
    with _LOCK:
        lease = _LEASES.get(key)
        if lease is not None:
            lease.count += 1
            return
        top = os.lstat(place)
        lease = _Lease(identity, 1, (top.st_uid, top.st_gid), {})
        _LEASES[key] = lease
    _walk(place, lambda name, st, dir_fd: _to_sandbox(identity, lease, name, st, dir_fd))


def give_back(identity: Identity, place: Path) -> None:
    """End one lease of ``place``; the last one chowns every entry the sandbox uid owns back
    (to its owner before the lease, or to the place's owner for what the command made)."""
    if not identity.drops:
        return
    key = (place, identity.uid)
    with _LOCK:
        lease = _LEASES.get(key)
        if lease is None:
            return
        lease.count -= 1
        if lease.count > 0:
            return
        del _LEASES[key]
    if place.is_dir() and not place.is_symlink():
        _walk(place, lambda name, st, dir_fd: _to_owner(identity, lease, name, st, dir_fd))


def _walk(place: Path, visit: _Visit) -> None:
    top = os.lstat(place)
    with contextlib.suppress(OSError):
        visit(str(place), top, None)
    for _dir, dirs, files, dir_fd in os.fwalk(place, follow_symlinks=False):
        if _dir == str(place) and ".git" in dirs:
            dirs.remove(".git")  # git's business, never the sandbox's
        for name in [*dirs, *files]:
            if _dir == str(place) and name == ".git":
                continue
            try:
                st = os.lstat(name, dir_fd=dir_fd)
            except OSError:
                continue
            with contextlib.suppress(OSError):
                visit(name, st, dir_fd)


def _to_sandbox(
    identity: Identity, lease: _Lease, name: str, st: os.stat_result, dir_fd: int | None
) -> None:
    if stat.S_ISLNK(st.st_mode) or (st.st_uid, st.st_gid) == (identity.uid, identity.gid):
        return
    lease.owners[(st.st_dev, st.st_ino)] = (st.st_uid, st.st_gid)
    os.chown(name, identity.uid, identity.gid, dir_fd=dir_fd, follow_symlinks=False)


def _to_owner(
    identity: Identity, lease: _Lease, name: str, st: os.stat_result, dir_fd: int | None
) -> None:
    if st.st_uid != identity.uid and st.st_gid != identity.gid:
        return
    uid, gid = lease.owners.get((st.st_dev, st.st_ino), lease.owner)
    os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
    if st.st_mode & (stat.S_ISUID | stat.S_ISGID) and stat.S_ISREG(st.st_mode):
        os.chmod(name, stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID), dir_fd=dir_fd)


def _give_back_all() -> None:
    for (place, _uid), lease in list(_LEASES.items()):
        lease.count = 1
        with contextlib.suppress(OSError):
            give_back(lease.identity, place)


atexit.register(_give_back_all)


# -- the user database the sandbox sees ---------------------------------------------------

_ETC: dict[tuple[int, int], Path] = {}


def user_database(identity: Identity) -> tuple[Path, Path]:
    """A minimal ``passwd`` and ``group`` (root, the sandbox's user, nobody), written once per
    process into a directory of the harness's, so that no account of the machine is listed
    inside and the sandbox's uid has a name and a home."""
    key = (identity.uid, identity.gid)
    with _LOCK:
        place = _ETC.get(key)
        if place is None or not (place / "passwd").is_file() or not (place / "group").is_file():
            place = Path(tempfile.mkdtemp(prefix="overnight-sandbox-etc-"))
            os.chmod(place, 0o755)
            users, groups = _entries(identity)
            for name, text in (("passwd", users), ("group", groups)):
                (place / name).write_text(text, encoding="utf-8")
                os.chmod(place / name, 0o644)
            _ETC[key] = place
    return place / "passwd", place / "group"


def _entries(identity: Identity) -> tuple[str, str]:
    uid, gid = identity.uid, identity.gid
    users = {0: f"root:x:0:0:root:{SANDBOX_HOME if uid == 0 else '/root'}:/bin/sh"}
    users.setdefault(uid, f"{SANDBOX_USER}:x:{uid}:{gid}:sandbox:{SANDBOX_HOME}:/bin/sh")
    users.setdefault(_NOBODY, f"nobody:x:{_NOBODY}:{_NOBODY}:nobody:/nonexistent:/bin/false")
    groups = {0: "root:x:0:"}
    groups.setdefault(gid, f"{SANDBOX_USER}:x:{gid}:")
    groups.setdefault(_NOBODY, f"nogroup:x:{_NOBODY}:")
    return "\n".join(users.values()) + "\n", "\n".join(groups.values()) + "\n"


def _remove_databases() -> None:
    for place in _ETC.values():
        for name in ("passwd", "group"):
            with contextlib.suppress(OSError):
                (place / name).unlink()
        with contextlib.suppress(OSError):
            place.rmdir()


atexit.register(_remove_databases)
