"""The git side of a run: a worktree on a branch of its own, and commits of verified work.

The user's checkout is never touched: the run works in a separate worktree on the branch
``overnight/<run-id>``, created at the commit the user had checked out. A task's changes
become a *candidate* commit first (``stage_candidate``), which is checked out clean into a
second worktree (``clean_checkout``) for its verify; only a verified candidate moves the
branch (``land``). Every git call goes through :func:`_git`, which runs git without a shell,
without prompts, without hooks or an fsmonitor (no program of the repository's runs in the
harness), in the C locale, with secrets removed from its environment, and turns a failure
into :class:`WorkspaceError` (or :class:`DiskFull`) carrying git's own message.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from overnight.core.errors import ConfigError, DiskFull, WorkspaceError
from overnight.process import scrubbed_env
from overnight.store.atomic import open_private, private_dir

#: Longest a single git call may take before it is treated as hung.
GIT_TIMEOUT_S = 900.0

#: Identity used for commits when the repository has none configured.
FALLBACK_NAME = "overnight"
FALLBACK_EMAIL = "overnight@localhost"

# Variables that would point git at another repository, index or work tree than the one
# named with -C (they are set, for instance, when the harness is started from a git hook).
REPOSITORY_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)

# Options on every git call: the harness never runs a program the repository (or code the
# agent wrote in it) names: no hooks, no fsmonitor, no submodule recursion.
SAFE_GIT_OPTIONS = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "submodule.recurse=false",
    "-c",
    "protocol.file.allow=never",
)

# `git worktree add` writes this lock reason first and removes it when the worktree is ready;
# it is translated, hence LC_ALL=C in every git call.
_INITIALIZING = "initializing"

# Options that make `git diff` produce a patch `git apply` accepts whatever the user's config
# says about prefixes, colours, relative paths or external diff drivers.
_PATCH_OPTIONS = (
    "--binary",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-relative",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)


def check_repository(path: Path) -> Path:
    """The top level of the git repository containing ``path``, resolved.

    Raises ConfigError (field ``workspace``) when the path is missing, not a directory,
    unreadable, outside any git work tree, or in a repository with no commit yet.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise ConfigError(
            "workspace",
            f"{path} does not exist",
            "point workspace at an existing git repository",
        )
    if not path.is_dir():
        raise ConfigError(
            "workspace",
            f"{path} is not a directory",
            "point workspace at the directory of a git repository",
        )
    if not os.access(path, os.R_OK | os.X_OK):
        raise ConfigError(
            "workspace",
            f"{path} is not readable",
            "give the user running overnight read and execute permission on it",
        )
    try:
        top = _git_raw(path, "rev-parse", "--show-toplevel")
    except FileNotFoundError as exc:
        raise ConfigError(
            "workspace", "git is not installed or not on PATH", "install git"
        ) from exc
    if top.returncode != 0:
        message = _text(top.stderr).strip()
        if "not a git repository" in message:
            raise ConfigError(
                "workspace",
                f"{path} is not inside a git repository",
                f"run `git init && git add -A && git commit -m initial` in {path}, "
                "or point workspace at a repository",
            )
        raise ConfigError(
            "workspace",
            f"git cannot use {path}: {message}",
            "act on git's message (for 'dubious ownership': "
            "git config --global --add safe.directory <path>)",
        )
    root = Path(_text(top.stdout).strip()).resolve()
    if _git_raw(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").returncode != 0:
        raise ConfigError(
            "workspace",
            f"the repository {root} has no commit yet",
            f"make a first commit: cd {root} && git add -A && git commit -m initial",
        )
    return root


def create_worktree(repo: Path, worktree: Path, branch: str) -> str:
    """Create ``branch`` at the current HEAD of ``repo`` and a worktree for it at
    ``worktree``; return the base commit (the commit the branch started from).

    Safe to call again after a crash: a worktree already registered at ``worktree`` on
    ``branch`` is reused as it is; one whose creation was cut short is removed and made
    again; a branch left without its worktree gets the worktree back. The user's checkout
    (branch, index, working files) is never modified.
    """
    repo = Path(repo).absolute()
    # Relative paths would be read relative to `repo` because of `git -C`.
    target = Path(worktree).expanduser().absolute().resolve()
    _git(repo, "check-ref-format", "--branch", branch)
    _git(repo, "worktree", "prune")

    entry = _registered_worktree(repo, target)
    if entry is not None and entry.locked == _INITIALIZING:
        # An earlier `git worktree add` was killed half-way: nothing in there is anyone's
        # work. `git worktree remove` refuses a half-made worktree, so unregister by hand.
        _git(repo, "worktree", "unlock", str(target))
        shutil.rmtree(target, ignore_errors=True)
        _git(repo, "worktree", "prune")
        entry = None
    if entry is not None:
        if entry.branch != f"refs/heads/{branch}":
            on = entry.branch or "a detached HEAD"
            raise WorkspaceError(
                f"{target} is already a worktree of {repo} but on {on}, not {branch}; "
                f"remove it with `git -C {repo} worktree remove --force {target}`"
            )
        return _branch_base(repo, branch)

    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise WorkspaceError(
            f"{target} exists and is not a worktree of {repo} on {branch}; "
            "move it away or use another run id"
        )
    if _ref_exists(repo, f"refs/heads/{branch}"):
        _git(repo, "worktree", "add", str(target), branch)
        return _branch_base(repo, branch)
    base = _git(repo, "rev-parse", "--verify", "HEAD^{commit}").strip()
    # The sha, not HEAD: the user may commit while this runs.
    _git(repo, "worktree", "add", "-b", branch, str(target), base)
    return base


def clear_stale_locks(worktree: Path) -> list[Path]:
    """Remove the lock files a killed git process leaves in ``worktree``'s git directory
    (``index.lock``, ``HEAD.lock``) and on its branch ref; return those removed.

    The caller guarantees no other process is using the worktree: a lock found now is a
    leftover, not a git command in progress.
    """
    git_dir = Path(_git(worktree, "rev-parse", "--absolute-git-dir").strip())
    candidates = [git_dir / "index.lock", git_dir / "HEAD.lock"]
    branch = _git_raw(worktree, "symbolic-ref", "--quiet", "HEAD")
    if branch.returncode == 0:
        common = _git(worktree, "rev-parse", "--path-format=absolute", "--git-common-dir")
        ref = _text(branch.stdout).strip()
        candidates.append(Path(common.strip()) / f"{ref}.lock")
    removed: list[Path] = []
    for lock in candidates:
        try:
            lock.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise WorkspaceError(f"cannot remove stale lock {lock}: {exc}") from exc
        removed.append(lock)
    return removed


def commit_all(worktree: Path, message: str) -> str:
    """Stage everything (respecting .gitignore) and commit it, even when nothing changed;
    return the new HEAD.

    Hooks and signing are off: an unattended commit cannot answer a pinentry prompt, and a
    user's hook has no say over the harness's branch. A repository without an identity gets
    ``overnight <overnight@localhost>``.
    """
    _git(worktree, "add", "-A")
    options = ["-c", "commit.gpgsign=false", *_identity(worktree)]
    _git(
        worktree,
        *options,
        "commit",
        "--allow-empty",
        "--no-verify",
        "--cleanup=whitespace",  # keep lines starting with '#': markers may
        "-m",
        message,
    )
    return head(worktree)


def _identity(worktree: Path) -> list[str]:
    if not _config_value(worktree, "user.email"):
        return ["-c", f"user.name={FALLBACK_NAME}", "-c", f"user.email={FALLBACK_EMAIL}"]
    if not _config_value(worktree, "user.name"):
        return ["-c", f"user.name={FALLBACK_NAME}"]
    return []


def stage_candidate(worktree: Path, message: str) -> str | None:
    """Stage everything in ``worktree`` (respecting .gitignore) and make it a commit whose
    parent is HEAD, without moving the branch; return its sha, or None when the staged tree
    is HEAD's (the task changed nothing that would be committed)."""
    _git(worktree, "add", "-A")
    if _git_raw(worktree, "diff", "--cached", "--quiet", "HEAD", "--").returncode == 0:
        return None
    tree = _git(worktree, "write-tree").strip()
    parent = head(worktree)
    sha = _git(
        worktree, *_identity(worktree), "commit-tree", tree, "-p", parent, "-m", message
    ).strip()
    return sha


def land(worktree: Path, sha: str) -> str:
    """Move the worktree's branch to ``sha`` (a candidate made from its own index by
    ``stage_candidate``): the index and the files already match it."""
    _git(worktree, "reset", "--soft", "--quiet", sha)
    return head(worktree)


@dataclass(frozen=True)
class Change:
    """One path a commit changes against another: ``status`` A, M, D or T (type)."""

    status: str
    path: str
    old_mode: str
    new_mode: str

    @property
    def nested_repository(self) -> bool:
        return self.new_mode == "160000" or self.old_mode == "160000"


def changes_between(worktree: Path, old: str, new: str) -> list[Change]:
    """Every path that differs between commits ``old`` and ``new`` (renames as a delete and
    an add), with its modes."""
    out = _git_bytes(worktree, "diff-tree", "-r", "-z", "--no-renames", "--raw", old, new, "--")
    fields = out.split(b"\0")
    found: list[Change] = []
    i = 0
    while i + 1 < len(fields):
        meta = fields[i].decode("utf-8", "replace")
        if not meta.startswith(":"):
            i += 1
            continue
        old_mode, new_mode, _a, _b, status = meta[1:].split(" ")
        path = os.fsdecode(fields[i + 1])
        found.append(Change(status[:1], path, old_mode, new_mode))
        i += 2
    return found


def tree_paths(worktree: Path, commit: str) -> tuple[set[str], set[str]]:
    """``(files, directories)`` of ``commit``'s tree, as relative ``/`` paths."""
    out = _git_bytes(worktree, "ls-tree", "-r", "-t", "-z", "--full-tree", commit)
    files: set[str] = set()
    dirs: set[str] = set()
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, _, name = entry.partition(b"\t")
        kind = meta.split(b" ")[1] if b" " in meta else b""
        (dirs if kind == b"tree" else files).add(os.fsdecode(name))
    return files, dirs


def clean_checkout(repo: Path, target: Path, sha: str) -> Path:
    """A worktree at ``target`` holding exactly commit ``sha``: no untracked or ignored file,
    nothing an earlier command left there. Made on first use (detached, never on a branch),
    reset and cleaned after; rebuilt from scratch when it cannot be reset."""
    target = Path(target).absolute()
    try:
        return _reset_checkout(repo, target, sha)
    except WorkspaceError:
        _drop_worktree(repo, target)
        return _reset_checkout(repo, target, sha)


def _reset_checkout(repo: Path, target: Path, sha: str) -> Path:
    resolved = target.resolve()
    entry = _registered_worktree(repo, resolved)
    if entry is not None and entry.locked == _INITIALIZING:
        _drop_worktree(repo, target)
        entry = None
    if entry is None:
        if target.exists() or target.is_symlink():
            _remove_tree(target)
        _git(repo, "worktree", "prune")
        _git(repo, "worktree", "add", "--detach", "--force", "--quiet", str(target), sha)
    else:
        _git(target, "checkout", "--force", "--detach", "--quiet", sha)
    _git(target, "clean", "-ffdxq")
    return target


def remove_worktree(target: Path) -> bool:
    """Remove the worktree at ``target`` and forget it in its repository (its branch stays);
    False when there was none."""
    target = Path(target).absolute()
    if not (target / ".git").is_file():
        return False
    common = Path(_git(target, "rev-parse", "--git-common-dir").strip())
    if not common.is_absolute():
        common = (target / common).resolve()
    _remove_tree(target)
    _git(common, "worktree", "prune")
    return True


def drop_checkout(repo: Path, target: Path) -> None:
    """Remove the verify checkout and its registration (best effort: the next run's
    ``worktree prune`` forgets it anyway)."""
    with contextlib.suppress(WorkspaceError, OSError):
        _drop_worktree(repo, Path(target).absolute())


def _drop_worktree(repo: Path, target: Path) -> None:
    _remove_tree(target)
    _git(repo, "worktree", "prune")


def _remove_tree(target: Path) -> None:
    if target.is_symlink() or not target.is_dir():
        target.unlink(missing_ok=True)
        return

    def retry(func: Callable[[str], object], path: str, _exc: object) -> None:
        # A command may have left a file or directory without write permission.
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
        with contextlib.suppress(OSError):
            func(path)

    shutil.rmtree(target, onerror=retry)


def git_common_dir(repo: Path) -> Path:
    """The repository's git directory shared by all its worktrees (``.git`` of a checkout)."""
    out = _git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()
    return Path(out).resolve()


def uncommitted(repo: Path) -> list[str]:
    """The paths of ``repo``'s checkout that differ from its HEAD (changed, staged or
    untracked; not ignored): what a night, which starts from HEAD, will not see."""
    out = _git_bytes(repo, "status", "--porcelain=v1", "-z", "--untracked-files=normal")
    paths: list[str] = []
    entries = out.split(b"\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        paths.append(os.fsdecode(entry[3:]))
        if entry[:1] in (b"R", b"C"):
            i += 1  # a rename's second field is its source
    return paths


def head(worktree: Path) -> str:
    """The sha of the commit checked out in ``worktree``."""
    return _git(worktree, "rev-parse", "--verify", "HEAD^{commit}").strip()


def log_messages(worktree: Path, base: str) -> list[tuple[str, str]]:
    """``(sha, subject)`` of every commit after ``base`` up to HEAD, oldest first."""
    out = _git(worktree, "log", "--reverse", "--format=%H %s", f"{base}..HEAD", "--")
    pairs: list[tuple[str, str]] = []
    for line in out.splitlines():
        sha, _, subject = line.partition(" ")
        pairs.append((sha, subject))
    return pairs


def find_commit(worktree: Path, base: str, marker: str) -> str | None:
    """The newest commit after ``base`` whose full message contains ``marker``, or None."""
    out = _git(worktree, "log", "-z", "--format=%H%n%B", f"{base}..HEAD", "--")
    for record in out.split("\0"):  # newest first
        sha, _, body = record.partition("\n")
        if sha and marker in body:
            return sha
    return None


def has_changes(worktree: Path) -> bool:
    """Whether ``worktree`` differs from HEAD: tracked edits or untracked files that
    .gitignore does not exclude."""
    return bool(_git(worktree, "status", "--porcelain", "--untracked-files=all").strip())


def discard_changes(worktree: Path, patch_path: Path) -> bool:
    """Save every change in ``worktree`` (untracked files included) as a patch against HEAD
    at ``patch_path``, then reset the worktree to HEAD. Return whether there was anything
    to save.

    The patch is on disk, synced, before anything is reset: a kill in between loses nothing.
    Ignored files are neither saved nor removed.
    """
    if not has_changes(worktree):
        return False
    _git(worktree, "add", "-A")
    patch = _git_bytes(worktree, "diff", "--cached", *_PATCH_OPTIONS, "HEAD", "--")
    _write_durably(patch_path, patch)
    _git(worktree, "reset", "--hard", "--quiet", "HEAD")
    _git(worktree, "clean", "-fd", "--quiet")
    return True


def diff_stat(worktree: Path, base: str) -> str:
    """``git diff --stat`` of the commits after ``base`` (uncommitted edits not included)."""
    out = _git(worktree, "diff", "--stat", "--no-color", "--no-ext-diff", base, "HEAD", "--")
    return out.rstrip("\n")


@dataclass(frozen=True)
class _WorktreeEntry:
    path: Path
    branch: str | None
    locked: str | None


def _registered_worktree(repo: Path, target: Path) -> _WorktreeEntry | None:
    out = _git(repo, "worktree", "list", "--porcelain")
    for block in out.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            fields[key] = value
        if "worktree" not in fields:
            continue
        path = Path(fields["worktree"]).resolve()
        if path == target:
            return _WorktreeEntry(path, fields.get("branch"), fields.get("locked"))
    return None


def _branch_base(repo: Path, branch: str) -> str:
    """The commit ``branch`` was created at: the oldest entry of its reflog, or, without a
    reflog, where it meets the repository's HEAD."""
    reflog = _git_raw(repo, "reflog", "show", "--format=%H", f"refs/heads/{branch}", "--")
    entries = _text(reflog.stdout).split()
    if reflog.returncode == 0 and entries:
        return entries[-1]
    return _git(repo, "merge-base", "HEAD", f"refs/heads/{branch}").strip()


def _ref_exists(repo: Path, ref: str) -> bool:
    return _git_raw(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode == 0


def _config_value(worktree: Path, key: str) -> str:
    # Exit status 1 means "not set", which is an answer, not a failure.
    return _text(_git_raw(worktree, "config", "--get", key).stdout).strip()


def _write_durably(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        private_dir(path.parent)
        with open_private(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DiskFull(f"cannot write {path}: {exc}") from exc
        raise WorkspaceError(f"cannot write {path}: {exc}") from exc


def git_env() -> dict[str, str]:
    """The environment of every git call: secrets scrubbed, no variable pointing git
    elsewhere, no prompt, no optional lock, the C locale."""
    env = scrubbed_env()
    for name in REPOSITORY_VARIABLES:
        env.pop(name, None)
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"  # `git status` must not take index.lock behind our back
    env["LC_ALL"] = "C"
    return env


def _git_raw(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run git in ``cwd``; the caller judges the exit status. FileNotFoundError means no git."""
    try:
        return subprocess.run(
            ["git", *SAFE_GIT_OPTIONS, "-C", str(cwd), *args],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            env=git_env(),
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise WorkspaceError(
            f"git {' '.join(args)} in {cwd} did not finish in {GIT_TIMEOUT_S:.0f} s"
        ) from exc


def _git_bytes(cwd: Path, *args: str) -> bytes:
    try:
        result = _git_raw(cwd, *args)
    except FileNotFoundError as exc:
        raise WorkspaceError("git is not installed or not on PATH") from exc
    if result.returncode != 0:
        stderr = _text(result.stderr).strip()
        detail = f"git {' '.join(args)} failed in {cwd} (exit {result.returncode}): {stderr}"
        if "No space left on device" in stderr or _disk_nearly_full(cwd):
            raise DiskFull(detail)
        raise WorkspaceError(detail)
    return result.stdout


def _disk_nearly_full(path: Path) -> bool:
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


def _git(cwd: Path, *args: str) -> str:
    return _text(_git_bytes(cwd, *args))


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class Worktree:
    """The run's worktree and its clean checkout, as the lap uses them: a task's changes
    staged as a candidate commit (not on the branch yet), judged on a clean checkout of
    exactly that commit, then landed or discarded."""

    def __init__(self, path: Path, checkout: Path) -> None:
        self.path = path
        self.checkout_path = checkout

    def head(self) -> str:
        return head(self.path)

    def candidate(self, message: str) -> str | None:
        """The changes as a commit on top of the branch, or None when nothing would be
        committed."""
        return stage_candidate(self.path, message)

    def changes(self, candidate: str) -> list[Change]:
        """What ``candidate`` changes against the branch."""
        return changes_between(self.path, self.head(), candidate)

    def clean_checkout(self, commit: str | None) -> Path:
        """A clean detached checkout of ``commit`` (None: the branch as it stands)."""
        return clean_checkout(self.path, self.checkout_path, commit or self.head())

    def land(self, candidate: str | None) -> str | None:
        """Put a verified candidate on the branch; nothing to land lands no commit."""
        return None if candidate is None else land(self.path, candidate)

    def discard(self, patch: Path) -> bool:
        """Throw the uncommitted changes away, kept as ``patch``; False when there were none."""
        return discard_changes(self.path, patch)

    def find_commit(self, base: str, marker: str) -> str | None:
        return find_commit(self.path, base, marker)

    def clear_stale_locks(self) -> list[Path]:
        return clear_stale_locks(self.path)

    def tree_paths(self, commit: str) -> tuple[set[str], set[str]]:
        return tree_paths(self.path, commit)

    def diff_stat(self, base: str) -> str:
        return diff_stat(self.path, base)

    def drop_checkout(self) -> None:
        drop_checkout(self.path, self.checkout_path)
