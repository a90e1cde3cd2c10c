"""The workspace functions against real git repositories made in tmp_path."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from overnight.core.errors import ConfigError, WorkspaceError
from overnight.night.worktree import (
    check_repository,
    clean_checkout,
    clear_stale_locks,
    commit_all,
    create_worktree,
    diff_stat,
    discard_changes,
    find_commit,
    has_changes,
    head,
    land,
    log_messages,
    stage_candidate,
)

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
    assert not has_changes(wt)


def test_create_worktree_twice_reuses_it(repo: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    base = create_worktree(repo, wt, BRANCH)
    (wt / "work.txt").write_text("done\n")
    done = commit_all(wt, "task one")
    # The user moves on meanwhile: the base stays what the branch started from.
    (repo / "README.md").write_text("later\n")
    git(repo, *IDENTITY, "commit", "-q", "-am", "user work")

    assert create_worktree(repo, wt, BRANCH) == base
    assert head(wt) == done
    assert (wt / "work.txt").read_text() == "done\n"


def test_create_worktree_restores_a_missing_worktree_for_an_existing_branch(
    repo: Path, tmp_path: Path
) -> None:
    wt = tmp_path / "wt"
    base = create_worktree(repo, wt, BRANCH)
    done = commit_all(wt, "task one")
    git(repo, "worktree", "remove", "--force", str(wt))
    assert not wt.exists()

    assert create_worktree(repo, wt, BRANCH) == base
    assert head(wt) == done


def test_create_worktree_redoes_an_interrupted_creation(repo: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    base = create_worktree(repo, wt, BRANCH)
    # What a kill during `git worktree add` leaves: still locked, checkout incomplete.
    admin = Path(git(wt, "rev-parse", "--absolute-git-dir").strip())
    (admin / "locked").write_text("initializing")
    (wt / "data.txt").unlink()

    assert create_worktree(repo, wt, BRANCH) == base
    assert (wt / "data.txt").read_text() == "one\ntwo\n"
    assert not has_changes(wt)
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


def test_commit_all_makes_one_commit_per_call_even_without_changes(worktree: Path) -> None:
    base = head(worktree)
    (worktree / "new.txt").write_text("new\n")
    first = commit_all(worktree, "task t1: add new.txt")
    second = commit_all(worktree, "task t2: nothing changed\n\n# overnight-task: t2")

    assert first != second
    assert head(worktree) == second
    assert log_messages(worktree, base) == [
        (first, "task t1: add new.txt"),
        (second, "task t2: nothing changed"),
    ]
    assert git(worktree, "log", "-1", "--format=%B").strip().endswith("# overnight-task: t2")
    assert git(worktree, "show", "--format=", "--name-only", first).split() == ["new.txt"]
    assert not has_changes(worktree)


def test_commit_all_without_any_identity_uses_the_fallback(worktree: Path) -> None:
    assert subprocess.run(["git", "-C", str(worktree), "config", "user.email"]).returncode == 1
    commit_all(worktree, "anonymous")
    author = git(worktree, "log", "-1", "--format=%an <%ae>|%cn <%ce>").strip()
    assert author == "overnight <overnight@localhost>|overnight <overnight@localhost>"


def test_commit_all_keeps_a_configured_identity(repo: Path, worktree: Path) -> None:
    git(repo, "config", "user.name", "Night Owl")
    git(repo, "config", "user.email", "owl@example.com")
    commit_all(worktree, "named")
    assert git(worktree, "log", "-1", "--format=%an <%ae>").strip() == "Night Owl <owl@example.com>"


def test_commit_all_does_not_touch_the_users_branch(repo: Path, worktree: Path) -> None:
    main_before = git(repo, "rev-parse", "main")
    commit_all(worktree, "on the run branch")
    assert git(repo, "rev-parse", "main") == main_before
    assert git(repo, "status", "--porcelain") == ""


def test_find_commit_finds_the_newest_marker(worktree: Path) -> None:
    base = head(worktree)
    commit_all(worktree, "task a\n\novernight-task: a")
    b_first = commit_all(worktree, "task b\n\novernight-task: b")
    commit_all(worktree, "task c\n\novernight-task: c")
    b_again = commit_all(worktree, "task b again\n\novernight-task: b")

    assert find_commit(worktree, base, "overnight-task: b") == b_again
    assert find_commit(worktree, base, "overnight-task: z") is None
    assert find_commit(worktree, b_again, "overnight-task: b") is None
    assert find_commit(worktree, base, "overnight-task: b") != b_first


def test_diff_stat_names_the_changed_files(worktree: Path) -> None:
    base = head(worktree)
    assert diff_stat(worktree, base) == ""
    (worktree / "data.txt").write_text("one\ntwo\nthree\n")
    commit_all(worktree, "more data")
    stat = diff_stat(worktree, base)
    assert "data.txt" in stat
    assert "1 file changed, 1 insertion(+)" in stat


# changes, patches, locks


def test_has_changes_sees_edits_and_untracked_but_not_ignored(worktree: Path) -> None:
    assert not has_changes(worktree)
    (worktree / "build.log").write_text("ignored\n")
    assert not has_changes(worktree)
    (worktree / "deep" / "er").mkdir(parents=True)
    (worktree / "deep" / "er" / "new.txt").write_text("x\n")
    assert has_changes(worktree)
    (worktree / "deep" / "er" / "new.txt").unlink()
    (worktree / "README.md").write_text("changed\n")
    assert has_changes(worktree)


def test_discard_changes_saves_a_patch_that_applies(worktree: Path, tmp_path: Path) -> None:
    patch = tmp_path / "parked" / "t1.patch"
    assert discard_changes(worktree, patch) is False
    assert not patch.exists()

    (worktree / "README.md").write_text("hello\nhalf done\n")
    (worktree / "data.txt").unlink()
    (worktree / "src").mkdir()
    (worktree / "src" / "new.py").write_text("print('new')\n")
    (worktree / "blob.bin").write_bytes(bytes(range(256)))
    (worktree / "build.log").write_text("ignored stays\n")
    before = head(worktree)

    assert discard_changes(worktree, patch) is True
    assert not has_changes(worktree)
    assert head(worktree) == before
    assert (worktree / "README.md").read_text() == "hello\n"
    assert (worktree / "data.txt").exists()
    assert not (worktree / "src").exists()
    assert not (worktree / "blob.bin").exists()
    assert (worktree / "build.log").read_text() == "ignored stays\n"

    git(worktree, "apply", "--index", str(patch))
    assert (worktree / "README.md").read_text() == "hello\nhalf done\n"
    assert not (worktree / "data.txt").exists()
    assert (worktree / "src" / "new.py").read_text() == "print('new')\n"
    assert (worktree / "blob.bin").read_bytes() == bytes(range(256))


def test_clear_stale_locks_lets_the_next_commit_through(worktree: Path) -> None:
    git_dir = Path(git(worktree, "rev-parse", "--absolute-git-dir").strip())
    lock = git_dir / "index.lock"
    lock.write_text("")
    with pytest.raises(WorkspaceError, match=r"index\.lock"):
        commit_all(worktree, "blocked")

    assert clear_stale_locks(worktree) == [lock]
    assert not lock.exists()
    assert clear_stale_locks(worktree) == []
    (worktree / "after.txt").write_text("x\n")
    sha = commit_all(worktree, "after the crash")
    assert head(worktree) == sha


def test_clear_stale_locks_also_clears_the_branch_ref_lock(repo: Path, worktree: Path) -> None:
    ref_lock = repo / ".git" / "refs" / "heads" / "overnight" / "run-1.lock"
    ref_lock.write_text("")
    assert clear_stale_locks(worktree) == [ref_lock.resolve()]
    commit_all(worktree, "after the crash")


# candidates and the clean checkout


def test_a_candidate_is_a_commit_off_the_branch_until_it_lands(worktree: Path) -> None:
    before = head(worktree)
    (worktree / "data.txt").write_text("one\ntwo\nthree\n")
    (worktree / "debug.log").write_text("ignored\n")
    sha = stage_candidate(worktree, "t1: a change")
    assert sha is not None and head(worktree) == before  # the branch has not moved
    assert git(worktree, "rev-parse", f"{sha}^").strip() == before
    assert "debug.log" not in git(worktree, "ls-tree", "-r", "--name-only", sha)
    assert land(worktree, sha) == sha == head(worktree)
    assert not has_changes(worktree)


def test_a_candidate_of_no_change_is_none(worktree: Path) -> None:
    (worktree / "debug.log").write_text("only an ignored file\n")
    assert stage_candidate(worktree, "t1: nothing") is None


def test_the_clean_checkout_holds_exactly_the_commit(worktree: Path, tmp_path: Path) -> None:
    (worktree / "data.txt").write_text("changed\n")
    (worktree / "hidden.py").write_text("the fix\n")
    (worktree / ".gitignore").write_text("*.log\nhidden.py\n")
    sha = stage_candidate(worktree, "t1")
    assert sha is not None
    target = tmp_path / "runs" / "checkout"
    where = clean_checkout(worktree, target, sha)
    assert (where / "data.txt").read_text() == "changed\n"
    assert not (where / "hidden.py").exists()  # ignored in the worktree: not in the commit
    # Whatever a command left in the checkout is gone the next time, ignored files too.
    (where / "left.txt").write_text("x")
    (where / "cache.log").write_text("x")
    (where / "data.txt").write_text("edited in place\n")
    where = clean_checkout(worktree, target, sha)
    assert sorted(p.name for p in where.iterdir()) == [
        ".git",
        ".gitignore",
        "README.md",
        "data.txt",
    ]
    assert (where / "data.txt").read_text() == "changed\n"
    assert git(where, "rev-parse", "HEAD").strip() == sha


def test_the_clean_checkout_is_rebuilt_when_it_was_broken(worktree: Path, tmp_path: Path) -> None:
    target = tmp_path / "runs" / "checkout"
    clean_checkout(worktree, target, head(worktree))
    shutil.rmtree(target)
    target.mkdir()
    (target / "junk").write_text("x")
    where = clean_checkout(worktree, target, head(worktree))
    assert (where / "README.md").read_text() == "hello\n" and not (where / "junk").exists()


def test_git_hooks_of_the_repository_never_run_for_the_harness(
    repo: Path, worktree: Path, tmp_path: Path
) -> None:
    fired = tmp_path / "fired"
    for name in ("post-checkout", "pre-commit", "post-commit", "reference-transaction"):
        hook = repo / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {fired}\n")
        hook.chmod(0o755)
    (worktree / "data.txt").write_text("changed\n")
    sha = stage_candidate(worktree, "t1")
    assert sha is not None
    clean_checkout(worktree, tmp_path / "runs" / "checkout", sha)
    land(worktree, sha)
    (worktree / "README.md").write_text("again\n")
    commit_all(worktree, "t2")
    assert not fired.exists()
