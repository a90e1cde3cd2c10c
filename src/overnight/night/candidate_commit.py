"""A task's candidate commit, built from the worktree by the harness, not by git.

The harness walks the worktree itself (``os.scandir`` and ``lstat``, never following a
link), decides which files make the candidate (:mod:`overnight.core.candidate_rules`), hashes each
changed file with a streaming SHA, and hands git only the bytes of the files that changed
(``hash-object -w --no-filters --stdin``, fed from a file the harness opened with
``O_NOFOLLOW``). The tree is built in a private index file (``read-tree``, ``update-index
--index-info``, ``write-tree``) and the commit with ``commit-tree``: git touches the object
database and its own private index, never the worktree, and reads no attribute, filter or
config the model could have written.

The other direction is the same: :func:`export` writes a commit's files into a directory from
``cat-file --batch``, streamed, with no attribute or filter applied.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from overnight.core.candidate_rules import (
    CandidateRules,
    Notes,
    Refusal,
    is_git_name,
    nested_repository,
    refused_by_git,
    too_large,
    unreadable_rules,
)
from overnight.core.errors import DiskFull, WorkspaceError
from overnight.core.ignore import (
    MAX_IGNORE_FILE_BYTES,
    IgnoreStack,
    PatternTooLarge,
    read_rules,
)
from overnight.night import git

CHUNK = 1 << 20

#: Most files a candidate may add (beyond it the task is parked: the harness's time and
#: memory would grow with what the model made).
MAX_NEW_FILES = 20_000

GITLINK = "160000"
SYMLINK = "120000"


@dataclass(frozen=True)
class Entry:
    mode: str
    sha: str


@dataclass
class Candidate:
    """A task's candidate commit (None: nothing that would be committed changed) and what
    the harness left out of it."""

    commit: str | None
    notes: Notes = field(default_factory=Notes)


def object_format(git_dir: Path) -> str:
    fmt = git.text(git.bare(git_dir, "rev-parse", "--show-object-format")).strip()
    return fmt or "sha1"


def read_tree(git_dir: Path, commit: str) -> dict[str, Entry]:
    """Every file of ``commit`` (blobs, links, gitlinks) by ``/`` path."""
    out = git.bare(git_dir, "ls-tree", "-r", "-z", "--full-tree", commit)
    entries: dict[str, Entry] = {}
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, name = record.partition(b"\t")
        mode, _kind, sha = meta.decode().split(" ")
        entries[os.fsdecode(name)] = Entry(mode, sha)
    return entries


def _parents(paths: dict[str, Entry]) -> set[str]:
    dirs: set[str] = set()
    for path in paths:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:depth]))
    return dirs


class _Hasher:
    """The object id git would give a blob, computed here, streamed."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def blob(self, data: bytes) -> str:
        h = hashlib.new(self.fmt)
        h.update(b"blob %d\0" % len(data))
        h.update(data)
        return h.hexdigest()

    def file(self, fd: int, size: int) -> str:
        h = hashlib.new(self.fmt)
        h.update(b"blob %d\0" % size)
        left = size
        while left > 0:
            chunk = os.read(fd, min(CHUNK, left))
            if not chunk:
                raise OSError(f"the file shrank while it was read ({left} bytes short)")
            h.update(chunk)
            left -= len(chunk)
        return h.hexdigest()


@dataclass
class _Found:
    """A file of the worktree that goes into the candidate."""

    mode: str
    sha: str
    path: bytes
    """Absolute path, to store its bytes (None-like empty for a link)."""
    link: bytes | None = None


class _Walk:
    def __init__(
        self, root: Path, base: dict[str, Entry], rules: CandidateRules, fallback: IgnoreStack
    ) -> None:
        self.root = os.fsencode(root)
        self.base = base
        self.base_dirs = _parents(base)
        self.rules = rules
        self.fallback = fallback
        self.notes = Notes()
        self.found: dict[str, _Found] = {}
        """Files whose content is (or may be) not the base's, by path."""
        self.kept: set[str] = set()
        """Base paths that stay as they are (unchanged, dropped, or under a refused place)."""
        self.kept_under: list[str] = []
        self.new_files = 0
        self.hasher: _Hasher | None = None

    def run(self, hasher: _Hasher) -> None:
        self.hasher = hasher
        stack: list[tuple[str, IgnoreStack, str]] = [("", self.fallback, "normal")]
        while stack and self.new_files <= MAX_NEW_FILES:
            rel, ignores, mode = stack.pop()
            stack += self._directory(rel, ignores, mode)

    def _directory(
        self, rel: str, ignores: IgnoreStack, mode: str
    ) -> list[tuple[str, IgnoreStack, str]]:
        path = os.path.join(self.root, os.fsencode(rel)) if rel else self.root
        try:
            with os.scandir(path) as it:
                names = sorted(e.name for e in it)
        except OSError:
            return []
        prefix = rel + "/" if rel else ""
        for name in names:
            if rel and is_git_name(os.fsdecode(name)):
                if mode == "normal":
                    self.notes.refused.append(nested_repository(rel, prefix + os.fsdecode(name)))
                self.kept_under.append(prefix)
                return []
        if mode == "normal":
            ignores = self._ignore_file(path, rel, ignores)
        below: list[tuple[str, IgnoreStack, str]] = []
        for name in names:
            name_s = os.fsdecode(name)
            child = prefix + name_s
            if not rel and name_s == ".git":
                continue
            if not rel and is_git_name(name_s):
                self.notes.refused.append(nested_repository("", child))
                continue
            try:
                st = os.lstat(os.path.join(path, name))
            except OSError:
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            entry = self.base.get(child)
            if entry is not None and entry.mode == GITLINK:
                self.kept.add(child)  # a submodule of the base stays as the base has it
                continue
            included = self.rules.included(child, is_dir)
            if self.rules.generated(child, is_dir) and not included:
                if is_dir:
                    tracked_below = child in self.base_dirs
                    if mode == "normal" and not tracked_below and not ignores.ignored(child, True):
                        self.notes.exclude(child + "/")
                    if tracked_below or self.rules.may_include_under(child):
                        below.append((child, ignores, "excluded"))
                    continue
                if entry is not None:
                    self._keep_or_drop(child, st, entry)
                elif mode == "normal" and not ignores.ignored(child, False):
                    self.notes.exclude(child)
                continue
            if is_dir:
                if included or (mode == "normal" and not ignores.ignored(child, True)):
                    below.append((child, ignores, "normal"))
                elif child in self.base_dirs or self.rules.may_include_under(child):
                    below.append((child, ignores, mode if mode != "normal" else "tracked"))
                continue
            if entry is not None:
                if mode == "excluded" and not included:
                    self._keep_or_drop(child, st, entry)
                else:
                    self._file(child, st, entry)
                continue
            if included or (mode == "normal" and not ignores.ignored(child, False)):
                self._file(child, st, None)
            elif mode == "excluded" and rel in self.base_dirs:
                self.notes.exclude(child)  # new beside tracked generated files: say so
        return below

    def _ignore_file(self, path: bytes, rel: str, ignores: IgnoreStack) -> IgnoreStack:
        name = os.path.join(path, b".gitignore")
        where = (rel + "/" if rel else "") + ".gitignore"
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return ignores  # absent, or a link: git does not follow one either
        try:
            size = os.fstat(fd).st_size
            if size > MAX_IGNORE_FILE_BYTES:
                self.notes.refused.append(unreadable_rules(where, f"{size} bytes"))
                return ignores
            data = os.read(fd, MAX_IGNORE_FILE_BYTES + 1)
        finally:
            os.close(fd)
        try:
            return ignores.push(read_rules(data, rel))
        except PatternTooLarge as exc:
            self.notes.refused.append(unreadable_rules(where, str(exc)))
            return ignores

    def _keep_or_drop(self, rel: str, st: os.stat_result, entry: Entry) -> None:
        """A tracked generated file: its base version stays; a change to it is noted."""
        self.kept.add(rel)
        found = self._describe(rel, st, hash_large=True)
        if found is None or found.sha != entry.sha or found.mode != entry.mode:
            self.notes.drop(rel)

    def _file(self, rel: str, st: os.stat_result, entry: Entry | None) -> None:
        if entry is None:
            self.new_files += 1
            if self.new_files > MAX_NEW_FILES:
                return
        found = self._describe(rel, st, hash_large=entry is not None)
        if found is None:
            if entry is not None:
                self.kept.add(rel)
            return
        if found.sha == "":
            self.notes.refused.append(too_large(rel, st.st_size, self.rules.max_file_bytes))
            if entry is not None:
                self.kept.add(rel)
            return
        if entry is not None and entry.sha == found.sha and entry.mode == found.mode:
            self.kept.add(rel)
            return
        if entry is not None and st.st_size > self.rules.max_file_bytes:
            self.notes.refused.append(too_large(rel, st.st_size, self.rules.max_file_bytes))
            self.kept.add(rel)
            return
        self.found[rel] = found

    def _describe(self, rel: str, st: os.stat_result, *, hash_large: bool) -> _Found | None:
        """The file's mode and object id (empty id: too large to hash, not read); None for
        what git would not store (a fifo, a socket, a device) or what vanished."""
        assert self.hasher is not None
        full = os.path.join(self.root, os.fsencode(rel))
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(full)
            return _Found(SYMLINK, self.hasher.blob(target), full, link=target)
        if not stat.S_ISREG(st.st_mode):
            self.notes.exclude(f"{rel} (not a regular file)")
            return None
        mode = "100755" if st.st_mode & stat.S_IXUSR else "100644"
        if st.st_size > self.rules.max_file_bytes and not hash_large:
            return _Found(mode, "", full)
        try:
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):
                return None
            sha = self.hasher.file(fd, opened.st_size)
        finally:
            os.close(fd)
        return _Found(mode, sha, full)

    def deleted(self) -> list[str]:
        gone: list[str] = []
        for path in self.base:
            if path in self.kept or path in self.found:
                continue
            if any(path.startswith(p) for p in self.kept_under):
                continue
            if self.rules.generated_anywhere(path):
                self.notes.drop(path)  # a tracked generated file stays as the base has it
                continue
            gone.append(path)
        return gone


def info_exclude(git_dir: Path) -> IgnoreStack:
    """The repository's own ``info/exclude`` (the user's file, lowest precedence)."""
    try:
        data = (git_dir / "info" / "exclude").read_bytes()
        # never read in part: a file over the limit gives no rules
        rules = read_rules(data) if len(data) <= MAX_IGNORE_FILE_BYTES else []
    except (OSError, PatternTooLarge):
        rules = []
    return IgnoreStack(fallback=rules)


def _store(git_dir: Path, found: _Found) -> None:
    """Put one file's bytes in the object store, streamed, and check git agrees on its id."""
    proc = git.popen(git_dir, "hash-object", "-w", "--no-filters", "--stdin")
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        if found.link is not None:
            proc.stdin.write(found.link)
        else:
            fd = os.open(found.path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as src:
                while chunk := src.read(CHUNK):
                    proc.stdin.write(chunk)
        proc.stdin.close()
        out = proc.stdout.read()
        err = proc.stderr.read()
    finally:
        code = proc.wait()
    if code != 0:
        raise WorkspaceError(f"git hash-object failed (exit {code}): {git.text(err).strip()}")
    if out.strip().decode() != found.sha:
        raise WorkspaceError(f"{os.fsdecode(found.path)} changed while it was stored")


def build(
    git_dir: Path,
    worktree: Path,
    head: str,
    rules: CandidateRules,
    message: str,
    identity: dict[str, str],
) -> Candidate:
    """The candidate of ``worktree`` on top of ``head``: a commit off the branch (or None when
    nothing that would be committed changed), with the notes of what was left out."""
    base = read_tree(git_dir, head)
    walk = _Walk(worktree, base, rules, info_exclude(git_dir))
    walk.run(_Hasher(object_format(git_dir)))
    notes = walk.notes
    if walk.new_files > MAX_NEW_FILES:
        notes.refused.append(_too_many())
        return Candidate(None, notes)
    # Built even with refusals (without the refused paths), so a parked patch holds the rest.
    deleted = walk.deleted()
    if not walk.found and not deleted:
        return Candidate(None, notes)
    for found in walk.found.values():
        _store(git_dir, found)
    zero = "0" * len(head)
    with tempfile.TemporaryDirectory(prefix="overnight-index-") as tmp:
        index = Path(tmp) / "index"
        git.bare(git_dir, "read-tree", head, index_file=index)
        removals = b"".join(b"0 %s\t%s\0" % (zero.encode(), os.fsencode(p)) for p in deleted)
        additions = b"".join(
            b"%s %s\t%s\0" % (f.mode.encode(), f.sha.encode(), os.fsencode(p))
            for p, f in walk.found.items()
        )
        try:
            for batch in (removals, additions):
                if batch:
                    _update_index(git_dir, index, batch)
        except _GitRefused as exc:
            notes.refused.append(refused_by_git(str(exc)))
            return Candidate(None, notes)
        tree = git.text(git.bare(git_dir, "write-tree", index_file=index)).strip()
    if tree == git.text(git.bare(git_dir, "rev-parse", f"{head}^{{tree}}")).strip():
        return Candidate(None, notes)
    commit = git.bare(
        git_dir,
        "commit-tree",
        tree,
        "-p",
        head,
        stdin=message.encode(),
        env=git.git_env(extra=identity),
    )
    return Candidate(git.text(commit).strip(), notes)


class _GitRefused(Exception):
    pass


def _update_index(git_dir: Path, index: Path, records: bytes) -> None:
    args = git.bare_args(git_dir, "update-index", "-z", "--index-info")
    done = git.raw(args, cwd=git_dir, env=git.git_env(index), stdin=records)
    message = git.text(done.stderr).strip()
    if done.returncode != 0 or message:
        # git skips a path it will not store ("Ignoring path x/.git/y") and says so.
        raise _GitRefused(message or f"exit {done.returncode}")


def _too_many() -> Refusal:
    return Refusal(
        path=".",
        reason=(
            f"the candidate adds more than {MAX_NEW_FILES} files, too many to store: "
            "exclude generated ones with [run] exclude"
        ),
        judges=False,
    )


# -- from a commit to files ---------------------------------------------------------------


def export(git_dir: Path, commit: str, target: Path) -> None:
    """Write every file of ``commit`` into ``target`` (which holds nothing but, at most, a
    top-level ``.git`` file), streamed from the object store; a gitlink becomes an empty
    directory. Nothing of the repository's attributes or filters applies. A full disk is
    :class:`DiskFull` (the night can be resumed once there is room), any other failure to
    write :class:`WorkspaceError`."""
    try:
        _export(git_dir, commit, target)
    except OSError as exc:
        detail = f"cannot write {commit[:12]} into {target}: {exc}"
        if exc.errno == errno.ENOSPC or git.disk_nearly_full(target):
            raise DiskFull(detail) from exc
        raise WorkspaceError(detail) from exc


def _export(git_dir: Path, commit: str, target: Path) -> None:
    entries = read_tree(git_dir, commit)
    root = os.fsencode(target)
    with _Cat(git_dir) as cat:
        for rel, entry in sorted(entries.items()):
            path = os.path.join(root, os.fsencode(rel))
            parent = os.path.dirname(path)
            os.makedirs(parent, exist_ok=True)
            if entry.mode == GITLINK:
                os.makedirs(path, exist_ok=True)
            elif entry.mode == SYMLINK:
                os.symlink(cat.read_small(entry.sha), path)
            else:
                perm = 0o755 if entry.mode == "100755" else 0o644
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, perm)
                with os.fdopen(fd, "wb") as out:
                    cat.copy(entry.sha, out)


class _Cat:
    """``git cat-file --batch``, one object at a time, its bytes streamed."""

    def __init__(self, git_dir: Path) -> None:
        self.proc = git.popen(git_dir, "cat-file", "--batch")

    def __enter__(self) -> _Cat:
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        self.proc.kill()
        self.proc.wait()

    def _ask(self, sha: str) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(sha.encode() + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        if len(header) != 3 or header[1] != b"blob":
            raise WorkspaceError(f"object {sha} is not a blob in the repository")
        return int(header[2])

    def _chunks(self, size: int) -> Iterator[bytes]:
        assert self.proc.stdout is not None
        left = size
        while left > 0:
            chunk = self.proc.stdout.read(min(CHUNK, left))
            if not chunk:
                raise WorkspaceError("git cat-file ended early")
            left -= len(chunk)
            yield chunk
        self.proc.stdout.read(1)  # the newline after the object

    def copy(self, sha: str, out: IO[bytes]) -> None:
        for chunk in self._chunks(self._ask(sha)):
            out.write(chunk)

    def read_small(self, sha: str) -> bytes:
        return b"".join(self._chunks(self._ask(sha)))

    def read_at_most(self, sha: str, limit: int) -> bytes | None:
        """The object's bytes, or None (its bytes skipped) when it is larger than ``limit``."""
        size = self._ask(sha)
        data = b"".join(self._chunks(size)) if size <= limit else None
        if data is None:
            for _chunk in self._chunks(size):
                pass
        return data


#: A link's target is at most this long (Linux's ``PATH_MAX``); a longer one is not read.
MAX_LINK_BYTES = 4096


def link_targets(git_dir: Path, shas: dict[str, str]) -> dict[str, str | None]:
    """The target of each link (path -> object id), as a string (None: longer than
    ``MAX_LINK_BYTES``), read from the object store: never followed, never parsed."""
    if not shas:
        return {}
    out: dict[str, str | None] = {}
    with _Cat(git_dir) as cat:
        for path, sha in shas.items():
            data = cat.read_at_most(sha, MAX_LINK_BYTES)
            out[path] = None if data is None else os.fsdecode(data)
    return out


def tree_links(git_dir: Path, commit: str) -> dict[str, str]:
    """Every symbolic link of ``commit``'s tree, with its target (one too long is left out)."""
    shas = {p: e.sha for p, e in read_tree(git_dir, commit).items() if e.mode == SYMLINK}
    return {p: t for p, t in link_targets(git_dir, shas).items() if t is not None}


def write_patch(git_dir: Path, old: str, new: str, target: IO[bytes]) -> None:
    """The change from commit ``old`` to ``new`` as a patch ``git apply`` takes, written
    straight into ``target`` by git."""
    git.bare(
        git_dir,
        "diff-tree",
        "-p",
        "-r",
        "--binary",
        "--full-index",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        old,
        new,
        "--",
        stdout=target,
    )
