"""The branch and the verified work changed after the night, in the repository itself: a commit
slipped in, one taken out or put out of order, a commit whose content was rewritten to look
done, a change to what judges the work, a verify edited in the run's spec, and a verify that
passed only because of something outside the commit. Each is caught by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.audit.nights import (
    audited,
    commit_on_branch,
    outside_night,
    result_of,
    rewrite_result,
    work_night,
)
from tests.helpers.nights import git


def shas(run: Path) -> dict[str, str]:
    return {v["id"]: v["commit"] for v in result_of(run)["verified"] if v["commit"]}


def message_of(repo: Path, sha: str) -> str:
    return git(repo, "log", "-1", "--format=%B", sha)


def commit_like(worktree: Path, original: str, files: dict[str, str | None]) -> str:
    """A commit on the worktree's HEAD carrying ``original``'s message, with ``files``
    written (None: removed) instead of what it changed."""
    for rel, text in files.items():
        path = worktree / rel
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    git(worktree, "add", "-A")
    git(worktree, "commit", "-q", "--allow-empty", "-m", message_of(worktree, original))
    return git(worktree, "rev-parse", "HEAD")


def rebuild_branch(run: Path, keep: str, replaced: str, files: dict[str, str | None]) -> str:
    """The branch reset to ``keep``, then ``replaced``'s task committed as ``files``, then the
    rest of the commits after ``replaced`` put back; result.json pointed at the new commits
    (what a forger who knows the branch check would do). Returns the forged commit."""
    worktree = run / "worktree"
    listed = shas(run)
    order = [listed[t] for t in ("a1", "a2", "c1")]
    after = order[order.index(replaced) + 1 :]
    git(worktree, "reset", "-q", "--hard", keep)
    forged = commit_like(worktree, replaced, files)
    renamed = {replaced: forged}
    for sha in after:
        git(worktree, "cherry-pick", sha)
        renamed[sha] = git(worktree, "rev-parse", "HEAD")
    data = result_of(run)
    for v in data["verified"]:
        v["commit"] = renamed.get(v["commit"], v["commit"])
    data["branch"]["head"] = git(worktree, "rev-parse", "HEAD")
    rewrite_result(run, data)
    return forged


def test_a_commit_added_to_the_branch_by_hand_is_caught(tmp_path: Path) -> None:
    run = work_night(tmp_path)
    extra = commit_on_branch(run, {"later.txt": "slipped in\n"}, "an extra commit")
    audit = audited(run, rerun=False)
    assert audit.disagreements == ["branch"]
    branch = next(c for c in audit.checks if c.name == "branch")
    assert extra[:12] in branch.detail and "not in result.json" in branch.detail


def test_a_commit_added_and_listed_in_the_result_is_still_caught(tmp_path: Path) -> None:
    """The forger also adds the commit to result.json as a verified task."""
    run = work_night(tmp_path)
    extra = commit_on_branch(run, {"later.txt": "slipped in\n"}, "x9: more\n\n(overnight task x9)")
    data = result_of(run)
    data["verified"].append(
        {"id": "x9", "title": "more", "commit": extra, "attempts": 1, "via": "lap"}
    )
    data["plan"]["done"].append("x9")
    data["branch"]["head"] = extra
    rewrite_result(run, data)
    audit = audited(run)
    assert {"verified", "plan", "commit x9", "verify x9"} <= set(audit.disagreements)
    assert "branch" not in audit.disagreements  # the branch does hold what is listed now


def test_a_verified_commit_removed_from_the_branch_is_caught(tmp_path: Path) -> None:
    run = work_night(tmp_path)
    c1 = shas(run)["c1"]
    git(run / "worktree", "reset", "-q", "--hard", "HEAD~1")
    audit = audited(run, rerun=False)
    assert audit.disagreements == ["branch", "commit c1"]
    branch = next(c for c in audit.checks if c.name == "branch")
    assert c1[:12] in branch.detail and "not on the branch" in branch.detail


def test_verified_commits_reordered_on_the_branch_are_caught(tmp_path: Path) -> None:
    run = work_night(tmp_path)
    listed = shas(run)
    worktree = run / "worktree"
    base = result_of(run)["branch"]["base_commit"]
    git(worktree, "reset", "-q", "--hard", base)
    for tid in ("a2", "a1", "c1"):
        git(worktree, "cherry-pick", listed[tid])
    audit = audited(run, rerun=False)
    assert "branch" in audit.disagreements
    # the commits the result lists are no longer the branch's: a rewritten history
    assert "commit a1" in audit.disagreements and "commit a2" in audit.disagreements


def test_a_verified_commit_rewritten_to_hold_nothing_is_caught(tmp_path: Path) -> None:
    """a2's commit replaced by one with the same message and none of the work; the branch and
    result.json agree with each other again. The checkpoint remembers the commit the harness
    verified, and the verify, run again on the forged commit, fails."""
    run = work_night(tmp_path)
    listed = shas(run)
    forged = rebuild_branch(run, listed["a1"], listed["a2"], {})
    audit = audited(run)
    assert "branch" not in audit.disagreements
    assert {"verified", "verify a2"} <= set(audit.disagreements)
    verify = next(c for c in audit.checks if c.name == "verify a2")
    assert forged[:12] in verify.detail and "not_done" in verify.detail
    # without the re-run, the checkpoint's record still catches it
    assert "verified" in audited(run, rerun=False).disagreements


def test_a_verified_commit_that_changes_a_protected_path_is_caught(tmp_path: Path) -> None:
    """The forged a2 does its work and also rewrites a test to pass (tests/ is protected by
    default): its verify passes again, its protection check does not."""
    run = work_night(tmp_path)
    listed = shas(run)
    weakened = "def test_ok():\n    pass\n"
    rebuild_branch(
        run, listed["a1"], listed["a2"], {"a2.txt": "a2\n", "tests/test_ok.py": weakened}
    )
    audit = audited(run)
    assert "protected a2" in audit.disagreements
    assert "verify a2" not in audit.disagreements
    protected = next(c for c in audit.checks if c.name == "protected a2")
    assert "tests/test_ok.py" in protected.detail


def test_a_verified_commit_that_plants_automation_is_caught(tmp_path: Path) -> None:
    """The forged a2 does its work and also adds a CI workflow the spec does not allow: its
    verify passes again, its automation check does not."""
    run = work_night(tmp_path)
    listed = shas(run)
    workflow = "on: push\njobs: {}\n"
    rebuild_branch(
        run, listed["a1"], listed["a2"], {"a2.txt": "a2\n", ".github/workflows/x.yml": workflow}
    )
    audit = audited(run)
    assert "automation a2" in audit.disagreements
    assert "verify a2" not in audit.disagreements
    found = next(c for c in audit.checks if c.name == "automation a2")
    assert "`.github/workflows/x.yml` is a GitHub Actions workflow (created)" in found.detail
    assert "result.json names none" in found.detail


def test_a_verify_changed_in_the_run_spec_is_caught(tmp_path: Path) -> None:
    """spec.json's verify of a2 now asks for something the commit does not hold."""
    run = work_night(tmp_path)
    spec = json.loads((run / "spec.json").read_text())
    for task in spec["tasks"]:
        if task["id"] == "a2":
            task["verify"] = "test -f a2.txt && test -f a2-tests.txt"
    (run / "spec.json").write_text(json.dumps(spec))
    audit = audited(run)
    assert audit.disagreements == ["commit a2", "verify a2"]
    assert (
        "not the one the run ran" in next(c for c in audit.checks if c.name == "commit a2").detail
    )
    assert audited(run, rerun=False).disagreements == ["commit a2"]


@pytest.mark.parametrize("where", ["outside", "writable"])
def test_a_verify_that_passed_only_because_of_a_file_outside_the_commit_is_caught(
    tmp_path: Path, where: str
) -> None:
    """The task's command left a file outside the repository, and its verify checks for it:
    the harness saw it pass. On a fresh export of the commit, in the sandbox (its own /tmp,
    no home, no run directory, the night's writable paths hidden), nothing of it is there."""
    run = outside_night(tmp_path, where)
    audit = audited(run)
    assert audit.disagreements == ["verify t1"]
    assert audit.exit_code == 3
    assert audited(run, rerun=False).disagreements == []  # what --no-rerun gives up


def test_the_audit_changes_nothing_in_the_repository(tmp_path: Path) -> None:
    run = work_night(tmp_path)
    repo = Path(json.loads((run / "run.json").read_text())["workspace"])
    before = (
        git(repo, "worktree", "list", "--porcelain"),
        git(repo, "for-each-ref"),
        git(repo, "status", "--porcelain"),
    )
    assert audited(run).agrees
    after = (
        git(repo, "worktree", "list", "--porcelain"),
        git(repo, "for-each-ref"),
        git(repo, "status", "--porcelain"),
    )
    assert after == before


def test_a_verify_changed_in_the_checkpoint_is_caught(tmp_path: Path) -> None:
    """The checkpoint rewritten through the store itself (valid frame and checksum): its
    record of a2's verify now says `false`. The two records of the verify disagree, and the
    recorded one no longer passes."""
    from overnight.store.run_state import RunStateStore, load_run_state

    run = work_night(tmp_path)
    state = load_run_state(run / "checkpoint.json")
    assert state is not None
    done = state.completed
    at = next(i for i, c in enumerate(done) if c.task.id == "a2")
    task = done[at].task.model_copy(update={"verify": "test -f a2.txt && false"})
    state.completed = [*done[:at], done[at].model_copy(update={"task": task}), *done[at + 1 :]]
    RunStateStore(run / "checkpoint.json").compact(state)
    audit = audited(run)
    assert audit.disagreements == ["commit a2", "verify a2"]
    verify = next(c for c in audit.checks if c.name == "verify a2")
    assert "test -f a2.txt && false" in verify.detail and "exit 0" in verify.detail
