"""The workspace functions against real git repositories made in tmp_path."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from overnight.core.errors import ConfigError, WorkspaceError
from overnight.night.worktree import Worktree, check_repository, create_worktree

IDENTITY = ("-c", "user.name=Tester", "-c", "user.email=tester@example.com")
BRANCH = "overnight/run-1"


@pytest.fixture(autouse=True)
def bare_git_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No global or system git config, hence no identity: every test sees plain git."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for name in (
        "XDG_CONFIG_HOME",
        "GIT_CONFIG_GLOBAL",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "EMAIL",
    ):
        monkeypatch.delenv(name, raising=False)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("hello\n")
    (path / "data.txt").write_text("one\ntwo\n")
    (path / ".gitignore").write_text("*.log\n")
    git(path, "add", "-A")
    git(path, *IDENTITY, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def worktree(repo: Path, tmp_path: Path) -> Path:
    path = tmp_path / "runs" / "wt"
    create_worktree(repo, path, BRANCH)
    return path


@pytest.fixture
def wt(repo: Path, worktree: Path, tmp_path: Path) -> Worktree:
    return Worktree(worktree, tmp_path / "runs" / "checkout", repo, BRANCH)


def commit(w: Worktree, message: str) -> str:
    """The worktree's changes landed as one commit (an empty one when nothing changed)."""
    made = w.candidate(message).commit
    if made is None:
        tree = git(w.repo, "rev-parse", f"{w.head()}^{{tree}}").strip()
        made = git(w.repo, *IDENTITY, "commit-tree", tree, "-p", w.head(), "-m", message).strip()
    assert w.land(made) == made
    return made


def files_of(where: Path) -> dict[str, str]:
    return {
        p.relative_to(where).as_posix(): p.read_text()
        for p in sorted(where.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(where).parts
    }


# check_repository


def test_check_repository_returns_top_level(repo: Path) -> None:
    sub = repo / "sub"
    sub.mkdir()
    assert check_repository(sub) == repo.resolve()
    assert check_repository(repo) == repo.resolve()


def _no_commit_repo(tmp_path: Path) -> Path:
    path = tmp_path / "empty-repo"
    path.mkdir()
    git(path, "init", "-q")
    return path


def _a_file(tmp_path: Path) -> Path:
    path = tmp_path / "file.txt"
    path.write_text("x")
    return path


def _plain_dir(tmp_path: Path) -> Path:
    path = tmp_path / "plain"
    path.mkdir()
    return path


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda tmp: tmp / "missing", "does not exist"),
        (_a_file, "not a directory"),
        (_plain_dir, "not inside a git repository"),
        (_no_commit_repo, "no commit yet"),
    ],
    ids=["missing", "file", "not-a-repo", "no-commits"],
)
def test_check_repository_rejects(
    tmp_path: Path, make: Callable[[Path], Path], problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        check_repository(make(tmp_path))
    assert caught.value.field == "workspace"
    assert problem in caught.value.problem
    assert caught.value.fix


# create_worktree


def _snapshot(repo: Path) -> dict[str, str]:
    return {
        "branch": git(repo, "symbolic-ref", "HEAD"),
        "head": git(repo, "rev-parse", "HEAD"),
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "unstaged": git(repo, "diff"),
        "staged": git(repo, "diff", "--cached"),
        "readme": (repo / "README.md").read_text(),
        "data": (repo / "data.txt").read_text(),
        "untracked": (repo / "notes.txt").read_text(),
    }


def test_create_worktree_leaves_the_users_checkout_alone(repo: Path, tmp_path: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "README.md").write_text("hello\nuncommitted edit\n")
    (repo / "data.txt").write_text("one\ntwo\nstaged\n")
    git(repo, "add", "data.txt")
    (repo / "notes.txt").write_text("untracked\n")
    before = _snapshot(repo)

    wt = tmp_path / "runs" / "wt"
    base = create_worktree(repo, wt, BRANCH)

    assert _snapshot(repo) == before
    assert before["branch"] == "refs/heads/feature\n"
    assert base == before["head"].strip()
    assert git(repo, "rev-parse", f"refs/heads/{BRANCH}").strip() == base
    assert git(wt, "symbolic-ref", "HEAD").strip() == f"refs/heads/{BRANCH}"
    # The worktree holds the committed tree only: none of the user's pending edits.
    assert (wt / "README.md").read_text() == "hello\n"
    assert (wt / "data.txt").read_text() == "one\ntwo\n"
    assert not (wt / "notes.txt").exists()
    assert Worktree(wt, tmp_path / "co", repo, BRANCH).candidate("t").commit is None


def test_create_worktree_twice_reuses_it(repo: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    base = create_worktree(repo, wt, BRANCH)
    (wt / "work.txt").write_text("done\n")
    done = commit(Worktree(wt, tmp_path / "co", repo, BRANCH), "task one")
    # The user moves on meanwhile: the base stays what the branch started from.
    (repo / "README.md").write_text("later\n")
    git(repo, *IDENTITY, "commit", "-q", "-am", "user work")

    assert create_worktree(repo, wt, BRANCH) == base
    assert git(wt, "rev-parse", "HEAD").strip() == done
    assert (wt / "work.txt").read_text() == "done\n"


def test_create_worktree_restores_a_missing_worktree_for_an_existing_branch(
    repo: Path, tmp_path: Path
) -> None:
    wt = tmp_path / "wt"
    base = create_worktree(repo, wt, BRANCH)
    (wt / "work.txt").write_text("done\n")
    done = commit(Worktree(wt, tmp_path / "co", repo, BRANCH), "task one")
    git(repo, "worktree", "remove", "--force", str(wt))
    assert not wt.exists()

    assert create_worktree(repo, wt, BRANCH) == base
    assert git(wt, "rev-parse", "HEAD").strip() == done
    assert (wt / "work.txt").read_text() == "done\n"  # written from the branch


def test_create_worktree_redoes_an_interrupted_creation(repo: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    base = create_worktree(repo, wt, BRANCH)
    # What a kill during `git worktree add` leaves: still locked, checkout incomplete.
    admin = Path(git(wt, "rev-parse", "--absolute-git-dir").strip())
    (admin / "locked").write_text("initializing")
    (wt / "data.txt").unlink()

    assert create_worktree(repo, wt, BRANCH) == base
    assert (wt / "data.txt").read_text() == "one\ntwo\n"
    assert Worktree(wt, tmp_path / "co", repo, BRANCH).candidate("t").commit is None
    assert "locked" not in git(repo, "worktree", "list", "--porcelain")


def test_create_worktree_refuses_an_unrelated_directory(repo: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / "precious.txt").write_text("keep me\n")
    with pytest.raises(WorkspaceError):
        create_worktree(repo, wt, BRANCH)
    assert (wt / "precious.txt").read_text() == "keep me\n"


def test_create_worktree_refuses_a_worktree_on_another_branch(repo: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    create_worktree(repo, wt, "overnight/other")
    with pytest.raises(WorkspaceError, match="overnight/other"):
        create_worktree(repo, wt, BRANCH)


# commits


def test_commits_land_on_the_run_branch_only(repo: Path, wt: Worktree) -> None:
    base = wt.head()
    main_before = git(repo, "rev-parse", "main")
    (wt.path / "new.txt").write_text("new\n")
    first = commit(wt, "task t1: add new.txt")
    second = commit(wt, "task t2: nothing changed\n\n# overnight-task: t2")
    assert first != second
    assert wt.head() == second == git(repo, "rev-parse", BRANCH).strip()
    assert wt.log_messages(base) == [
        (first, "task t1: add new.txt"),
        (second, "task t2: nothing changed"),
    ]
    assert git(repo, "show", "--format=", "--name-only", first).split() == ["new.txt"]
    assert git(repo, "rev-parse", "main") == main_before
    assert git(repo, "status", "--porcelain") == ""


def test_a_commit_without_any_identity_uses_the_fallback(repo: Path, wt: Worktree) -> None:
    (wt.path / "x.txt").write_text("x\n")
    commit(wt, "anonymous")
    author = git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", BRANCH).strip()
    assert author == "overnight <overnight@localhost>|overnight <overnight@localhost>"


def test_a_configured_identity_is_kept(repo: Path, wt: Worktree) -> None:
    git(repo, "config", "user.name", "Night Owl")
    git(repo, "config", "user.email", "owl@example.com")
    (wt.path / "x.txt").write_text("x\n")
    commit(wt, "named")
    assert git(repo, "log", "-1", "--format=%an <%ae>", BRANCH).strip() == (
        "Night Owl <owl@example.com>"
    )


def test_find_commit_finds_the_newest_marker(wt: Worktree) -> None:
    base = wt.head()
    commit(wt, "task a\n\novernight-task: a")
    b_first = commit(wt, "task b\n\novernight-task: b")
    commit(wt, "task c\n\novernight-task: c")
    b_again = commit(wt, "task b again\n\novernight-task: b")

    assert wt.find_commit(base, "overnight-task: b") == b_again
    assert wt.find_commit(base, "overnight-task: z") is None
    assert wt.find_commit(b_again, "overnight-task: b") is None
    assert wt.find_commit(base, "overnight-task: b") != b_first


def test_diff_stat_names_the_changed_files(wt: Worktree) -> None:
    base = wt.head()
    assert wt.diff_stat(base) == ""
    (wt.path / "data.txt").write_text("one\ntwo\nthree\n")
    commit(wt, "more data")
    stat = wt.diff_stat(base)
    assert "data.txt" in stat
    assert "1 file changed, 1 insertion(+)" in stat


# candidates, patches, locks


def test_a_candidate_sees_edits_and_untracked_but_not_ignored(wt: Worktree) -> None:
    assert wt.candidate("t").commit is None
    (wt.path / "build.log").write_text("ignored\n")
    assert wt.candidate("t").commit is None
    (wt.path / "deep" / "er").mkdir(parents=True)
    (wt.path / "deep" / "er" / "new.txt").write_text("x\n")
    assert wt.candidate("t").commit is not None
    (wt.path / "deep" / "er" / "new.txt").unlink()
    (wt.path / "README.md").write_text("changed\n")
    made = wt.candidate("t").commit
    assert made is not None
    assert [c.path for c in wt.changes(made)] == ["README.md"]


def test_discard_saves_a_patch_that_applies_and_rewrites_the_worktree(
    repo: Path, wt: Worktree, tmp_path: Path
) -> None:
    patch = tmp_path / "parked" / "t1.patch"
    assert wt.discard(patch, None) is False
    assert not patch.exists()

    (wt.path / "README.md").write_text("hello\nhalf done\n")
    (wt.path / "data.txt").unlink()
    (wt.path / "src").mkdir()
    (wt.path / "src" / "new.py").write_text("print('new')\n")
    (wt.path / "blob.bin").write_bytes(bytes(range(256)))
    (wt.path / "build.log").write_text("ignored\n")
    before = wt.head()
    made = wt.candidate("t1").commit

    assert wt.discard(patch, made) is True
    assert wt.head() == before
    assert files_of(wt.path) == files_of(repo)  # exactly the branch again, nothing left over
    assert (wt.path / ".git").is_file()  # the worktree is still the worktree

    check = tmp_path / "apply"
    shutil.copytree(repo, check)
    git(check, "apply", str(patch))
    assert (check / "README.md").read_text() == "hello\nhalf done\n"
    assert not (check / "data.txt").exists()
    assert (check / "src" / "new.py").read_text() == "print('new')\n"
    assert (check / "blob.bin").read_bytes() == bytes(range(256))


def test_clear_stale_locks_lets_the_next_commit_through(repo: Path, wt: Worktree) -> None:
    ref_lock = repo / ".git" / "refs" / "heads" / "overnight" / "run-1.lock"
    ref_lock.write_text("")
    (wt.path / "x.txt").write_text("x\n")
    made = wt.candidate("blocked").commit
    with pytest.raises(WorkspaceError, match=r"run-1\.lock"):
        wt.land(made)
    assert ref_lock in wt.clear_stale_locks()
    assert not ref_lock.exists()
    assert wt.clear_stale_locks() == []
    assert wt.land(made) == made == wt.head()


def test_a_candidate_is_a_commit_off_the_branch_until_it_lands(repo: Path, wt: Worktree) -> None:
    before = wt.head()
    (wt.path / "data.txt").write_text("one\ntwo\nthree\n")
    (wt.path / "debug.log").write_text("ignored\n")
    sha = wt.candidate("t1: a change").commit
    assert sha is not None and wt.head() == before  # the branch has not moved
    assert git(repo, "rev-parse", f"{sha}^").strip() == before
    assert "debug.log" not in git(repo, "ls-tree", "-r", "--name-only", sha)
    assert wt.land(sha) == sha == wt.head()
    assert wt.candidate("again").commit is None


def test_landing_refuses_a_candidate_not_made_on_the_branch_as_it_stands(wt: Worktree) -> None:
    (wt.path / "x.txt").write_text("x\n")
    first = wt.candidate("one").commit
    (wt.path / "y.txt").write_text("y\n")
    second = wt.candidate("two").commit  # also made on the base, not on top of `first`
    assert first is not None and second is not None
    wt.land(first)
    with pytest.raises(WorkspaceError, match="not made on top of"):
        wt.land(second)
    assert wt.head() == first


def test_the_clean_checkout_holds_exactly_the_commit(wt: Worktree) -> None:
    (wt.path / "data.txt").write_text("changed\n")
    (wt.path / "hidden.py").write_text("the fix\n")
    (wt.path / ".gitignore").write_text("*.log\nhidden.py\n")
    sha = wt.candidate("t1").commit
    assert sha is not None
    where = wt.clean_checkout(sha)
    assert (where / "data.txt").read_text() == "changed\n"
    assert not (where / "hidden.py").exists()  # ignored in the worktree: not in the commit
    # Whatever a command left in the checkout is gone the next time, ignored files too.
    (where / "left.txt").write_text("x")
    (where / "cache.log").write_text("x")
    (where / "data.txt").write_text("edited in place\n")
    where = wt.clean_checkout(sha)
    assert sorted(p.name for p in where.iterdir()) == [".gitignore", "README.md", "data.txt"]
    assert (where / "data.txt").read_text() == "changed\n"


def test_the_clean_checkout_is_rebuilt_when_it_was_broken(wt: Worktree) -> None:
    target = wt.clean_checkout(None)
    shutil.rmtree(target)
    target.mkdir()
    (target / "junk").write_text("x")
    (target / "link").symlink_to("/")
    where = wt.clean_checkout(None)
    assert (where / "README.md").read_text() == "hello\n" and not (where / "junk").exists()
    assert not (where / "link").exists()


def test_git_hooks_of_the_repository_never_run_for_the_harness(
    repo: Path, wt: Worktree, tmp_path: Path
) -> None:
    fired = tmp_path / "fired"
    for name in ("post-checkout", "pre-commit", "post-commit", "reference-transaction"):
        hook = repo / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {fired}\n")
        hook.chmod(0o755)
    (wt.path / "data.txt").write_text("changed\n")
    sha = wt.candidate("t1").commit
    assert sha is not None
    wt.clean_checkout(sha)
    wt.land(sha)
    (wt.path / "README.md").write_text("again\n")
    wt.discard(tmp_path / "p.patch", wt.candidate("t2").commit)
    assert not fired.exists()
