"""The OS sandbox: every command the model can influence runs inside bubblewrap.

What a sandboxed command sees:

* an allowlist of the machine, read-only (``overnight.sandbox.machine_view``): the system's
  directories, the parts of ``/etc`` programs read, a ``passwd`` and ``group`` of its own,
  the toolchains found through ``PATH`` (their installation prefix: a virtualenv,
  ``~/.pyenv``, ``~/.cargo``), the Python running the harness and the spec's ``readable``
  paths. Nothing else exists inside: not ``/var``, ``/srv``, ``/home``, ``/root``,
  ``/run``, ``/etc/shadow``;
* writable: the directory it works in (the worktree, or the clean checkout a verify runs
  on), a private ``/tmp`` (its home inside) and the spec's ``[sandbox] writable`` paths;
* nothing of the places that hold the run and the user, even where they lie inside a tree
  it is shown: the run directory, the workspace checkout and its git directory,
  ``$OVERNIGHT_HOME``, the effects ledger's directory and ``$HOME`` are empty and read-only;
* the worktree's ``.git`` file read-only: git metadata is the harness's business;
* its own PID namespace (the harness's processes, and their environments, do not exist in
  its ``/proc``), a new session, no capabilities, and a network namespace with loopback only
  unless ``network = true``;
* an unprivileged uid outside the sandbox too, when the harness is root: one of its own for
  each sandbox, held until ``Sandbox.close`` (``overnight.sandbox.identity``);
* an environment built from an allowlist, never a copy of the harness's;
* resource limits (address space, processes, file size, CPU seconds), set by ``prlimit``
  before bubblewrap starts, so that every process inside inherits them.

When bubblewrap's own process ends (the command finished, a timeout, a stop, or the harness
itself was killed: ``--die-with-parent``), the namespace's first process dies and the kernel
ends every process in the namespace, grandchildren that called ``setsid`` included.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from overnight.config.sandbox import SandboxSpec
from overnight.sandbox.identity import (
    Identity,
    dropped_identity,
    give_back,
    lend,
    user_database,
)
from overnight.sandbox.machine_view import (
    SANDBOX_HOME as SANDBOX_HOME,
)
from overnight.sandbox.machine_view import (
    SANDBOX_TMP,
    SYSTEM,
    etc_entries,
    system_entries,
)

#: Variables passed through when the harness has them, besides the spec's ``env`` names.
PASSED_VARIABLES = ("LANG", "TZ", "TERM")
PASSED_PREFIXES = ("LC_",)

#: Directories that are never hidden whatever the spec's paths say (hiding them would hide
#: the system the commands run on).
_SYSTEM_ROOTS = frozenset(
    Path(p) for p in ("/", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/dev", "/proc")
)

#: A PATH entry with one of these names belongs to the installation prefix above it.
_PREFIX_CHILDREN = frozenset({"bin", "sbin", "shims"})

MIB = 1 << 20


class SandboxUnavailable(Exception):
    """The sandbox cannot run on this machine: ``problem`` says why, ``fix`` what to do."""

    def __init__(self, problem: str, fix: str) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem} (fix: {fix})")


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def _within(path: Path, root: Path) -> bool:
    # By text: both are absolute and normal, and ``root in path.parents`` builds every parent
    # of ``path`` each time (thousands of calls for one command's mounts).
    inside, top = str(path), str(root)
    return inside == top or inside.startswith(top if top.endswith("/") else top + "/")


@dataclass(frozen=True)
class Layout:
    """Which places a sandboxed command may not see, and which it may still read."""

    hidden: tuple[Path, ...]
    """Shown as empty read-only directories."""
    sealed: tuple[Path, ...]
    """The hidden places nothing may bring back (run directory, workspace, ...)."""
    readable: tuple[tuple[Path, Path], ...]
    """``(source, destination)`` pairs bound read-only back into hidden places."""
    writable: tuple[Path, ...]
    """Extra writable paths (the spec's ``writable``)."""


def plan_layout(
    *,
    sealed: Iterable[Path],
    home: Path | None,
    readable: Iterable[Path] = (),
    writable: Iterable[Path] = (),
    path_entries: Iterable[str] | None = None,
    python_prefixes: Iterable[str] | None = None,
) -> Layout:
    """Work out what to hide and what to bring back.

    ``sealed`` are the places that must stay invisible (the run directory, the workspace,
    its git directory, ``$OVERNIGHT_HOME``, the effects ledger's directory); ``home`` is
    hidden too, but the toolchains found in it through ``PATH`` (and the Python prefixes)
    come back read-only, as do the spec's ``readable`` paths. Nothing that would contain a
    sealed place comes back: a toolchain root that does is narrowed to the ``PATH`` entry
    itself, or left out.
    """
    sealed_real = sorted({_real(p) for p in sealed} - _SYSTEM_ROOTS, key=lambda p: len(p.parts))
    hidden = list(sealed_real)
    if home is not None:
        home_real = _real(home)
        if home_real not in _SYSTEM_ROOTS:
            hidden.append(home_real)
    hidden_set = sorted(set(hidden), key=lambda p: len(p.parts))
    covering = [*hidden_set, Path(SANDBOX_TMP)]

    forbidden = [*sealed_real, *([_real(home)] if home is not None else [])]

    def under_hidden(path: Path) -> bool:
        return any(_within(path, h) for h in covering)

    def too_wide(path: Path) -> bool:
        return any(_within(f, path) for f in forbidden)

    system = [Path(p) for p in SYSTEM] + [_real(p) for p in SYSTEM if os.path.exists(p)]

    def shown_anyway(path: Path) -> bool:
        return any(_within(path, s) for s in system) and not under_hidden(path)

    candidates: list[Path] = []
    entries = os.environ.get("PATH", "").split(os.pathsep) if path_entries is None else path_entries
    for entry in entries:
        if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        lexical = Path(os.path.normpath(entry))
        for form in dict.fromkeys((lexical, _real(lexical))):
            prefix = form.parent if form.name in _PREFIX_CHILDREN else form
            candidates.append(form if too_wide(prefix) else prefix)
    prefixes = (
        {sys.prefix, sys.base_prefix, sys.exec_prefix}
        if python_prefixes is None
        else set(python_prefixes)
    )
    candidates += [Path(p) for p in sorted(prefixes) if p]
    candidates += [_real(p) for p in readable]

    pairs: dict[Path, Path] = {}
    for candidate in candidates:
        if not candidate.exists() or too_wide(candidate):
            continue
        for dest in dict.fromkeys((Path(os.path.normpath(candidate)), _real(candidate))):
            if not shown_anyway(dest) and not too_wide(dest):
                pairs.setdefault(dest, _real(candidate))
    # A path already brought back by a shorter one needs no bind of its own.
    kept: list[tuple[Path, Path]] = []
    for dest in sorted(pairs, key=lambda p: len(p.parts)):
        if not any(_within(dest, d) and pairs[d] == _real(d) for d, _ in kept):
            kept.append((pairs[dest], dest))
    return Layout(
        hidden=tuple(hidden_set),
        sealed=tuple(sealed_real),
        readable=tuple(kept),
        writable=tuple(_real(w) for w in writable),
    )


@dataclass(frozen=True)
class Sandbox:
    """A recipe for confining one command (see the module docstring)."""

    spec: SandboxSpec
    layout: Layout
    bwrap: str
    prlimit: str
    env: Mapping[str, str] = field(default_factory=dict)
    """The environment every sandboxed command gets."""
    identity: Identity = field(default_factory=lambda: Identity(os.geteuid(), os.getegid()))
    """Who the command runs as, seen from outside the sandbox."""

    def command(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        info_fd: int | None = None,
        files: Sequence[Path] = (),
    ) -> list[str]:
        """The command line that runs ``argv`` in ``cwd`` inside the sandbox; ``cwd`` is the
        one writable working directory (with its ``.git`` read-only). Each of ``files`` (a
        regular file or a unix socket, never a directory, so nothing hidden comes back with
        it) is bound read-only at its real path, even inside a hidden place or the private
        ``/tmp``: a socket stays one the sandbox can connect to (a read-only mount does not
        refuse ``connect``; its mode must let the sandbox's uid write to it).

        ``cwd`` and the ``writable`` paths are lent to the sandbox's uid from here until
        ``release(cwd)`` (see ``overnight.sandbox.identity``)."""
        if self.identity.claim is not None and not self.identity.claim.held:
            # Its uid may be another night's by now: running as it would share that night's
            # processes, files and limit.
            raise RuntimeError(f"the sandbox of uid {self.identity.uid} was closed")
        root = _real(cwd)
        mounts = _Mounts()
        for path, target in system_entries():
            if target is None:
                mounts.bind(path, path)
            else:
                mounts.add(path, ["--symlink", target, str(path)])
        for source, dest in etc_entries():
            mounts.bind(source, dest)
        passwd, group = user_database(self.identity)
        mounts.bind(passwd, Path("/etc/passwd"))
        mounts.bind(group, Path("/etc/group"))
        for source, dest in self.layout.readable:
            mounts.bind(source, dest)
        for file in files:
            real = _real(file)
            if not (real.is_file() or real.is_socket()):
                raise ValueError(f"{file} is neither a regular file nor a unix socket")
            mounts.bind(real, real)
        if self.identity.setpriv is not None and not mounts.shows(_real(self.identity.setpriv)):
            mounts.bind(_real(self.identity.setpriv), _real(self.identity.setpriv))
        mounts.add(Path("/dev"), ["--dev", "/dev"])
        mounts.add(Path("/dev/shm"), ["--perms", "1777", "--tmpfs", "/dev/shm"])
        mounts.add(Path("/proc"), ["--proc", "/proc"])
        mounts.add(Path(SANDBOX_TMP), ["--perms", "1777", "--tmpfs", SANDBOX_TMP])
        mounts.add(Path(SANDBOX_HOME), ["--perms", "1777", "--dir", SANDBOX_HOME])
        remount: list[str] = []
        for hidden in self.layout.hidden:
            if _within(hidden, Path(SANDBOX_TMP)) or not mounts.shows(hidden):
                continue  # private and empty already, or not there at all
            if hidden.is_dir():
                mounts.add(hidden, ["--perms", "0755", "--tmpfs", str(hidden)])
                remount += ["--remount-ro", str(hidden)]
            elif hidden.exists():
                mounts.add(hidden, ["--ro-bind", "/dev/null", str(hidden)])
        for extra in self.layout.writable:
            mounts.add(extra, ["--bind", str(extra), str(extra)], tree=True)
        mounts.add(root, ["--bind", str(root), str(root)], tree=True)
        git_entry = root / ".git"
        if git_entry.exists() or git_entry.is_symlink():
            mounts.add(git_entry, ["--ro-bind", str(git_entry), str(git_entry)])

        for place in (root, *self.layout.writable):
            lend(self.identity, place)
        out = [self.prlimit, *self._limits(), "--", self.bwrap, *mounts.arguments()]
        out += [*remount, "--remount-ro", "/"]
        if self.identity.drops:
            # Root builds the namespaces without a user namespace (one would map the inside
            # back to root) and keeps only what setpriv needs to become the sandbox's uid.
            out += ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
            if not self.spec.network:
                out += ["--unshare-net"]
            out += ["--cap-drop", "ALL"]
            for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_READ_SEARCH"):
                out += ["--cap-add", cap]
        else:
            out += ["--unshare-all"]
            if self.spec.network:
                out += ["--share-net"]
            out += ["--cap-drop", "ALL"]
        out += ["--die-with-parent", "--new-session", "--chdir", str(root)]
        if info_fd is not None:
            out += ["--info-fd", str(info_fd)]
        out += ["--", *self.identity.drop_argv(), *argv]
        return out

    def release(self, cwd: Path) -> None:
        """Give back what ``command`` lent for ``cwd``, once the command and its namespace
        have ended."""
        for place in (_real(cwd), *self.layout.writable):
            give_back(self.identity, place)

    def close(self) -> None:
        """Hand this sandbox's uid back to the machine's range, once no command of it runs any
        more (idempotent; a sandbox never closed gives it back when it is collected, or when
        the process ends however it ends). Commands may not be started after."""
        self.identity.release()

    @property
    def process_limit(self) -> str:
        """Whose processes ``[sandbox] processes`` counts here, in one sentence."""
        return self.identity.process_limit(self.spec.processes)

    def _limits(self) -> list[str]:
        s = self.spec
        limits = [
            ("--as", s.address_space_mb * MIB),
            ("--nproc", s.processes),
            ("--fsize", s.file_size_mb * MIB),
            ("--cpu", s.cpu_seconds),
        ]
        return [f"{flag}={value}" for flag, value in limits if value > 0]


class _Mounts:
    """bubblewrap's mount arguments, parents before children, with the directories the
    sandbox's own root needs on the way made world-readable (bubblewrap makes them 0700)."""

    def __init__(self) -> None:
        self._ops: list[tuple[Path, list[str]]] = []
        self._read: list[Path] = []
        """Destinations that show a tree of the machine (binds)."""
        self._own: set[Path] = set()
        """Destinations of every mount."""

    def add(self, dest: Path, args: list[str], *, tree: bool = False) -> None:
        self._ops.append((dest, args))
        self._own.add(dest)
        if tree:
            self._read.append(dest)

    def bind(self, source: Path, dest: Path) -> None:
        self.add(dest, ["--ro-bind", str(source), str(dest)], tree=True)

    def shows(self, path: Path) -> bool:
        """Whether ``path`` lies in something mounted so far."""
        return any(_within(path, d) for d in self._read)

    def arguments(self) -> list[str]:
        stubs: dict[Path, None] = {}
        for dest, _args in self._ops:
            for parent in reversed(dest.parents):
                if parent != Path("/") and parent not in self._own and not self.shows(parent):
                    stubs[parent] = None
        ops = [*((p, ["--perms", "0755", "--dir", str(p)]) for p in stubs), *self._ops]
        out: list[str] = []
        for _dest, args in sorted(ops, key=lambda op: len(op[0].parts)):
            out += args
        return out


def sandbox_env(spec: SandboxSpec, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowlisted environment: PATH, HOME and TMPDIR set by the sandbox, LANG, LC_*, TZ
    and TERM when the harness has them, and the spec's ``env`` names."""
    src = os.environ if source is None else source
    env = {"PATH": src.get("PATH", os.defpath), "HOME": SANDBOX_HOME, "TMPDIR": SANDBOX_TMP}
    if not spec.bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    for name, value in src.items():
        if name in PASSED_VARIABLES or name.startswith(PASSED_PREFIXES) or name in spec.env:
            env[name] = value
    return env


def find_program(name: str) -> str | None:
    return shutil.which(name)


def sandbox_programs() -> tuple[str, str]:
    """Where bubblewrap and prlimit are; ``SandboxUnavailable`` naming the one missing and
    how to install it."""
    bwrap = find_program("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed",
            "install it (Debian and Ubuntu: apt-get install bubblewrap), or set [sandbox] "
            'mode = "off" to run unsandboxed (recorded in result.json and the report)',
        )
    prlimit = find_program("prlimit")
    if prlimit is None:
        raise SandboxUnavailable(
            "prlimit (util-linux) is not installed",
            'install util-linux, or set [sandbox] mode = "off"',
        )
    return bwrap, prlimit


def build_sandbox(
    spec: SandboxSpec,
    *,
    sealed: Iterable[Path],
    writable: Iterable[Path] = (),
    readable: Iterable[Path] = (),
    home: Path | None = None,
    uids: Iterable[int] | None = None,
) -> Sandbox:
    """A sandbox hiding ``sealed`` and the user's home; raises ``SandboxUnavailable`` when
    bubblewrap or prlimit is not installed. A root harness's sandbox takes a uid of its own
    from ``uids`` (default: the machine's range), to hand back with ``close``."""
    bwrap, prlimit = sandbox_programs()
    layout = plan_layout(
        sealed=sealed,
        home=Path.home() if home is None else home,
        readable=readable,
        writable=writable,
    )
    sandbox = Sandbox(spec=spec, layout=layout, bwrap=bwrap, prlimit=prlimit, env=sandbox_env(spec))
    return replace(sandbox, identity=_identity(sandbox, uids))


_DROPS: dict[tuple[str, str], str | None] = {}


def _identity(sandbox: Sandbox, uids: Iterable[int] | None) -> Identity:
    """Who sandboxed commands run as: the harness's own uid when it is not root; else an
    unprivileged uid of the sandbox's own, or root with the reason why not. Whether dropping
    works is tried once per process, with the first uid taken: any free uid of the range
    behaves the same, so a night does not pay a probe for its own."""
    if os.geteuid() != 0:
        return Identity(os.geteuid(), os.getegid())
    setpriv = find_program("setpriv")
    if setpriv is None:
        return Identity(0, 0, note="setpriv (util-linux) is not installed")
    dropped = dropped_identity(setpriv, uids)
    key = (sandbox.bwrap, setpriv)
    if key not in _DROPS:
        _DROPS[key] = _try(replace(sandbox, identity=dropped))
    problem = _DROPS[key]
    if problem is None:
        return dropped
    dropped.release()
    return Identity(0, 0, note=f"the sandbox could not run as uid {dropped.uid}: {problem}")


_PROBED: dict[tuple[str, bool, bool, int], str | None] = {}


def probe(sandbox: Sandbox) -> None:
    """Start one sandboxed command to show the sandbox works here; raise
    ``SandboxUnavailable`` with bubblewrap's own words and the fix when it does not. The
    answer is kept for the life of the process. Whether it runs as root is in
    ``sandbox.identity`` (``as_root``, and ``note``: why)."""
    # Not per uid: every sandbox of a root harness has a uid of its own, and they all behave
    # as the first one probed.
    ident = sandbox.identity
    key = (sandbox.bwrap, sandbox.spec.network, ident.drops, 0 if ident.drops else ident.uid)
    if key not in _PROBED:
        _PROBED[key] = _try(sandbox)
    problem = _PROBED[key]
    if problem is not None:
        raise SandboxUnavailable(problem, _FIX)


#: Prints "sandboxed <real uid>" with nothing but the shell.
_SAY_UID = (
    "while read -r key uid _rest; do "
    'if [ "$key" = Uid: ]; then echo "sandboxed $uid"; fi; done < /proc/self/status'
)


def _try(sandbox: Sandbox) -> str | None:
    expected = f"sandboxed {sandbox.identity.uid}".encode()
    with tempfile.TemporaryDirectory(prefix="overnight-probe-") as tmp:
        argv = sandbox.command(["/bin/sh", "-c", _SAY_UID], cwd=Path(tmp))
        try:
            done = subprocess.run(
                argv,
                env=dict(sandbox.env),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bubblewrap could not be started ({exc})"
        finally:
            sandbox.release(Path(tmp))
    if done.returncode == 0 and done.stdout.strip() == expected:
        return None
    said = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
    return f"bubblewrap cannot create a sandbox on this machine: {said[-400:]}"


_FIX = (
    "allow unprivileged user namespaces (sysctl -w kernel.unprivileged_userns_clone=1; on "
    "Ubuntu 24.04 and later also kernel.apparmor_restrict_unprivileged_userns=0) or run as "
    'root, or set [sandbox] mode = "off" to run unsandboxed (recorded in result.json and the '
    "report)"
)
