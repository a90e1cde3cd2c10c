"""Candidates built by the harness from a real worktree: what goes in, what is left out and
said so, what is refused, and that git never reads the worktree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from overnight.core.candidate_rules import rules_for
from overnight.core.errors import DiskFull
from overnight.night.worktree import Worktree, create_worktree

BRANCH = "overnight/run-1"
IDENTITY = ("-c", "user.name=Tester", "-c", "user.email=tester@example.com")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    files = {
        "calc.py": "def add(a, b):\n    return a - b\n",
        "ignored_dir/.keep": "tracked inside an ignored directory\n",
        ".gitignore": "*.log\nignored_dir/\n",
        "pkg.egg-info/PKG-INFO": "Metadata-Version: 1.2\n",
        "src/mod.py": "X = 1\n",
    }
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    git(path, "add", "-A", "-f")
    git(path, *IDENTITY, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def wt(repo: Path, tmp_path: Path) -> Worktree:
    path = tmp_path / "runs" / "wt"
    create_worktree(repo, path, BRANCH)
    return Worktree(path, tmp_path / "runs" / "co", repo, BRANCH, rules_for([], [], 1))


def names(repo: Path, sha: str) -> list[str]:
    return git(repo, "ls-tree", "-r", "--name-only", sha).split()


def test_generated_files_stay_out_and_are_named(repo: Path, wt: Worktree) -> None:
    (wt.path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (wt.path / "__pycache__").mkdir()
    (wt.path / "__pycache__" / "calc.cpython-312.pyc").write_bytes(b"\x00")
    (wt.path / "src" / "mod.pyc").write_bytes(b"\x00")
    (wt.path / "build" / "lib").mkdir(parents=True)
    (wt.path / "build" / "lib" / "calc.py").write_text("copy\n")
    (wt.path / "pkg.egg-info" / "PKG-INFO").write_text("Metadata-Version: 2.1\n")
    (wt.path / "pkg.egg-info" / "SOURCES.txt").write_text("calc.py\n")
    (wt.path / "debug.log").write_text("ignored by the repository: not named\n")
    made = wt.candidate("t")
    assert made.commit is not None
    assert [c.path for c in wt.changes(made.commit)] == ["calc.py"]
    assert sorted(made.notes.excluded) == [
        "__pycache__/",
        "build/",
        "pkg.egg-info/SOURCES.txt",
        "src/mod.pyc",
    ]
    assert made.notes.dropped == ["pkg.egg-info/PKG-INFO"]
    assert not made.notes.refused
    # The verify checkout is the commit: nothing excluded is there.
    where = wt.clean_checkout(made.commit)
    assert not (where / "build").exists() and not (where / "__pycache__").exists()
    assert (where / "pkg.egg-info" / "PKG-INFO").read_text() == "Metadata-Version: 1.2\n"


def test_a_tracked_file_in_an_ignored_directory_is_still_the_candidates(wt: Worktree) -> None:
    (wt.path / "ignored_dir" / ".keep").write_text("edited\n")
    (wt.path / "ignored_dir" / "new.txt").write_text("ignored, untracked\n")
    made = wt.candidate("t")
    assert made.commit is not None
    assert [c.path for c in wt.changes(made.commit)] == ["ignored_dir/.keep"]


def test_a_link_is_committed_as_its_target_and_never_followed(repo: Path, wt: Worktree) -> None:
    secret = wt.path.parent / "secret.txt"
    secret.write_text("outside the worktree\n")
    (wt.path / "link").symlink_to(secret)
    made = wt.candidate("t")
    assert made.commit is not None
    assert git(repo, "cat-file", "-p", f"{made.commit}:link") == str(secret)
    assert "120000" in git(repo, "ls-tree", made.commit, "link")
    where = wt.clean_checkout(made.commit)
    assert os.readlink(where / "link") == str(secret)


@pytest.mark.parametrize(
    "make",
    [
        lambda d: (d / ".git").mkdir(),
        lambda d: (d / ".git").write_text("gitdir: /somewhere/else\n"),
        lambda d: (d / ".GIT").mkdir(),
        lambda d: (d / ".git.").mkdir(),
    ],
    ids=["directory", "gitfile", "upper-case", "trailing-dot"],
)
def test_a_git_directory_anywhere_is_refused_and_never_entered(
    repo: Path, wt: Worktree, make: object
) -> None:
    nested = wt.path / "vendor" / "lib"
    nested.mkdir(parents=True)
    (nested / "code.py").write_text("x = 1\n")
    make(nested)  # type: ignore[operator]
    (wt.path / "calc.py").write_text("changed\n")
    made = wt.candidate("t")
    [refusal] = made.notes.refused
    assert refusal.path == "vendor/lib" and refusal.judges
    assert refusal.reason.startswith("`vendor/lib` is a nested git repository")
    assert made.commit is not None
    assert names(repo, made.commit) == names(repo, wt.head())  # nothing of it committed


def test_a_file_over_the_limit_is_refused_and_never_hashed(repo: Path, wt: Worktree) -> None:
    blob = os.urandom(1 << 20) + b"more"
    (wt.path / "big.bin").write_bytes(blob)
    made = wt.candidate("t")
    [refusal] = made.notes.refused
    assert refusal.reason.startswith("`big.bin` is 1.0 MiB, above [run] max_file_mb")
    assert made.commit is None
    sha = (
        subprocess.run(
            ["git", "hash-object", "--stdin"], input=blob, capture_output=True, check=True
        )
        .stdout.decode()
        .strip()
    )
    assert subprocess.run(["git", "-C", str(repo), "cat-file", "-e", sha]).returncode != 0


def test_the_worktrees_attributes_and_config_are_never_read(
    repo: Path, wt: Worktree, tmp_path: Path
) -> None:
    fired = tmp_path / "fired"
    git(repo, "config", "filter.x.clean", f"sh -c 'touch {fired}; cat'")
    git(repo, "config", "filter.x.smudge", f"sh -c 'touch {fired}; cat'")
    (wt.path / ".gitattributes").write_text("* filter=x text eol=crlf\n")
    (wt.path / "calc.py").write_text("raw\nbytes\n")
    made = wt.candidate("t")
    assert made.commit is not None
    assert git(repo, "cat-file", "-p", f"{made.commit}:calc.py") == "raw\nbytes\n"
    wt.land(made.commit)
    where = wt.clean_checkout(None)
    assert (where / "calc.py").read_bytes() == b"raw\nbytes\n"
    wt.discard(tmp_path / "p.patch", None)
    assert not fired.exists()


def test_a_full_disk_while_writing_the_checkout_is_disk_full(
    repo: Path, tmp_path: Path, wt: Worktree
) -> None:
    (wt.path / "big.bin").write_bytes(b"\0" * (900 << 10))
    made = wt.candidate("t").commit
    assert made is not None
    small = tmp_path / "small"
    small.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(small)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        full = Worktree(wt.path, small / "co", repo, BRANCH, wt.rules)
        with pytest.raises(DiskFull):
            full.clean_checkout(made)
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
