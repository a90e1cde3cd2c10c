"""Every git process the harness starts, in one place.

git runs without a shell, a prompt, hooks, an fsmonitor or submodule recursion, in the C
locale, with an environment built from an allowlist (``PATH`` and git's own switches: no
provider key, no ``GIT_*`` of the user's, no system or global config, ``HOME`` pointing
nowhere). Calls on the run's objects use :func:`bare`: the repository's git directory opened
as a bare repository, so git has no work tree at all and reads no ``.gitattributes`` or
``.gitignore`` (bytes the model may have written); only the object database, refs, and a
private index file are touched. A failure becomes :class:`WorkspaceError` (or
:class:`DiskFull`) carrying git's own message.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from overnight.core.errors import DiskFull, WorkspaceError

#: Longest a single git call may take before it is treated as hung.
GIT_TIMEOUT_S = 900.0

# Options on every git call: the harness never runs a program the repository (or code the
# agent wrote in it) names.
SAFE_GIT_OPTIONS = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "submodule.recurse=false",
    "-c",
    "protocol.file.allow=never",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "commit.gpgSign=false",
)

#: Where git looks for a home: nowhere (the global config is /dev/null anyway).
NO_HOME = "/nonexistent/overnight-git-home"


def git_env(
    index_file: Path | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of every git call, from an allowlist; ``index_file`` as the index."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "LC_ALL": "C",
        "HOME": NO_HOME,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
    }
    if index_file is not None:
        env["GIT_INDEX_FILE"] = str(index_file)
    env.update(extra or {})
    return env


def user_env() -> dict[str, str]:
    """The allowlisted environment with the user's own home: for reading the user's identity
    from their global config, nothing else."""
    env = git_env()
    env.pop("GIT_CONFIG_GLOBAL")
    env["HOME"] = os.environ.get("HOME", NO_HOME)
    if "XDG_CONFIG_HOME" in os.environ:
        env["XDG_CONFIG_HOME"] = os.environ["XDG_CONFIG_HOME"]
    return env


def raw(
    args: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    stdout: IO[bytes] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git <args>`` in ``cwd``; the caller judges the exit status. FileNotFoundError
    means no git. ``stdout``: a file the output goes to, never through the harness's memory."""
    try:
        return subprocess.run(
            ["git", *SAFE_GIT_OPTIONS, *args],
            cwd=cwd,
            input=stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
            stdout=stdout if stdout is not None else subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env if env is not None else git_env(),
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise WorkspaceError(
            f"git {' '.join(args)} in {cwd} did not finish in {GIT_TIMEOUT_S:.0f} s"
        ) from exc


def checked(done: subprocess.CompletedProcess[bytes], args: Sequence[str], where: Path) -> bytes:
    """``done``'s output, or the WorkspaceError (DiskFull) its failure means."""
    if done.returncode != 0:
        stderr = text(done.stderr).strip()
        detail = f"git {' '.join(args)} failed in {where} (exit {done.returncode}): {stderr}"
        if "No space left on device" in stderr or disk_nearly_full(where):
            raise DiskFull(detail)
        raise WorkspaceError(detail)
    return done.stdout if done.stdout is not None else b""


def run(
    args: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    stdout: IO[bytes] | None = None,
) -> bytes:
    try:
        done = raw(args, cwd=cwd, env=env, stdin=stdin, stdout=stdout)
    except FileNotFoundError as exc:
        raise WorkspaceError("git is not installed or not on PATH") from exc
    return checked(done, args, cwd)


def in_repo(repo: Path, *args: str) -> str:
    """git on the user's own checkout (``-C repo``): never on a directory the model wrote."""
    return text(run(["-C", str(repo), *args], cwd=repo))


def answer(repo: Path, *args: str) -> str | None:
    """``git -C repo <args>``'s output, stripped, on the user's own checkout or a copy the
    harness made of it; None when git is missing or fails."""
    try:
        done = raw(["-C", str(repo), *args], cwd=repo)
    except (OSError, WorkspaceError):
        return None
    return text(done.stdout).strip() if done.returncode == 0 else None


def bare_args(git_dir: Path, *args: str) -> list[str]:
    return ["--bare", f"--git-dir={git_dir}", *args]


def bare(
    git_dir: Path,
    *args: str,
    index_file: Path | None = None,
    stdin: bytes | None = None,
    stdout: IO[bytes] | None = None,
    env: dict[str, str] | None = None,
) -> bytes:
    """git on the repository's objects and refs only (no work tree)."""
    return run(
        bare_args(git_dir, *args),
        cwd=git_dir,
        env=env if env is not None else git_env(index_file),
        stdin=stdin,
        stdout=stdout,
    )


def bare_raw(git_dir: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return raw(bare_args(git_dir, *args), cwd=git_dir)


def popen(git_dir: Path, *args: str) -> subprocess.Popen[bytes]:
    """A long-lived bare git process talking through pipes (``cat-file --batch``,
    ``hash-object --stdin``)."""
    try:
        return subprocess.Popen(
            ["git", *SAFE_GIT_OPTIONS, *bare_args(git_dir, *args)],
            cwd=git_dir,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=git_env(),
        )
    except FileNotFoundError as exc:
        raise WorkspaceError("git is not installed or not on PATH") from exc


def disk_nearly_full(path: Path) -> bool:
    """Whether the filesystem of ``path`` has (almost) no room left: git does not always say
    so (a checkout reports "unable to write file")."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 64 * 1024


def text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
