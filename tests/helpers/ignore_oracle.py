"""Git as the oracle for the harness's ignore reader: a tree of files and ignore files is
written into a real repository, and the untracked files git lists are compared with those the
reader leaves in, walking the tree as the candidate does (an ignored directory is not
entered, so nothing below it comes back)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from overnight.core.ignore import IgnoreStack, read_rules

#: A directory's entries: a name maps to None (a file) or to the directory it names.
Tree = dict[str, "Tree | None"]


@dataclass
class Case:
    """A tree, the ignore files written into it (by directory, ``""`` the top) and the
    repository's ``info/exclude``."""

    tree: Tree
    ignores: dict[str, bytes] = field(default_factory=dict)
    exclude: bytes = b""


def _fs(rel: str) -> bytes:
    return rel.encode("utf-8", "surrogateescape")


def git_env(home: Path) -> dict[str, str]:
    """Nothing of the user's or the system's git configuration (no global excludes file)."""
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "LC_ALL": "C",
    }


@dataclass
class Oracle:
    """One repository, emptied and written again for each case."""

    root: Path
    env: dict[str, str] = field(repr=False)

    @classmethod
    def create(cls, where: Path) -> Oracle:
        home = where / "home"
        home.mkdir(parents=True)
        root = where / "repo"
        env = git_env(home)
        subprocess.run(["git", "init", "-q", "--template=", str(root)], check=True, env=env)
        subprocess.run(
            ["git", "-C", str(root), "config", "core.excludesFile", os.devnull],
            check=True,
            env=env,
        )
        (root / ".git" / "info").mkdir()
        return cls(root, env)

    def write(self, case: Case) -> None:
        for entry in os.scandir(self.root):
            if entry.name != ".git":
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
        top = os.fsencode(self.root)
        _materialize(top, case.tree)
        for rel, data in case.ignores.items():
            with open(os.path.join(top, _fs(rel), b".gitignore"), "wb") as out:
                out.write(data)
        (self.root / ".git" / "info" / "exclude").write_bytes(case.exclude)

    def git_untracked(self) -> set[bytes]:
        """``git ls-files --others --exclude-standard``: the untracked files git does not
        ignore."""
        done = subprocess.run(
            ["git", "-C", str(self.root), "ls-files", "--others", "--exclude-standard", "-z"],
            capture_output=True,
            check=True,
            env=self.env,
        )
        return {path for path in done.stdout.split(b"\0") if path}

    def reader_untracked(self) -> set[bytes]:
        """The files the harness's reader does not ignore."""
        top = os.fsencode(self.root)
        exclude = (self.root / ".git" / "info" / "exclude").read_bytes()
        found: set[bytes] = set()
        stack = [(b"", IgnoreStack(fallback=read_rules(exclude)))]
        while stack:
            rel, ignores = stack.pop()
            here = os.path.join(top, rel) if rel else top
            try:
                with open(os.path.join(here, b".gitignore"), "rb") as src:
                    rules = read_rules(src.read(), rel.decode("utf-8", "surrogateescape"))
                ignores = ignores.push(rules)
            except FileNotFoundError:
                pass
            for entry in os.scandir(here):
                if not rel and entry.name == b".git":
                    continue
                child = rel + b"/" + entry.name if rel else entry.name
                if entry.is_dir(follow_symlinks=False):
                    if not ignores.ignored(child, True):
                        stack.append((child, ignores))
                elif not ignores.ignored(child, False):
                    found.add(child)
        return found


def _materialize(where: bytes, tree: Tree) -> None:
    for name, below in tree.items():
        path = os.path.join(where, _fs(name))
        if below is None:
            with open(path, "wb") as out:
                out.write(b"x")
        else:
            os.mkdir(path)
            _materialize(path, below)


def directories(tree: Tree, prefix: str = "") -> list[str]:
    """Every directory of ``tree`` (``""`` the top), parents first."""
    found = [prefix]
    for name, below in tree.items():
        if below is not None:
            found += directories(below, f"{prefix}/{name}" if prefix else name)
    return found


def paths(tree: Tree, prefix: str = "") -> list[str]:
    """Every path of ``tree``, files and directories."""
    found: list[str] = []
    for name, below in tree.items():
        path = f"{prefix}/{name}" if prefix else name
        found.append(path)
        if below is not None:
            found += paths(below, path)
    return found


def disagreement(oracle: Oracle, case: Case) -> str | None:
    """None when the reader and git leave in the same files, else what differs."""
    oracle.write(case)
    expected, found = oracle.git_untracked(), oracle.reader_untracked()
    if expected == found:
        return None
    return (
        f"git leaves in but the reader ignores: {sorted(expected - found)}; "
        f"the reader leaves in but git ignores: {sorted(found - expected)}; {case!r}"
    )
