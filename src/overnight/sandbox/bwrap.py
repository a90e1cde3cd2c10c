"""The OS sandbox: every command the model can influence runs inside bubblewrap.

What a sandboxed command sees:

* the machine's filesystem read-only, except the directory it works in (the worktree, or
  the clean checkout a verify runs on), a private ``/tmp`` and the spec's ``[sandbox]
  writable`` paths;
* nothing of the places that hold the run and the user: the run directory, the workspace
  checkout and its git directory, ``$OVERNIGHT_HOME``, the effects ledger's directory and
  ``$HOME`` are empty and read-only. Toolchains on ``PATH`` that live in a hidden place
  stay readable (a virtualenv, ``~/.pyenv``, ``~/.local``), as does the Python running the
  harness; ``/run`` is empty too, so that no socket there (a container engine's, the system
  bus) can be reached;
* the worktree's ``.git`` file read-only: git metadata is the harness's business;
* its own PID namespace (the harness's processes, and their environments, do not exist in
  its ``/proc``), a new session, no capabilities, and a network namespace with loopback only
  unless ``network = true``;
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
from dataclasses import dataclass, field
from pathlib import Path

from overnight.config.sandbox import SandboxSpec

#: The sandbox's own home directory (inside its private /tmp).
SANDBOX_HOME = "/tmp/home"
SANDBOX_TMP = "/tmp"

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
    return path == root or root in path.parents


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
            if under_hidden(dest) and not too_wide(dest):
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
        regular file, never a directory, so nothing hidden comes back with it) is bound
        read-only at its real path, even inside a hidden place or the private ``/tmp``."""
        root = _real(cwd)
        out = [self.prlimit, *self._limits(), "--", self.bwrap]
        out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        out += ["--tmpfs", SANDBOX_TMP, "--dir", SANDBOX_HOME, "--tmpfs", "/run"]
        resolv = _real("/etc/resolv.conf")
        if self.spec.network and _within(resolv, Path("/run")) and resolv.exists():
            out += ["--ro-bind", str(resolv), str(resolv)]
        remount: list[str] = []
        for hidden in self.layout.hidden:
            if _within(hidden, Path(SANDBOX_TMP)) or _within(hidden, Path("/run")):
                continue  # already private and empty
            if hidden.is_dir():
                out += ["--tmpfs", str(hidden)]
                remount += ["--remount-ro", str(hidden)]
            elif hidden.exists():
                out += ["--ro-bind", "/dev/null", str(hidden)]
        for source, dest in self.layout.readable:
            out += ["--ro-bind", str(source), str(dest)]
        for file in files:
            real = _real(file)
            if not real.is_file():
                raise ValueError(f"{file} is not a regular file")
            out += ["--ro-bind", str(real), str(real)]
        for extra in self.layout.writable:
            out += ["--bind", str(extra), str(extra)]
        out += ["--bind", str(root), str(root)]
        git_entry = root / ".git"
        if git_entry.exists() or git_entry.is_symlink():
            out += ["--ro-bind", str(git_entry), str(git_entry)]
        out += remount
        out += ["--unshare-all"]
        if self.spec.network:
            out += ["--share-net"]
        out += ["--cap-drop", "ALL", "--die-with-parent", "--new-session", "--chdir", str(root)]
        if info_fd is not None:
            out += ["--info-fd", str(info_fd)]
        out += ["--", *argv]
        return out

    def _limits(self) -> list[str]:
        s = self.spec
        limits = [
            ("--as", s.address_space_mb * MIB),
            ("--nproc", s.processes),
            ("--fsize", s.file_size_mb * MIB),
            ("--cpu", s.cpu_seconds),
        ]
        return [f"{flag}={value}" for flag, value in limits if value > 0]


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


def build_sandbox(
    spec: SandboxSpec,
    *,
    sealed: Iterable[Path],
    writable: Iterable[Path] = (),
    readable: Iterable[Path] = (),
    home: Path | None = None,
) -> Sandbox:
    """A sandbox hiding ``sealed`` and the user's home; raises ``SandboxUnavailable`` when
    bubblewrap or prlimit is not installed."""
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
    layout = plan_layout(
        sealed=sealed,
        home=Path.home() if home is None else home,
        readable=readable,
        writable=writable,
    )
    return Sandbox(spec=spec, layout=layout, bwrap=bwrap, prlimit=prlimit, env=sandbox_env(spec))


_PROBED: dict[tuple[str, bool], str | None] = {}


def probe(sandbox: Sandbox) -> None:
    """Start one sandboxed command to show the sandbox works here; raise
    ``SandboxUnavailable`` with bubblewrap's own words and the fix when it does not. The
    answer is kept for the life of the process."""
    key = (sandbox.bwrap, sandbox.spec.network)
    if key not in _PROBED:
        _PROBED[key] = _try(sandbox)
    problem = _PROBED[key]
    if problem is not None:
        raise SandboxUnavailable(problem, _FIX)


def _try(sandbox: Sandbox) -> str | None:
    with tempfile.TemporaryDirectory(prefix="overnight-probe-") as tmp:
        argv = sandbox.command(["/bin/sh", "-c", "echo sandboxed"], cwd=Path(tmp))
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
    if done.returncode == 0 and done.stdout.strip() == b"sandboxed":
        return None
    said = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
    return f"bubblewrap cannot create a sandbox on this machine: {said[-400:]}"


_FIX = (
    "allow unprivileged user namespaces (sysctl -w kernel.unprivileged_userns_clone=1; on "
    "Ubuntu 24.04 and later also kernel.apparmor_restrict_unprivileged_userns=0) or run as "
    'root, or set [sandbox] mode = "off" to run unsandboxed (recorded in result.json and the '
    "report)"
)
