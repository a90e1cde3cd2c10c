"""The two error roots.

``ConfigError``: the user must fix the spec; the CLI exits 64 before anything is written.
``RunError``: something ended (or must end) a run in a named way. Each carries a ``cause``
that the endings table maps to an ending and to a resumability decision.

Third-party exceptions are translated into one of these at the boundary where they occur,
once; anything that slips through untranslated is classified as ``internal_error``.
"""

from __future__ import annotations


class OvernightError(Exception):
    """Root of every error this package raises on purpose."""


class ConfigError(OvernightError):
    """The spec (or a command line) is wrong. Names the field and the fix."""

    def __init__(self, field: str, problem: str, fix: str = "") -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        text = f"{field}: {problem}"
        if fix:
            text += f" (fix: {fix})"
        super().__init__(text)


class RunBusy(ConfigError):
    """Another process holds the run's lock: the run is being driven already."""


class SpecProblems(ConfigError):
    """Several problems in one spec, each with its field and fix; ``field``, ``problem`` and
    ``fix`` are the first one's."""

    def __init__(self, problems: list[ConfigError]) -> None:
        first = problems[0]
        super().__init__(first.field, first.problem, first.fix)
        self.problems = problems
        lines = [f"{len(problems)} problems in the spec:"]
        lines += [f"  {p}" for p in problems]
        self.args = ("\n".join(lines),)

    def __str__(self) -> str:
        return str(self.args[0])


class RunError(OvernightError):
    """A run-ending condition with a machine-readable cause."""

    cause: str = "internal_error"

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


class BudgetRefused(RunError):
    """The ledger refused a call before it was made: its worst case would cross a line.

    Not an error in the run: the lap turns it into the ``blocked`` flag and the stop check
    reports BUDGET_EXHAUSTED on the next lap.
    """

    cause = "budget_refused"

    def __init__(self, budget: str, would_reach: float, cap: float, unit: str = "usd") -> None:
        self.budget = budget
        self.would_reach = would_reach
        self.cap = cap
        if unit == "usd":
            detail = f"would reach ${would_reach:.2f} of ${cap:.2f}"
        else:
            detail = f"would reach {would_reach:,.0f} of {cap:,.0f} {unit}"
        super().__init__(detail)


class Interrupted(RunError):
    """SIGTERM or SIGINT arrived: drain, leave the task in flight checkpointed, stop."""

    cause = "interrupted"

    def __init__(self, signal_name: str) -> None:
        self.signal_name = signal_name
        super().__init__(f"received {signal_name}")


class GoalMutated(RunError):
    """The goal text no longer matches the hash taken when it was loaded."""

    cause = "goal_mutated"


class CheckpointCorrupt(RunError):
    """A checkpoint is torn, fails its checksum, or has another schema version."""

    cause = "checkpoint_corrupt"


class InvalidModelOutput(RunError):
    """A structured answer (plan, replan, drift verdict) failed its schema."""

    cause = "invalid_model_output"


class ModelCallFailed(RunError):
    """The model seam raised, or returned something that is not a response."""

    cause = "model_error"


class UnreadableAnswer(ModelCallFailed):
    """The model answered (so it may have billed) with something that cannot be read."""


class DependencyUnavailable(RunError):
    """A provider or service stayed unreachable for longer than the configured limit."""

    cause = "dependency_unavailable"


class DiskFull(RunError):
    """The run directory or workspace could not be written: no space left."""

    cause = "disk_full"


class WorkspaceError(RunError):
    """Git or the workspace refused an operation the harness needs."""

    cause = "workspace_error"


class TableError(AssertionError):
    """The endings tables disagree with each other: a bug in this package, never classified.

    Deliberately an ``AssertionError``: the lap's catch-all lets it through, because an
    ending reported through a broken table would be a lie with an exit code.
    """
