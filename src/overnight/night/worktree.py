"""The git side of a run: a worktree on a branch of its own, and commits of verified work.

The user's checkout is never touched: the run works in a separate worktree on the branch
``overnight/<run-id>``, created at the commit the user had checked out. A task's changes
become a *candidate* commit first, built by the harness from the files it reads in the
worktree (:mod:`overnight.night.candidate_commit`); the verify runs on a clean checkout of exactly
that commit, written by the harness from the object store; only a verified candidate moves
the branch (``update-ref``, its old value checked). No git process ever runs in, or reads, a
directory that sandboxed code wrote: git works on the repository's git directory as a bare
repository (:mod:`overnight.night.git`), the worktree is read and written by the harness.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from overnight.core.candidate_rules import CandidateRules
from overnight.core.errors import ConfigError, DiskFull, WorkspaceError
from overnight.core.places import RUN_DIR, WORKSPACE, Places
from overnight.night import git
from overnight.night.candidate_commit import (
    SYMLINK,
    Candidate,
    build,
    export,
    link_targets,
    tree_links,
    write_patch,
)
from overnight.night.git import GIT_TIMEOUT_S, SAFE_GIT_OPTIONS, git_env
from overnight.store.atomic import open_private, private_dir

__all__ = ["GIT_TIMEOUT_S", "SAFE_GIT_OPTIONS", "git_env"]

#: Identity used for commits when the repository has none configured.
FALLBACK_NAME = "overnight"
FALLBACK_EMAIL = "overnight@localhost"

# `git worktree add` writes this lock reason first and removes it when the worktree is ready;
# the harness uses the same reason while it writes the worktree's files.
_INITIALIZING = "initializing"


def path_forms(path: Path) -> list[str]:
    """``path`` as the text a program may print it as: absolute, and with its links
    resolved."""
    return [str(path.absolute()), os.path.realpath(path)]


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
        top = git.raw(["-C", str(path), "rev-parse", "--show-toplevel"], cwd=path)
    except FileNotFoundError as exc:
        raise ConfigError(
            "workspace", "git is not installed or not on PATH", "install git"
        ) from exc
    if top.returncode != 0:
        message = git.text(top.stderr).strip()
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
            "act on git's message (for 'dubious ownership': run overnight as the user who "
            "owns the repository; the harness's git reads no global config)",
        )
    root = Path(git.text(top.stdout).strip()).resolve()
    if not _ref_exists(root, "HEAD"):
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
    (branch, index, working files) is never modified. The files are written by the harness
    from the object store (``--no-checkout``): no filter or attribute of the repository
    applies, so the worktree holds the committed bytes, as the candidate will read them.
    """
    repo = Path(repo).absolute()
    # Relative paths would be read relative to `repo` because of `git -C`.
    target = Path(worktree).expanduser().absolute().resolve()
    git.in_repo(repo, "check-ref-format", "--branch", branch)
    git.in_repo(repo, "worktree", "prune")

    entry = _registered_worktree(repo, target)
    if entry is not None and entry.locked == _INITIALIZING:
        # An earlier creation was killed half-way: nothing in there is anyone's work.
        git.in_repo(repo, "worktree", "unlock", str(target))
        _remove_tree(target)
        git.in_repo(repo, "worktree", "prune")
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
    adding = ["worktree", "add", "--no-checkout", "--lock", "--reason", _INITIALIZING]
    if _ref_exists(repo, f"refs/heads/{branch}"):
        git.in_repo(repo, *adding, str(target), branch)
        base = _branch_base(repo, branch)
    else:
        base = git.in_repo(repo, "rev-parse", "--verify", "HEAD^{commit}").strip()
        # The sha, not HEAD: the user may commit while this runs.
        git.in_repo(repo, *adding, "-b", branch, str(target), base)
    common = git_common_dir(repo)
    tip = _rev(common, f"refs/heads/{branch}")
    export(common, tip, target)
    sync_index(common, target, tip)
    git.in_repo(repo, "worktree", "unlock", str(target))
    return base


def sync_index(common: Path, worktree: Path, commit: str) -> None:
    """Point the worktree's own index at ``commit``'s tree (git reads only the objects; the
    files are not looked at), so that a person's ``git status`` in the worktree shows what
    differs from the branch. Best effort: the harness itself never uses that index."""
    admin = _admin_dir(common, worktree)
    if admin is not None:
        with contextlib.suppress(WorkspaceError):
            git.bare(common, "read-tree", commit, index_file=admin / "index")


def _admin_dir(common: Path, worktree: Path) -> Path | None:
    """The git directory git keeps for ``worktree`` (``.git/worktrees/<name>``), found from
    git's own records, not from anything in the worktree."""
    target = Path(worktree).absolute().resolve()
    with contextlib.suppress(OSError):
        for admin in (common / "worktrees").iterdir():
            with contextlib.suppress(OSError):
                pointer = (admin / "gitdir").read_text().strip()
                if Path(pointer).parent.resolve() == target:
                    return admin
    return None


def clear_stale_locks(common: Path, worktree: Path, branch: str) -> list[Path]:
    """Remove the lock files a killed git process leaves (the worktree's ``index.lock`` and
    ``HEAD.lock``, the branch ref's lock); return those removed.

    The caller guarantees no other process is using the worktree: a lock found now is a
    leftover, not a git command in progress.
    """
    candidates = [common / f"refs/heads/{branch}.lock"]
    admin = _admin_dir(common, worktree)
    if admin is not None:
        candidates[:0] = [admin / "index.lock", admin / "HEAD.lock"]
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


def identity(common: Path) -> dict[str, str]:
    """The author and committer of the run's commits: the user's configured identity, or
    ``overnight <overnight@localhost>`` where none is set."""
    email = _user_config(common, "user.email")
    name = (_user_config(common, "user.name") if email else "") or FALLBACK_NAME
    email = email or FALLBACK_EMAIL
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def _user_config(common: Path, key: str) -> str:
    # Exit status 1 means "not set", which is an answer, not a failure. The user's global
    # config is read for this one question (their own file, not the worktree's).
    done = git.raw(git.bare_args(common, "config", "--get", key), cwd=common, env=git.user_env())
    return git.text(done.stdout).strip() if done.returncode == 0 else ""


@dataclass(frozen=True)
class Change:
    """One path a commit changes against another: ``status`` A, M, D or T (type)."""

    status: str
    path: str
    old_mode: str
    new_mode: str
    new_sha: str = ""

    @property
    def nested_repository(self) -> bool:
        return self.new_mode == "160000" or self.old_mode == "160000"

    @property
    def is_link(self) -> bool:
        """A symbolic link in the newer commit."""
        return self.new_mode == SYMLINK and self.status != "D"


def changes_between(repo: Path, old: str, new: str) -> list[Change]:
    """Every path that differs between commits ``old`` and ``new`` of ``repo`` (a checkout or
    a git directory; renames as a delete and an add), with its modes."""
    out = _objects(repo, "diff-tree", "-r", "-z", "--no-renames", "--raw", old, new, "--")
    fields = out.split(b"\0")
    found: list[Change] = []
    i = 0
    while i + 1 < len(fields):
        meta = fields[i].decode("utf-8", "replace")
        if not meta.startswith(":"):
            i += 1
            continue
        old_mode, new_mode, _a, new_sha, status = meta[1:].split(" ")
        path = os.fsdecode(fields[i + 1])
        found.append(Change(status[:1], path, old_mode, new_mode, new_sha))
        i += 2
    return found


def changed_links(repo: Path, changes: list[Change]) -> dict[str, str | None]:
    """The target of each symbolic link among ``changes`` (None: too long to read)."""
    return link_targets(_git_dir_of(repo), {c.path: c.new_sha for c in changes if c.is_link})


def links_of(repo: Path, commit: str) -> dict[str, str]:
    """Every symbolic link of ``commit``'s tree, with its target."""
    return tree_links(_git_dir_of(repo), commit)


def tree_paths(repo: Path, commit: str) -> tuple[set[str], set[str]]:
    """``(files, directories)`` of ``commit``'s tree, as relative ``/`` paths."""
    out = _objects(repo, "ls-tree", "-r", "-t", "-z", "--full-tree", commit)
    files: set[str] = set()
    dirs: set[str] = set()
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, _, name = entry.partition(b"\t")
        kind = meta.split(b" ")[1] if b" " in meta else b""
        (dirs if kind == b"tree" else files).add(os.fsdecode(name))
    return files, dirs


def _objects(repo: Path, *args: str) -> bytes:
    """A read of the object database of ``repo`` (the user's checkout, or a git directory),
    with no work tree."""
    return git.bare(_git_dir_of(repo), *args)


def _git_dir_of(repo: Path) -> Path:
    if (repo / "objects").is_dir() and (repo / "HEAD").exists():
        return repo
    return git_common_dir(repo)


def remove_worktree(target: Path) -> bool:
    """Remove the run directory at ``target`` (a worktree, or a verify checkout) and forget
    it in its repository (its branch stays); False when there was none."""
    target = Path(target).absolute()
    if not target.exists() and not target.is_symlink():
        return False
    common: Path | None = None
    pointer = target / ".git"
    if pointer.is_file() and not pointer.is_symlink():
        # The worktree's pointer, as git wrote it: ``gitdir: <common>/worktrees/<name>``.
        text = pointer.read_text(errors="replace").strip()
        if text.startswith("gitdir: "):
            admin = Path(text[len("gitdir: ") :])
            if admin.parent.name == "worktrees" and (admin.parent.parent / "objects").is_dir():
                common = admin.parent.parent
    _remove_tree(target)
    if common is not None:
        git.bare(common, "worktree", "prune")
    return True


def _remove_tree(target: Path, keep: str | None = None) -> None:
    """Remove ``target`` (or, with ``keep``, everything in it but that top-level name),
    never following a link out of it."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        target.unlink()
        return
    if not target.exists():
        return

    def retry(func: Callable[[str], object], path: str, _exc: object) -> None:
        # A command may have left a file or directory without write permission.
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
        with contextlib.suppress(OSError):
            func(path)

    if keep is None:
        shutil.rmtree(target, onerror=retry)
        return
    with contextlib.suppress(OSError):
        os.chmod(target, 0o700)
    with os.scandir(target) as it:
        entries = list(it)
    for entry in entries:
        if entry.name == keep:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, onerror=retry)
        else:
            os.unlink(entry.path)


def git_common_dir(repo: Path) -> Path:
    """The repository's git directory shared by all its worktrees (``.git`` of a checkout)."""
    out = git.in_repo(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()
    return Path(out).resolve()


def uncommitted(repo: Path) -> list[str]:
    """The paths of ``repo``'s checkout that differ from its HEAD (changed, staged or
    untracked; not ignored): what a night, which starts from HEAD, will not see."""
    out = git.run(
        ["-C", str(repo), "status", "--porcelain=v1", "-z", "--untracked-files=normal"],
        cwd=repo,
    )
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


def head(repo: Path) -> str:
    """The sha of the commit checked out in the user's checkout ``repo``."""
    return git.in_repo(repo, "rev-parse", "--verify", "HEAD^{commit}").strip()


def _rev(common: Path, ref: str) -> str:
    return git.text(git.bare(common, "rev-parse", "--verify", f"{ref}^{{commit}}")).strip()


def _write_patch_durably(path: Path, common: Path, old: str, new: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        private_dir(path.parent)
        with open_private(tmp, "wb") as handle:
            write_patch(common, old, new, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DiskFull(f"cannot write {path}: {exc}") from exc
        raise WorkspaceError(f"cannot write {path}: {exc}") from exc


@dataclass(frozen=True)
class _WorktreeEntry:
    path: Path
    branch: str | None
    locked: str | None


def _registered_worktree(repo: Path, target: Path) -> _WorktreeEntry | None:
    out = git.in_repo(repo, "worktree", "list", "--porcelain")
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
    reflog = git.raw(
        ["-C", str(repo), "reflog", "show", "--format=%H", f"refs/heads/{branch}", "--"], cwd=repo
    )
    entries = git.text(reflog.stdout).split()
    if reflog.returncode == 0 and entries:
        return entries[-1]
    return git.in_repo(repo, "merge-base", "HEAD", f"refs/heads/{branch}").strip()


def _ref_exists(repo: Path, ref: str) -> bool:
    done = git.raw(
        ["-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=repo
    )
    return done.returncode == 0


class Worktree:
    """The run's worktree and its clean checkout, as the lap uses them: a task's changes
    made a candidate commit (not on the branch yet), judged on a clean checkout of exactly
    that commit, then landed or discarded."""

    def __init__(
        self,
        path: Path,
        checkout: Path,
        repo: Path,
        branch: str,
        rules: CandidateRules | None = None,
    ) -> None:
        self.path = Path(path)
        self.checkout_path = Path(checkout)
        self.repo = Path(repo)
        self.branch = branch
        self.ref = f"refs/heads/{branch}"
        self.rules = rules or CandidateRules()
        self._common: Path | None = None

    @property
    def common(self) -> Path:
        if self._common is None:
            self._common = git_common_dir(self.repo)
        return self._common

    def head(self) -> str:
        """The branch's commit."""
        return _rev(self.common, self.ref)

    def places(self) -> Places:
        """The run's places as a model is shown them (``overnight.core.places``): the
        worktree and the clean checkout as ``.``, the run directory holding them as
        ``<run-dir>``, the user's repository as ``<workspace>``."""
        trees = [self.path, self.checkout_path]
        named = [(self.repo, WORKSPACE)]
        if self.path.absolute().parent == self.checkout_path.absolute().parent:
            named.append((self.path.absolute().parent, RUN_DIR))
        return Places.of(
            trees=(form for tree in trees for form in path_forms(tree)),
            named=((form, name) for path, name in named for form in path_forms(path)),
        )

    def candidate(self, message: str) -> Candidate:
        """The changes as a commit on top of the branch (its ``commit`` None when nothing
        would be committed), with what was left out of it."""
        return build(
            self.common, self.path, self.head(), self.rules, message, identity(self.common)
        )

    def changes(self, candidate: str, parent: str | None = None) -> list[Change]:
        """What ``candidate`` changes against ``parent`` (by default the branch)."""
        return changes_between(self.common, parent or self.head(), candidate)

    def link_targets(self, changes: list[Change]) -> dict[str, str | None]:
        """The target of each symbolic link among ``changes`` (None: too long to read)."""
        return changed_links(self.common, changes)

    def links(self, commit: str) -> dict[str, str]:
        """Every symbolic link of ``commit``'s tree, with its target."""
        return links_of(self.common, commit)

    def clean_checkout(self, commit: str | None) -> Path:
        """A fresh directory holding exactly ``commit`` (None: the branch as it stands),
        nothing any earlier command left there."""
        target = self.checkout_path.absolute()
        self.drop_checkout()
        target.mkdir(parents=True)
        export(self.common, commit or self.head(), target)
        return target

    def land(self, candidate: str | None) -> str | None:
        """Move the branch to a verified candidate (checked to be on top of it); nothing to
        land lands no commit. The worktree already holds the candidate's files."""
        if candidate is None:
            return None
        old = self.head()
        parent = git.text(git.bare(self.common, "rev-parse", f"{candidate}^")).strip()
        if parent != old:
            raise WorkspaceError(
                f"candidate {candidate[:12]} was not made on top of {self.branch} "
                f"({old[:12]}); it is not landed"
            )
        git.bare(
            self.common,
            "update-ref",
            "--create-reflog",
            "-m",
            "overnight: verified",
            self.ref,
            candidate,
            old,
        )
        sync_index(self.common, self.path, candidate)
        return candidate

    def discard(self, patch: Path, candidate: str | None) -> bool:
        """Throw the task's edits away: ``candidate``'s change is saved as ``patch`` (synced
        before anything is removed), then the worktree is written afresh from the branch.
        False when there was no change to save."""
        head = self.head()
        if candidate is not None:
            _write_patch_durably(patch, self.common, head, candidate)
        _remove_tree(self.path, keep=".git")
        export(self.common, head, self.path)
        sync_index(self.common, self.path, head)
        return candidate is not None

    def find_commit(self, base: str, marker: str) -> str | None:
        """The newest commit after ``base`` on the branch whose message holds ``marker``."""
        out = git.text(
            git.bare(self.common, "log", "-z", "--format=%H%n%B", f"{base}..{self.ref}", "--")
        )
        for record in out.split("\0"):  # newest first
            sha, _, body = record.partition("\n")
            if sha and marker in body:
                return sha
        return None

    def log_messages(self, base: str) -> list[tuple[str, str]]:
        """``(sha, subject)`` of every commit after ``base`` on the branch, oldest first."""
        out = git.text(
            git.bare(self.common, "log", "--reverse", "--format=%H %s", f"{base}..{self.ref}", "--")
        )
        return [(sha, subject) for sha, _, subject in (x.partition(" ") for x in out.splitlines())]

    def clear_stale_locks(self) -> list[Path]:
        return clear_stale_locks(self.common, self.path, self.branch)

    def file_text(self, commit: str, path: str, limit: int = 4 << 20) -> str | None:
        """The text of ``path`` in ``commit``'s tree; None when it is absent there, binary,
        or larger than ``limit`` bytes."""
        size = git.bare_raw(self.common, "cat-file", "-s", f"{commit}:{path}")
        if size.returncode != 0 or int(git.text(size.stdout).strip() or 0) > limit:
            return None
        done = git.bare_raw(self.common, "cat-file", "blob", f"{commit}:{path}")
        if done.returncode != 0 or b"\0" in done.stdout:
            return None
        return done.stdout.decode("utf-8", errors="replace")

    def diff_size(self, parent: str, commit: str) -> tuple[int, int]:
        """``(files, lines)`` that ``commit`` changes against ``parent``: lines added plus
        deleted, a binary file counting as a file with no lines."""
        out = git.text(
            git.bare(self.common, "diff", "--numstat", "--no-renames", "-z", parent, commit, "--")
        )
        files = lines = 0
        for record in out.split("\0"):
            added, _, rest = record.partition("\t")
            deleted, _, _path = rest.partition("\t")
            if not _path and not rest:
                continue
            files += 1
            if added.isdigit() and deleted.isdigit():
                lines += int(added) + int(deleted)
        return files, lines

    def commit_sizes(self, base: str) -> dict[str, tuple[int, int, list[str]]]:
        """For each commit after ``base`` on the branch: the files and lines (added plus
        deleted) it changes against its parent, and the paths, in one read of the log."""
        out = git.text(
            git.bare(
                self.common,
                "log",
                "--numstat",
                "--no-renames",
                "--format=@%H",
                f"{base}..{self.ref}",
                "--",
            )
        )
        sizes: dict[str, tuple[int, int, list[str]]] = {}
        sha = ""
        for line in out.splitlines():
            if line.startswith("@"):
                sha = line[1:].strip()
                sizes[sha] = (0, 0, [])
                continue
            added, tab, rest = line.partition("\t")
            deleted, _tab, path = rest.partition("\t")
            if not sha or not tab:
                continue
            files, lines, paths = sizes[sha]
            counted = int(added) + int(deleted) if added.isdigit() and deleted.isdigit() else 0
            sizes[sha] = (files + 1, lines + counted, [*paths, path])
        return sizes

    def tree_paths(self, commit: str) -> tuple[set[str], set[str]]:
        return tree_paths(self.common, commit)

    def diff_stat(self, base: str) -> str:
        """``--stat`` of the commits after ``base`` on the branch."""
        out = git.bare(
            self.common, "diff", "--stat", "--no-color", "--no-ext-diff", base, self.ref, "--"
        )
        return git.text(out).rstrip("\n")

    def delete_branch(self) -> None:
        """Delete the run's branch (a night that did nothing keeps none): only while it still
        points at ``base``, so that no commit is lost."""
        git.bare(self.common, "update-ref", "-d", self.ref)

    def drop_checkout(self) -> None:
        """Remove the verify checkout (and, for a run begun by an earlier version, its
        registration as a worktree)."""
        target = self.checkout_path.absolute()
        registered = (target / ".git").is_file()
        _remove_tree(target)
        if registered:
            with contextlib.suppress(WorkspaceError):
                git.bare(self.common, "worktree", "prune")
