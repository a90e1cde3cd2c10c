"""Tasks held for a person: an effect of a task's (a deploy, a payment) whose outcome nobody
knows keeps the task's work off the branch, whatever its verify said, until a person settles
the effect (``overnight effects resolve``); then the task runs again, and the ledger replays
the effect or lets it be made once.
"""

from __future__ import annotations

from collections.abc import Callable

from overnight.core.state import RunState
from overnight.core.tasks import CommandRun, Task
from overnight.effects.ledger import UNSETTLED, render_done, render_unknown
from overnight.seams import EffectRow, EffectStore
from overnight.store.trace import Trace

#: Saves a task's attempt as a patch and resets the worktree: the patch's path, or None.
Discard = Callable[[Task, int, str | None], str | None]


class EffectHolds:
    """The effects review of one night: what a task did already, what is unsettled, and the
    holds and releases that follow."""

    def __init__(
        self, effects: EffectStore, state: RunState, trace: Trace, discard: Discard
    ) -> None:
        self.effects = effects
        self.state = state
        self.trace = trace
        self.discard = discard

    def done_before(self, task: Task) -> str:
        """What ``task``'s earlier attempts did outside the worktree, for its next attempt."""
        return render_done(self.effects.for_task(self.state.run_id, task.id))

    def unsettled(self, task: Task) -> list[EffectRow]:
        """Effects of ``task`` whose outcome nobody knows: intended with no answer (the process
        died in the call) are marked unknown here."""
        unsettled: list[EffectRow] = []
        for r in self.effects.for_task(self.state.run_id, task.id):
            if r.state == "intended":
                r = self.effects.settle(
                    r.step_key, "unknown", error="no answer was recorded (the process ended)"
                )
            if r.state in UNSETTLED:
                unsettled.append(r)
        return unsettled

    def hold(
        self,
        task: Task,
        attempt: int,
        unsettled: list[EffectRow],
        detail: str,
        command: CommandRun | None = None,
        candidate: str | None = None,
    ) -> None:
        """Park ``task`` until a person resolves its effects of unknown outcome: its work
        (``candidate``) is kept as a patch, never landed, whatever its verify said."""
        keys = [r.step_key for r in unsettled]
        self.trace.event("decision", decision="held_for_review", task=task.id, effects=keys)
        self.state.hold(
            task,
            render_unknown(unsettled),
            detail,
            self.discard(task, attempt, candidate),
            keys,
            command=command,
        )

    def release_reviewed(self) -> None:
        """Tasks held for effects a person has since resolved go back on the queue, to run
        again: the ledger replays an effect resolved as happened, and lets one resolved as not
        happened be made (once)."""
        settled = {
            key
            for p in self.state.parked
            for key in p.held_for
            if (row := self.effects.get(key)) is not None and row.state not in UNSETTLED
        }
        for task in self.state.release_held(settled):
            self.trace.event("decision", decision="released_after_review", task=task.id)
