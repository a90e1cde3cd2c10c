"""``overnight pr [RUN]``: the pull request a finished night proposes.

The title and body (``overnight.report.pull_request``) are written to a file. With ``gh`` on
PATH the branch is pushed (``--push``) and ``gh pr create`` opens the pull request, a draft
unless ``--ready``; without it, the two commands to run are printed instead.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from overnight.audit.run import audit_run
from overnight.core.errors import ConfigError, WorkspaceError
from overnight.core.text import printable
from overnight.night import git
from overnight.night.worktree import check_repository, git_common_dir
from overnight.report.pull_request import AuditFound, AuditSaid, pr_body, pr_title
from overnight.store.atomic import write_atomic
from overnight.store.result import TerminalResult
from overnight.store.run_state import load_run_state
from overnight.store.rundir import RunDir, read_json

#: As ``overnight report``: the run has no result yet.
EXIT_NO_RESULT = 66
#: The run landed no verified commit: there is nothing to propose.
EXIT_NOTHING = 3
#: The push or ``gh`` failed; the body file is written.
EXIT_FAILED = 4

GH_TIMEOUT_S = 300.0

#: What a push to the user's own remote needs beyond git's allowlist: their global git config
#: (credential helpers, url rewrites), an SSH agent, and the token gh's credential helper reads.
#: The push runs on the bare git directory and reads no work tree, so none of the model's
#: files is read by a process holding them.
PUSH_PASSED = (
    "HOME",
    "XDG_CONFIG_HOME",
    "GIT_CONFIG_GLOBAL",
    "SSH_AUTH_SOCK",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_HOST",
    "GH_CONFIG_DIR",
)


def cmd_pr(args: argparse.Namespace) -> int:
    rd = RunDir(args.run_dir)
    if not rd.is_run():
        raise ConfigError("RUN", f"{rd.path} is not an overnight run directory")
    if not rd.result.exists():
        print(
            f"overnight: {rd.path} has no result yet (still running, or killed): nothing to "
            f"propose until it ends; see `overnight status {rd.path}`",
            file=sys.stderr,
        )
        return EXIT_NO_RESULT
    r = TerminalResult.model_validate_json(rd.result.read_text(encoding="utf-8"))
    branch = r.branch.name
    if not any(v.commit for v in r.verified):
        print(
            printable(
                f"overnight: nothing to propose: run {r.run_id} ended {r.stop_reason} "
                "without a verified commit on its branch"
            ),
            file=sys.stderr,
        )
        return EXIT_NOTHING
    workspace = read_json(rd.manifest).get("workspace")
    if not workspace:
        raise ConfigError("RUN", f"{rd.manifest} names no workspace")
    repo = check_repository(Path(str(workspace)))
    beyond = _commits_beyond(repo, branch, r.branch.base_commit)
    if beyond == 0:
        print(
            printable(f"overnight: nothing to propose: {branch} holds no commit beyond its base"),
            file=sys.stderr,
        )
        return EXIT_NOTHING

    title = pr_title(r)
    body = pr_body(r, _verify_commands(rd), _audit(rd))
    out: Path = args.out or rd.path / "pull-request.md"
    try:
        write_atomic(out, body.encode("utf-8"), "the pull request body")
    except OSError as exc:
        raise ConfigError("--out", f"cannot write {out}: {exc.strerror or exc}") from exc
    print(printable(str(out)))

    gh_args = ["pr", "create", *(["--draft"] if args.draft else [])]
    gh_args += [f"--title={title}", f"--body-file={out}", f"--head={branch}"]
    gh_args += [f"--base={args.base}"] if args.base else []
    if git.answer(repo, "remote", "get-url", args.remote) is None:
        # No remote to push to: the body is written; say so, and how to add one.
        print(
            printable(
                f"overnight: {repo} has no remote {args.remote!r}, so the branch cannot be "
                f"pushed nor a pull request opened; add one with `git -C {shlex.quote(str(repo))} "
                f"remote add {args.remote} URL`, then run `overnight pr` again (or pass --remote)"
            ),
            file=sys.stderr,
        )
        return 0
    gh = shutil.which("gh")
    if gh is None:
        push = ["git", "push", args.remote, branch]
        said = f"gh is not on PATH; to open the pull request, run in {repo}:"
        print(printable(said))
        print(printable(f"  {shlex.join(push)}"))
        print(printable(f"  {shlex.join(['gh', *gh_args])}"))
        return 0
    if args.push:
        try:
            push_branch(repo, args.remote, branch)
        except WorkspaceError as exc:
            print(printable(f"overnight: the push failed: {exc}"), file=sys.stderr)
            return EXIT_FAILED
        print(printable(f"pushed {branch} to {args.remote}"))
    return _open(gh, gh_args, repo, pushed=args.push)


def _commits_beyond(repo: Path, branch: str, base: str) -> int:
    ref = f"refs/heads/{branch}"
    if not branch.startswith("overnight/") or git.answer(repo, "check-ref-format", ref) is None:
        raise ConfigError("RUN", f"result.json names {branch!r}, not a branch of a night")
    tip = git.answer(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if not tip:
        raise ConfigError("RUN", f"branch {branch} is not in {repo} any more")
    counted = git.answer(repo, "rev-list", "--count", f"{base}..{tip}", "--")
    if counted is None:
        raise ConfigError("RUN", f"the base commit {base[:12]} of {branch} is not in {repo}")
    return int(counted)


def _verify_commands(rd: RunDir) -> dict[str, str]:
    """Each verified task's verify, as the checkpoint recorded it; none when it cannot be
    read (the body then says so)."""
    try:
        state = load_run_state(rd.checkpoint)
    except Exception:  # a damaged checkpoint: the pull request is still worth writing
        return {}
    return {c.task.id: c.task.verify for c in state.completed} if state else {}


def _audit(rd: RunDir) -> AuditSaid:
    """The audit of the run's records, without running any verify again: it only reads."""
    try:
        audit = audit_run(rd.path, rerun=False)
    except Exception as exc:  # whatever stops the audit, the body says it did not run
        return AuditSaid(None, f"the audit could not run: {exc}")
    found = AuditFound(len(audit.checks), tuple(audit.disagreements), audit.rerun)
    return AuditSaid(found)


def push_env() -> dict[str, str]:
    env = git.git_env()
    env.pop("GIT_CONFIG_GLOBAL")
    env.update({k: os.environ[k] for k in PUSH_PASSED if k in os.environ})
    return env


def push_branch(repo: Path, remote: str, branch: str) -> None:
    """``git push <remote> <branch>`` from the repository's git directory, with the harness's
    safe options (no hook, no fsmonitor); a local path remote is the user's own choice here."""
    common = git_common_dir(repo)
    ref = f"refs/heads/{branch}"
    args = git.bare_args(common, "-c", "protocol.file.allow=user", "push", remote, f"{ref}:{ref}")
    git.run(args, cwd=common, env=push_env())


def _open(gh: str, gh_args: list[str], repo: Path, *, pushed: bool) -> int:
    try:
        done = subprocess.run(
            [gh, *gh_args],
            cwd=repo,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=GH_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(printable(f"overnight: gh pr create did not run: {exc}"), file=sys.stderr)
        return EXIT_FAILED
    sys.stdout.write(printable(done.stdout))
    if done.returncode != 0:
        hint = "" if pushed else " (is the branch on the remote? --push pushes it)"
        print(
            printable(f"overnight: gh pr create failed (exit {done.returncode}){hint}:"),
            file=sys.stderr,
        )
        sys.stderr.write(printable(done.stderr))
        return EXIT_FAILED
    return 0
