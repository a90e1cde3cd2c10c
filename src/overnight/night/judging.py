"""Judging a task's work and what follows from the judgement: its candidate commit, screened
for what no candidate may change, verified on a clean checkout (``Verdicts``), then landed on
the branch or kept as a patch. The lap and a resume's task in flight are judged by the same
``Judge.judge``; what to do with the verdict is ``overnight.core.routing``'s to say.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from overnight.core.candidate_rules import park_reason
from overnight.core.resume import VerifyOutcome
from overnight.core.state import RunState
from overnight.core.tasks import CommandRun, ParkedTask, Task
from overnight.core.text import clip
from overnight.night.candidate_commit import Candidate
from overnight.night.checkouts import Checkouts, SetupFailed
from overnight.night.effect_holds import EffectHolds
from overnight.night.gates import Gates
from overnight.night.verdict import Screen, Verdict, Verdicts
from overnight.night.worktree import Worktree
from overnight.seams import EffectStore, Fence
from overnight.store.atomic import private_dir
from overnight.store.rundir import RunDir
from overnight.store.trace import Trace


def task_marker(task_id: str) -> str:
    """What a landed commit's message carries to name its task (a resume finds it by it)."""
    return f"(overnight task {task_id})"


@dataclass(frozen=True)
class Judged:
    """A task's candidate as judged: what it is made of, what it changes, what its verify
    said (None: parked before any verify ran)."""

    made: Candidate
    screened: Screen
    verdict: Verdict | None
    settled: bool = False
    """Parked or held already: nothing is left to route."""


def parked_fields(parked: list[ParkedTask]) -> dict[str, object]:
    """The trace's fields for the task just parked, if it was."""
    if not parked:
        return {}
    return {"parked": parked[-1].reason, "detail": clip(parked[-1].detail, 300)}


class Judge:
    """Makes, screens, verifies, holds, lands and discards a task's candidate."""

    def __init__(
        self,
        state: RunState,
        run_dir: RunDir,
        worktree: Worktree,
        checkouts: Checkouts,
        verdicts: Verdicts,
        trace: Trace,
        fence: Fence,
        log_name: Callable[[str, str], str],
        effects: EffectStore,
        gates: Gates,
    ) -> None:
        self.state = state
        self.gates = gates
        self.run_dir = run_dir
        self.worktree = worktree
        self.checkouts = checkouts
        self.verdicts = verdicts
        self.trace = trace
        self.fence = fence
        self.log_name = log_name
        self.holds = EffectHolds(effects, state, trace, self.discard)
        """Tasks held for effects of unknown outcome (their work is discarded as a patch)."""

    def judge(
        self, task: Task, attempt: int, ran: CommandRun | None = None, *, lap: bool = False
    ) -> Judged:
        """The candidate of what the worktree holds for ``task``, parked when it changes what
        no candidate may (no verdict then), else verified on a clean checkout, and held when
        an effect of unknown outcome must be settled first (``settled``: parked or held)."""
        made = self.candidate(task)
        screened = self.verdicts.screen(task, made.commit)
        if self.park_if_judged(task, attempt, made, screened):
            return Judged(made, screened, None, settled=True)
        verdict = self.verdicts.verify(task, made.commit, attempt)
        if verdict.outcome is VerifyOutcome.DONE:
            verdict = self.gated(task, made.commit, attempt, verdict)
        if lap:
            self.trace.event("task", event="verified", task=task.id, outcome=verdict.outcome.value)
        unsettled = self.holds.unsettled(task)
        if unsettled:  # whatever the verify says: a person settles the effect first
            self.holds.hold(task, attempt, unsettled, verdict.detail, ran, made.commit)
            return Judged(made, screened, verdict, settled=True)
        return Judged(made, screened, verdict)

    def gated(self, task: Task, candidate: str | None, attempt: int, verdict: Verdict) -> Verdict:
        """A passed verify, held to the repository's own checks: a candidate that adds a
        finding the base commit does not have is not done, the findings said."""
        said = self.gates.judge(task.id, candidate, attempt)
        if said is None:
            return verdict
        if said.passed:
            return replace(verdict, gates=said)
        return replace(verdict, outcome=VerifyOutcome.NOT_DONE, detail=said.detail(), gates=said)

    def route_resumed(self, task: Task, attempt: int, judged: Judged) -> None:
        """Land, park or requeue the task a resume found in flight, as its verdict routes it
        (``RunState.route_resumed``)."""
        verdict = judged.verdict
        assert verdict is not None
        made, screened = judged.made, judged.screened
        commit: str | None = None
        patch: str | None = None
        touches: list[str] = []
        if verdict.outcome is VerifyOutcome.DONE:
            touches = self.verdicts.touches_runner(task, made.commit)
            commit, screened = self.land_resumed(task, made.commit, screened)
        else:
            patch = self.discard(task, attempt, made.commit)
        parked_before = len(self.state.parked)
        self.state.route_resumed(
            verdict.outcome,
            verdict.detail,
            commit,
            patch,
            verdict.cannot_run,
            verdict.evidence,
            touches,
            screened.landed_automation,
        )
        self.state.note_candidate(
            task.id,
            excluded=made.notes.listed_excluded(),
            dropped=made.notes.listed_dropped(),
        )
        self.trace.event(
            "decision",
            decision="resume_verified",
            task=task.id,
            outcome=verdict.outcome.value,
            **parked_fields(self.state.parked[parked_before:]),
        )

    def candidate(self, task: Task) -> Candidate:
        """The task's changes as a commit on top of the branch (not on it yet; None when it
        changed nothing that would be committed), with what was left out of it."""
        title = task.title or (task.command or task.brief or "").splitlines()[0][:60]
        message = (
            f"{task.id}: {title}\n\nVerified by: {task.verify}\n"
            f"Run: {self.state.run_id} {task_marker(task.id)}\n"
        )
        return self.worktree.candidate(message)

    def park_if_judged(self, task: Task, attempt: int, made: Candidate, screened: Screen) -> bool:
        """Park the task when its candidate holds what no candidate may (a nested repository,
        a file over the size limit), changes what judges the work, or changes what runs by
        itself beyond what the spec allows; True when parked."""
        forged, automation = screened.judging_changes, screened.automation_refused
        refused = made.notes.refused
        if not screened.refused and not refused:
            return False
        hygiene = [screened.oversized] if screened.oversized else []
        if screened.dependencies_refused:
            hygiene.append(
                "; ".join(screened.dependencies_refused)
                + " ([predicate] allow_dependency_changes is not set)"
            )
        if forged or refused or automation:
            reason, lines = park_reason(refused, [s for _path, s in forged], automation)
            lines += hygiene
        else:  # only its size or its dependencies
            reason, lines = "; ".join(hygiene), hygiene
        self.trace.event(
            "decision", decision="candidate_refused", task=task.id, reason=reason, paths=lines
        )
        self.state.finish_parked(
            task,
            reason,
            "\n".join(lines),
            self.discard(task, attempt, made.commit),
            protected_changes=[r.path for r in refused if r.judges] + [p for p, _s in forged],
            excluded=made.notes.listed_excluded(),
            dropped=made.notes.listed_dropped(),
            automation_changes=[a.path for a in automation],
        )
        return True

    def land(
        self, candidate: str | None, task: Task | None = None, screened: Screen | None = None
    ) -> str | None:
        """Put a verified candidate on the branch; a task that changed nothing lands no
        commit. What it changes of what runs by itself, the spec allowing it, is traced."""
        self.fence.check("a commit to the branch")
        if task is not None and screened is not None and screened.automation_allowed:
            paths = screened.landed_automation
            self.trace.event("decision", decision="automation_landed", task=task.id, paths=paths)
        if task is not None and screened is not None and screened.dependencies_allowed:
            self.trace.event(
                "decision",
                decision="dependencies_landed",
                task=task.id,
                changes=screened.dependencies_allowed,
            )
        landed = self.worktree.land(candidate)
        if landed is not None:
            self.gates.landed(landed)
        return landed

    def land_resumed(
        self, task: Task, candidate: str | None, screened: Screen
    ) -> tuple[str | None, Screen]:
        """Land a resumed task's verified candidate; when there is none to land, the commit
        the process that died landed already (found by its marker), with all it changed."""
        commit = self.land(candidate, task, screened)
        if commit is not None:
            return commit, screened
        commit = self.worktree.find_commit(self.state.base_commit, task_marker(task.id))
        if commit is None:  # nothing to land
            return None, screened
        landed = self.verdicts.screen(task, commit, parent=f"{commit}^")
        return commit, Screen(
            automation_allowed=landed.automation_allowed + landed.automation_refused
        )

    def discard(self, task: Task, attempt: int, candidate: str | None) -> str | None:
        """Save ``candidate``'s change as a patch in the artifacts and write the worktree
        afresh from the branch; the patch's path, or None when there was no change."""
        patch = self.run_dir.artifacts / self.log_name(f"{task.id}.{attempt}", ".patch")
        private_dir(self.run_dir.artifacts)
        saved = self.worktree.discard(patch, candidate)
        self.set_up_worktree()
        return str(patch) if saved else None

    def set_up_worktree(self) -> None:
        """The spec's set-up command in the agent's worktree; a failure is the trace's to say
        (the checks run it again in their own checkouts, and say it there)."""
        try:
            self.checkouts.set_up(self.run_dir.worktree, "worktree")
        except SetupFailed as exc:
            self.trace.event("decision", decision="worktree_setup_failed", detail=str(exc)[:500])
