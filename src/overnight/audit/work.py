"""The work, recomputed from the repository: the run's branch holds exactly the commits the
result lists, in order, after its base commit; each is the commit of the task it names, changes
nothing that judges the work (``overnight.core.protect``), and its task's verify passes again
on a fresh export of exactly that commit, run in the sandbox.

The verify run again is the one the run's files name: for a task of the spec, ``spec.json``'s
(the checkpoint's record of it must be the same); for a task a model planned, the checkpoint's,
refused as the harness refuses it when it is not a plain allowed command.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from overnight.audit import gitread
from overnight.audit.findings import AuditCheck, check
from overnight.audit.inputs import RunFiles
from overnight.core.automation import Automation, automation_changes
from overnight.core.errors import ConfigError, WorkspaceError
from overnight.core.evidence import judge
from overnight.core.protect import ChangedPath, Protection
from overnight.core.resume import VerifyOutcome, outcome_of_exit, runs_pytest
from overnight.core.suite import record_for
from overnight.core.tasks import CompletedTask, Task
from overnight.core.text import printable
from overnight.night.planner import verify_prefixes
from overnight.night.preflight import sealed_places
from overnight.night.testrun import pytest_evidence, with_check_additions
from overnight.night.verdict import protection_for
from overnight.night.worktree import changed_links, changes_between, links_of, tree_paths
from overnight.process import run_command
from overnight.sandbox.bwrap import Sandbox, SandboxUnavailable, build_sandbox, probe
from overnight.sandbox.policy import resolve_paths
from overnight.seams import ToolError
from overnight.store.result import VerifiedTask
from overnight.tools.shell import check_command

OUTPUT_SHOWN = 300


def task_marker(task_id: str) -> str:
    """The line every commit of a task carries (``overnight.night.night`` writes it)."""
    return f"(overnight task {task_id})"


@dataclass(frozen=True)
class Landed:
    """One verified task as the checkpoint and the result have it, and the commit its verify
    judged (its own, or the branch as it stood when it changed nothing)."""

    record: CompletedTask | None
    claimed: VerifiedTask
    judged_at: str


def _listed(entries: Sequence[tuple[str, str | None, int, str, str]]) -> str:
    return ", ".join(f"{tid} {(commit or '-')[:12]}" for tid, commit, *_ in entries)


def verified_check(files: RunFiles) -> AuditCheck:
    ours = [(c.task.id, c.commit, c.attempts, c.via, c.evidence) for c in files.state.completed]
    theirs = [(v.id, v.commit, v.attempts, v.via, v.evidence) for v in files.result.verified]
    problems: list[str] = []
    if ours != theirs:
        missing = [o for o in ours if o not in theirs]
        extra = [t for t in theirs if t not in ours]
        if missing:
            problems.append(f"not in result.json: {_listed(missing)}")
        if extra:
            problems.append(f"in result.json, not in the checkpoint: {_listed(extra)}")
        if not missing and not extra:
            problems.append("result.json lists them in another order")
    detail = f"{len(ours)} task(s) verified in the checkpoint"
    return check("verified", "work", not problems, "; ".join([detail, *problems]))


def landings(files: RunFiles) -> list[Landed]:
    records = {c.task.id: c for c in files.state.completed}
    at = files.state.base_commit
    out: list[Landed] = []
    for v in files.result.verified:
        if v.commit:
            at = v.commit
        out.append(Landed(records.get(v.id), v, at))
    return out


def branch_check(files: RunFiles) -> tuple[AuditCheck, list[str]]:
    """The branch after its base, against the result's commits; returns the branch's commits."""
    repo, r = files.workspace, files.result
    ref = f"refs/heads/{files.branch}"
    base = files.state.base_commit
    tip = gitread.resolve_commit(repo, ref)
    problems: list[str] = []
    if r.branch.name != files.branch:
        problems.append(f"result.json names branch {r.branch.name}, run.json {files.branch}")
    if r.branch.base_commit != base:
        problems.append(f"result.json's base {r.branch.base_commit[:12]} is not the checkpoint's")
    if tip is None:
        return check("branch", "work", False, f"{files.branch} does not exist in {repo}"), []
    if not gitread.is_ancestor(repo, base, tip):
        problems.append(f"the base commit {base[:12]} is not on the branch any more")
    commits = gitread.commits_between(repo, base, tip)
    listed = [v.commit for v in r.verified if v.commit]
    if r.branch.head != tip:
        problems.append(
            f"result.json's head {str(r.branch.head)[:12]} is not the branch's {tip[:12]}"
        )
    if commits != listed:
        unlisted = [c[:12] for c in commits if c not in listed]
        absent = [c[:12] for c in listed if c not in commits]
        if unlisted:
            problems.append(f"on the branch but not in result.json: {', '.join(unlisted)}")
        if absent:
            problems.append(f"in result.json but not on the branch: {', '.join(absent)}")
        if not unlisted and not absent:
            problems.append("the branch holds the listed commits in another order")
    detail = f"{files.branch}: {len(commits)} commit(s) after the base {base[:12]}"
    return check("branch", "work", not problems, "; ".join([detail, *problems])), commits


def spec_verify(files: RunFiles, task: Task) -> str | None:
    """The verify ``spec.json`` gives the task (None: not a task of the spec)."""
    for t in files.spec.tasks:
        if t.id == task.id:
            return t.verify
    return None


def commit_check(
    files: RunFiles, landed: Landed, on_branch: list[str], previous: str
) -> AuditCheck:
    v, repo = landed.claimed, files.workspace
    name = f"commit {v.id}"
    problems: list[str] = []
    if landed.record is None:
        problems.append("the checkpoint verified no task of this id")
    elif landed.record.task.origin == "spec":
        given = spec_verify(files, landed.record.task)
        if given is None:
            problems.append("a task of the spec that spec.json does not list")
        elif given != landed.record.task.verify:
            problems.append(
                f"spec.json's verify `{given}` is not the one the run ran "
                f"(`{landed.record.task.verify}`)"
            )
    if v.commit is None:
        detail = f"changed nothing; judged on {landed.judged_at[:12]}"
        return check(name, "work", not problems, "; ".join([detail, *problems]))
    if gitread.resolve_commit(repo, v.commit) is None:
        problems.append(f"{v.commit[:12]} is no commit of {repo}")
        return check(name, "work", False, "; ".join(problems))
    if v.commit not in on_branch:
        problems.append("not on the run's branch")
    found = gitread.parents(repo, v.commit)
    if found != [previous]:
        problems.append(
            f"its parent is {', '.join(p[:12] for p in found) or 'none'}, not {previous[:12]}"
        )
    if task_marker(v.id) not in gitread.message(repo, v.commit):
        problems.append(f"its message does not carry {task_marker(v.id)}")
    detail = f"{v.commit[:12]} on {files.branch}"
    return check(name, "work", not problems, "; ".join([detail, *problems]))


def protection_of(files: RunFiles) -> Protection:
    """The run's protected paths, built as the harness builds them (base tree, spec)."""
    files_at_base, dirs_at_base = tree_paths(files.workspace, files.state.base_commit)
    spec = files.spec
    verifies = [t.verify for t in spec.tasks]
    return protection_for(spec.predicate, verifies, files_at_base, dirs_at_base, spec.gates)


def protected_check(files: RunFiles, landed: Landed, protection: Protection) -> AuditCheck | None:
    v, repo = landed.claimed, files.workspace
    if v.commit is None or gitread.resolve_commit(repo, v.commit) is None:
        return None
    found = gitread.parents(repo, v.commit)
    changes = changes_between(repo, found[0], v.commit) if found else []
    touched = protection.violations(
        ChangedPath(c.status, c.path, c.nested_repository) for c in changes
    )
    task = landed.record.task if landed.record else None
    users_own = task is not None and task.brief is None and not task.model_written
    detail = f"{len(changes)} path(s) changed"
    if not touched:
        return check(f"protected {v.id}", "work", True, detail + ", none protected")
    if users_own:  # the harness lets the spec's own command tasks change anything
        return check(
            f"protected {v.id}",
            "work",
            True,
            f"{detail}; a command task of the spec, allowed to change {'; '.join(touched)}",
        )
    return check(f"protected {v.id}", "work", False, f"{detail}; touches {'; '.join(touched)}")


def automation_check(files: RunFiles, landed: Landed) -> AuditCheck | None:
    """The automation paths a landed commit changes (``overnight.core.automation``): an agent
    task's must each be allowed by the spec and named in result.json. None when the commit
    changes none and the result names none."""
    v, repo = landed.claimed, files.workspace
    if v.commit is None or gitread.resolve_commit(repo, v.commit) is None:
        return None
    found = gitread.parents(repo, v.commit)
    if not found:
        return None
    changes = changes_between(repo, found[0], v.commit)
    hits = automation_changes(
        [ChangedPath(c.status, c.path, c.nested_repository) for c in changes],
        changed_links(repo, changes),
        links_of(repo, found[0]),
    )
    paths = [h.path for h in hits]
    if not paths and not v.automation:
        return None
    task = landed.record.task if landed.record else None
    users_own = task is not None and task.brief is None and not task.model_written
    problems: list[str] = []
    if not users_own:
        allowed = Automation(tuple(files.spec.predicate.allow_automation))
        blocked = [h.sentence() for h in hits if not allowed.allows(h)]
        if blocked:
            problems.append(f"not allowed by the spec: {'; '.join(blocked)}")
        if paths != list(v.automation):
            named = ", ".join(v.automation) or "none"
            problems.append(f"result.json names {named}, the commit changes {', '.join(paths)}")
    detail = f"{len(paths)} automation path(s) changed: {', '.join(paths) or 'none'}"
    if users_own:
        detail += "; a command task of the spec, allowed to change them"
    return check(f"automation {v.id}", "work", not problems, "; ".join([detail, *problems]))


def audit_sandbox(files: RunFiles) -> Sandbox:
    """The sandbox verifies run again in: the run's ``[sandbox]`` settings and the places a
    run hides, and also its ``writable`` paths. The agent could write those during the night,
    so a verify must not pass by what it left there: they are hidden, like everything else
    outside the commit. A ``ConfigError`` (exit 64) when the sandbox cannot run here."""
    spec = files.spec
    writable, readable = resolve_paths(spec.sandbox, Path(spec.base_dir))
    sealed = [
        *sealed_places(spec, files.run_dir.path.absolute()),
        *(p for p in writable if p.exists()),
    ]
    try:
        sandbox = build_sandbox(
            spec.sandbox, sealed=sealed, readable=[p for p in readable if p.exists()]
        )
        probe(sandbox)
    except SandboxUnavailable as exc:
        raise ConfigError(
            "sandbox", exc.problem, f"{exc.fix}; or audit without re-running: --no-rerun"
        ) from None
    return sandbox


def _remove(path: Path) -> None:
    def retry(func: Callable[[str], object], name: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name), 0o700)
            os.chmod(name, 0o700)
            func(name)

    shutil.rmtree(path, onerror=retry)


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    place = Path(tempfile.mkdtemp(prefix="overnight-audit-"))
    try:
        yield place
    finally:
        _remove(place)


Command = str | list[str]


def verify_commands(files: RunFiles, landed: Landed) -> tuple[list[Command], str]:
    """What to run (every verify the run's files give the task: they must all pass), or
    nothing and why nothing can be."""
    task = landed.record.task if landed.record else None
    if task is None:
        return [], "the checkpoint has no record of this task"
    if task.origin == "spec":
        given = spec_verify(files, task)
        if given is None:
            return [], "spec.json does not list this task"
        return list(dict.fromkeys([given, task.verify])), ""
    if not task.model_written:
        return [task.verify], ""
    try:  # a model's verify runs as plain words, as the harness runs it
        return [check_command(task.verify, verify_prefixes(files.spec.tools.commands))], ""
    except ToolError as exc:
        return [], f"the model-written verify `{task.verify}` is refused: {exc}"


def _rerun(
    files: RunFiles, landed: Landed, command: Command, sandbox: Sandbox, where: Path
) -> tuple[bool, str]:
    shown = command if isinstance(command, str) else " ".join(command)
    try:
        gitread.export_tree(files.workspace, landed.judged_at, where)
    except (WorkspaceError, OSError) as exc:
        return False, f"cannot export {landed.judged_at[:12]}: {exc}"
    timeout = landed.record.task.timeout_s if landed.record else 600.0
    tests = runs_pytest(command)
    plugins = files.spec.predicate.pytest_plugins
    # As the night ran it: the checkout's layout, and for pytest the harness's reporter.
    with pytest_evidence(plugins) if tests else contextlib.nullcontext() as reporter:
        result = run_command(
            command,
            cwd=where,
            timeout_s=timeout,
            confine=with_check_additions(sandbox, [where], reporter),
            pass_fds=(reporter.fd,) if reporter is not None else (),
        )
        report = reporter.read() if reporter is not None else None
    outcome = outcome_of_exit(result.exit_code, command)
    said = f"exit {result.exit_code}" if not result.timed_out else f"timed out after {timeout:g} s"
    if report is not None and outcome is VerifyOutcome.DONE and landed.record is not None:
        state = files.state
        base = record_for(state.base_tests, state.base_commit, landed.record.task.verify, command)
        judged = judge(report, result.exit_code, *(base or (None, None)))
        said = judged.verdict
        if not judged.met:
            outcome = VerifyOutcome.NOT_DONE
    detail = f"`{shown}` on a fresh export of {landed.judged_at[:12]}, sandboxed: {said}"
    if outcome is not VerifyOutcome.DONE:
        tail = printable(result.output.strip()[-OUTPUT_SHOWN:].replace("\n", " | "))
        detail += f" ({outcome.value}){': ' + tail if tail else ''}"
    return outcome is VerifyOutcome.DONE, detail


def rerun_check(files: RunFiles, landed: Landed, sandbox: Sandbox, place: Path) -> AuditCheck:
    name = f"verify {landed.claimed.id}"
    commands, why = verify_commands(files, landed)
    if not commands:
        return check(name, "work", False, why)
    found = [
        _rerun(files, landed, command, sandbox, place / f"{landed.claimed.id}.{n}")
        for n, command in enumerate(commands, start=1)
    ]
    return check(name, "work", all(ok for ok, _ in found), "; ".join(d for _, d in found))


def work_checks(files: RunFiles, *, rerun: bool) -> tuple[list[AuditCheck], list[str]]:
    """Every check of the work; returns the branch's commits too."""
    checks = [verified_check(files)]
    try:
        branch, commits = branch_check(files)
    except WorkspaceError as exc:
        return [*checks, check("branch", "work", False, f"cannot read the branch: {exc}")], []
    checks.append(branch)
    landed = landings(files)
    try:
        protection = protection_of(files)
    except WorkspaceError as exc:
        checks.append(check("protected", "work", False, f"cannot read the base tree: {exc}"))
        protection = None
    previous = files.state.base_commit
    for item in landed:
        try:
            checks.append(commit_check(files, item, commits, previous))
            if protection is not None:
                found = protected_check(files, item, protection)
                if found is not None:
                    checks.append(found)
            ran_by_itself = automation_check(files, item)
            if ran_by_itself is not None:
                checks.append(ran_by_itself)
        except WorkspaceError as exc:
            checks.append(check(f"commit {item.claimed.id}", "work", False, str(exc)))
        if item.claimed.commit:
            previous = item.claimed.commit
    if rerun and landed:
        sandbox = audit_sandbox(files)
        with scratch() as place:
            checks += [rerun_check(files, item, sandbox, place) for item in landed]
    return checks, commits
