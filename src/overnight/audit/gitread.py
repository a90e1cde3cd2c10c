"""Reading a run's branch without changing anything in the repository: no checkout, no
worktree, no ref moved. git runs with the harness's safety options and allowlisted
environment (:mod:`overnight.night.git`); a commit's tree is exported into a fresh directory
by the harness from the object store, as the night's verify checkout is, so no attribute or
filter a model committed applies and the repository's index, worktrees and refs stay as they
are."""

from __future__ import annotations

import subprocess
from pathlib import Path

from overnight.core.errors import WorkspaceError
from overnight.night.candidate_commit import export
from overnight.night.git import SAFE_GIT_OPTIONS
from overnight.night.git import git_env as night_git_env
from overnight.night.worktree import git_common_dir

GIT_TIMEOUT_S = 300.0


def git_env(index_file: Path | None = None) -> dict[str, str]:
    """The harness's git environment, with ``index_file`` as the index when given."""
    return night_git_env(index_file)


def git_run(
    repo: Path, *args: str, index_file: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """git in ``repo``; the caller judges the exit status."""
    try:
        return subprocess.run(
            ["git", *SAFE_GIT_OPTIONS, "-C", str(repo), *args],
            capture_output=True,
            text=True,
            errors="replace",
            stdin=subprocess.DEVNULL,
            env=git_env(index_file),
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError as exc:
        raise WorkspaceError("git is not installed or not on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise WorkspaceError(
            f"git {' '.join(args)} did not finish in {GIT_TIMEOUT_S:.0f} s"
        ) from exc


def git_out(repo: Path, *args: str, index_file: Path | None = None) -> str:
    done = git_run(repo, *args, index_file=index_file)
    if done.returncode != 0:
        raise WorkspaceError(
            f"git {' '.join(args)} failed in {repo} (exit {done.returncode}): {done.stderr.strip()}"
        )
    return done.stdout


def resolve_commit(repo: Path, ref: str) -> str | None:
    """The commit ``ref`` names, or None when it names none."""
    done = git_run(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    return done.stdout.strip() if done.returncode == 0 else None


def is_ancestor(repo: Path, older: str, newer: str) -> bool:
    return git_run(repo, "merge-base", "--is-ancestor", older, newer).returncode == 0


def commits_between(repo: Path, base: str, tip: str) -> list[str]:
    """Every commit reachable from ``tip`` and not from ``base``, oldest first (the sides of
    a merge included: a commit slipped in through a merge is a commit on the branch)."""
    out = git_out(repo, "rev-list", "--reverse", "--topo-order", f"{base}..{tip}", "--")
    return out.split()


def parents(repo: Path, sha: str) -> list[str]:
    return git_out(repo, "rev-list", "--parents", "-n", "1", sha, "--").split()[1:]


def message(repo: Path, sha: str) -> str:
    return git_out(repo, "log", "-1", "--format=%B", sha, "--")


def export_tree(repo: Path, sha: str, target: Path) -> Path:
    """The files of commit ``sha`` written into the new directory ``target``: exactly the
    commit, no untracked or ignored file and no ``.git``."""
    target.mkdir(mode=0o700)
    export(git_common_dir(repo), sha, target)
    return target
