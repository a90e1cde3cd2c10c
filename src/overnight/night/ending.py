"""The end of a night, after its stop: the closing summary (from the wrap-up reserve), the
terminal result written with its alert, the worktree dropped when no resume can use it, and
the final checkpoint recording the stop. What the result says is ``overnight.night.finish``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from overnight.config.alerts import AlertsSpec
from overnight.config.sandbox import SandboxSpec
from overnight.config.spec import BudgetSpec, ModelSpec, PredicateSpec
from overnight.core.budget import BudgetReading, Ledger
from overnight.core.endings import Stop
from overnight.core.goal import Goal
from overnight.core.state import RunState
from overnight.gates.manifests import is_manifest
from overnight.models.gateway import ModelGateway
from overnight.night.finish import (
    ClosingFacts,
    CommitSize,
    closing_summary,
    finish_result,
    write_result,
)
from overnight.night.gates import Gates
from overnight.night.verdict import dependency_changes
from overnight.night.worktree import Worktree, remove_worktree
from overnight.sandbox.policy import SandboxPolicy
from overnight.seams import Clock, EffectStore, Fence
from overnight.store.result import TerminalResult
from overnight.store.rundir import RunDir
from overnight.store.trace import Trace


@dataclass(frozen=True)
class EndingSections:
    """The sections of a night's spec that its end reads."""

    model: ModelSpec | None
    """Who writes the closing summary (None: it is rendered from the state alone)."""
    budget: BudgetSpec
    """Its ``usd``: the money cap the closing summary names."""
    predicate: PredicateSpec
    """Its ``command``, as the result reports it."""
    sandbox: SandboxSpec
    """Its mode, network and process limit, as the result reports them."""
    alerts: AlertsSpec
    """The alert the night's ending calls for."""


ALREADY_MET = (
    "The goal predicate already passed on the base commit, before any work: nothing was done, "
    "no model was called and no branch was kept. Check that the predicate fails without the "
    "change the goal asks for."
)


@dataclass
class NightEnding:
    """What the end of one night reads and writes."""

    sections: EndingSections
    state: RunState
    goal: Goal
    run_dir: RunDir
    ledger: Ledger
    trace: Trace
    effects: EffectStore
    sandbox: SandboxPolicy
    worktree: Worktree
    clock: Clock
    fence: Fence
    started_at: str
    gates: Gates | None = None
    """The night's gates, whose counts the result carries (None: a night built without)."""

    def finish(
        self,
        stop: Stop,
        gateway: ModelGateway | None,
        budgets_at_stop: dict[str, BudgetReading],
        budgets: Callable[[], dict[str, BudgetReading]],
        checkpoint: Callable[[], None] | None,
        *,
        already_met: bool = False,
    ) -> TerminalResult:
        """End with ``stop``. ``checkpoint`` None: the run is not to be touched (a refused
        resume): result.json is written, nothing else of the run. ``already_met``: the goal
        held before any work; no summary is asked for and no branch is kept."""
        if already_met:
            gateway = None  # nothing was done that a model could summarize: no call, no cost
        model, cap = self.sections.model, self.sections.budget.usd
        partial, wrapup = closing_summary(
            gateway, self.ledger, model, cap, self.state, self.goal, stop
        )
        facts = self.closing_facts(budgets_at_stop or budgets(), budgets())
        result = finish_result(facts, stop, partial, wrapup)
        if already_met:
            result = result.model_copy(update={"already_met": True, "message": ALREADY_MET})
            self.trace.event("decision", decision="already_met", branch=self.state.branch)
        if checkpoint is not None:
            self.fence.check("result.json")
        result = write_result(self.run_dir, result, self.sections.alerts, self.trace)
        if checkpoint is not None:
            self.worktree.drop_checkout()
            # A task held for a person's answer runs again on a resume once its effects are
            # resolved, whatever the ending: such a night keeps its worktree.
            if not result.resumable and not any(p.held_for for p in self.state.parked):
                self.remove_worktree()
            if already_met:
                self.delete_branch()
            self.state.close(stop.reason)
            try:
                checkpoint()
            except Exception as exc:  # the result is already on disk; say so in the trace
                self.trace.event("decision", decision="final_checkpoint_failed", error=repr(exc))
        return result

    def closing_facts(
        self, budgets_at_stop: dict[str, BudgetReading], budgets_end: dict[str, BudgetReading]
    ) -> ClosingFacts:
        """Everything the terminal result is built from, read once, after the closing call."""
        try:
            head: str | None = self.worktree.head()
            diff_stat = self.worktree.diff_stat(self.state.base_commit)
        except Exception:
            head, diff_stat = None, ""
        sandbox = self.sandbox.sandbox
        try:
            gates = self.gates.counts(head) if self.gates is not None else []
        except Exception as exc:  # the result is written whatever a record says
            self.trace.event("decision", decision="gate_counts_failed", error=repr(exc)[:300])
            gates = []
        return ClosingFacts(
            predicate_command=self.sections.predicate.command,
            sandbox=self.sections.sandbox,
            state=self.state,
            goal=self.goal,
            budgets_at_stop=budgets_at_stop,
            budgets_end=budgets_end,
            spent_nanos=self.ledger.spent_nanos,
            tokens_used=self.ledger.tokens_used,
            spend_path=self.run_dir.spend,
            head=head,
            diff_stat=diff_stat,
            worktree=self.run_dir.worktree,
            trace_ref=self.run_dir.trace,
            started_at=self.started_at,
            ended_at=self.clock.now_iso(),
            trace_lines_dropped=self.trace.dropped,
            effects=[r.as_dict() for r in self.effects.for_run(self.state.run_id)]
            + self.state.refused_effects,
            sandbox_identity=None if sandbox is None else sandbox.identity,
            commit_sizes=self.commit_sizes(),
            gates=gates,
        )

    def commit_sizes(self) -> dict[str, CommitSize]:
        """Each landed commit's size, and what it changes of the dependencies (best effort:
        a result is written whatever git says)."""
        try:
            found = self.worktree.commit_sizes(self.state.base_commit)
            sizes: dict[str, CommitSize] = {}
            for sha, (files, lines, paths) in found.items():
                deps: list[str] = []
                if any(is_manifest(p) for p in paths):
                    changes = self.worktree.changes(sha, f"{sha}^")
                    deps = dependency_changes(self.worktree, changes, sha, f"{sha}^")
                sizes[sha] = CommitSize(files, lines, deps)
            return sizes
        except Exception as exc:
            self.trace.event("decision", decision="commit_sizes_failed", error=repr(exc)[:300])
            return {}

    def delete_branch(self) -> None:
        """The branch of a night that did nothing: deleted, best effort."""
        try:
            self.worktree.delete_branch()
        except Exception as exc:
            self.trace.event("decision", decision="branch_kept", error=repr(exc))

    def remove_worktree(self) -> None:
        """A night that cannot be resumed needs its worktree no more: remove it from the
        user's repository (the branch stays). Best effort: ``overnight clean`` does it later."""
        try:
            removed = remove_worktree(self.run_dir.worktree)
        except Exception as exc:
            self.trace.event("decision", decision="worktree_kept", error=repr(exc))
            return
        if removed:
            self.trace.event(
                "decision", decision="worktree_removed", path=str(self.run_dir.worktree)
            )
