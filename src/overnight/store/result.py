"""The terminal result: the one object a 9am script reads, with a JSON Schema shipped beside it.

It carries enough to recompute its own stop reason: every budget's ``at_stop`` (what was used
at the moment of the stop decision), its ``limit`` and the lines derived from it, and the
amount a refused call would have reached. ``used`` is everything used, the closing summary
included; what the summary cost alone is in ``wrapup``. Counts are integers and dollars are
whole micro-dollars, so every figure reads as written. ``warnings`` lists every call whose bill
was not simply what was reserved for it.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from overnight.core.budget import BudgetReading

RESULT_KIND = "overnight-result"
RESULT_SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: A budget figure: an integer for counts (steps, tokens), a number for dollars and seconds.
Amount = int | float


class BudgetBlock(_Model):
    used: Amount
    """Everything used by the run, the closing summary included (for money: what was spent,
    the same figure as ``spend.total_usd``)."""
    limit: Amount | None
    """The stated budget; null when the spec sets none."""
    stop_at: Amount | None
    """The stop check fires once the figure it reads (``at_stop``) reaches this."""
    enforced_at: Amount | None
    """No ordinary call may cross this; above it lies the wrap-up reserve."""
    refused_at: Amount | None = None
    """What a refused call would have brought the figure to; null when nothing was refused."""
    at_stop: Amount | None = None
    """Used at the moment the stop was decided: the figure the stop reason is recomputed
    from. Null only in results written before it existed, whose ``used`` is that figure."""

    def reading(self) -> BudgetReading:
        return BudgetReading(
            self.used, self.limit, self.stop_at, self.enforced_at, self.refused_at, self.at_stop
        )


class Budgets(_Model):
    steps: BudgetBlock
    """Task executions: each attempt at a task, retries included ([budget] steps)."""
    tokens: BudgetBlock
    """Tokens billed: input, cache reads and writes, and output ([budget] tokens)."""
    seconds: BudgetBlock
    """Wall-clock seconds of the night, waits and tools included ([budget] hours)."""
    cost_usd: BudgetBlock
    """Dollars spent on model calls ([budget] usd)."""
    fleet_money: BudgetBlock | None = None
    """The fleet's daily cap this night also reserved against (``[fleet] usd_per_day``): its
    ``used`` is the fleet's spend that day as the night last read it. Absent when none
    applied."""

    @model_serializer(mode="wrap")
    def _without_absent_cap(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A night with no fleet cap writes the same four blocks as before the fleet existed.
        data: dict[str, Any] = handler(self)
        if data.get("fleet_money") is None:
            data.pop("fleet_money", None)
        return data

    def view(self) -> dict[str, BudgetReading]:
        view = {
            "steps": self.steps.reading(),
            "tokens": self.tokens.reading(),
            "seconds": self.seconds.reading(),
            "cost_usd": self.cost_usd.reading(),
        }
        if self.fleet_money is not None:
            view["fleet_money"] = self.fleet_money.reading()
        return view


class ParkedEntry(_Model):
    id: str
    """The task's id."""
    title: str
    """The task's title."""
    reason: str
    """Why it was parked, whole: its first sentence names the path, the rule or the effect."""
    detail: str = ""
    """What the verify or the protection check said, shortened past its first sentence with a
    pointer to where the whole text is."""
    patch: str | None = None
    """The path of the patch of its half-done edits, in the run's artifacts; null when none
    was kept."""
    protected_changes: list[str] = Field(default_factory=list)
    """For a task parked as "changed what judges it": each protected path it changed."""
    automation_changes: list[str] = Field(default_factory=list)
    """For a task parked as "changes what runs by itself on your machine or CI": each
    automation path it changed (CI, git, shell, editor or agent configuration, commit or
    install hooks) that ``[predicate] allow_automation`` does not allow."""
    held_for: list[str] = Field(default_factory=list)
    """For a task held for effects of unknown outcome: their run-step keys. It lands only
    after a person resolves each (``overnight review resolve effect:KEY``) and a resume runs
    it again."""
    excluded: list[str] = Field(default_factory=list)
    """Untracked generated paths its candidate left out (built-in excludes and ``[run]
    exclude``; a directory ends with ``/``)."""
    dropped: list[str] = Field(default_factory=list)
    """Tracked generated files whose change its candidate dropped (the branch keeps the base
    version)."""


class PrunedEntry(_Model):
    id: str
    """The task's id."""
    title: str
    """The task's title."""
    drift_score: float
    """The drift judge's score that pruned it (above 0.3)."""
    at_task_count: int
    """How many tasks had run when the judge pruned it."""


class Plan(_Model):
    done: list[str]
    """The ids of the verified tasks, in the order they landed."""
    remaining: list[str]
    """The ids of the tasks still queued when the night ended."""
    in_progress: str | None
    """A task left IN_PROGRESS (a signal or a refused call interrupted it); resume verifies it."""
    parked: list[ParkedEntry]
    """Tasks set aside for a person, each with its reason."""
    pruned: list[PrunedEntry]
    """Tasks the drift judge took off the queue as off the goal."""


class VerifiedTask(_Model):
    id: str
    """The task's id."""
    title: str
    """The task's title."""
    commit: str | None
    """Its commit on the run's branch; null when it changed nothing (verified without an empty
    commit)."""
    attempts: int
    """Attempts it took, across the run's processes."""
    via: Literal["lap", "resume"]
    """``lap``: verified in a lap; ``resume``: the task left in flight, verified first when the run
    was resumed."""
    command_exit_code: int | None = None
    """A command task's exit code on its last attempt (None: it timed out, an agent task, or
    verified on resume)."""
    command_timed_out: bool = False
    """Its command ran out its timeout; the verify passed all the same."""
    evidence: Literal["tests", "exit_code_only"] = "exit_code_only"
    """What its verify was judged on: ``tests`` (pytest: each test reported passed by the
    harness's own reporter) or ``exit_code_only`` (any other command)."""
    touches_runner: list[str] = Field(default_factory=list)
    """Files of its commit that reach into the test runner or the process's end (``pytest``,
    ``atexit``, ``os._exit``, ...): code a person should read before trusting the verdict."""
    automation: list[str] = Field(default_factory=list)
    """Automation paths its commit changed (CI, git, shell, editor or agent configuration,
    commit or install hooks), each allowed by ``[predicate] allow_automation``: what will run
    by itself once the branch is pushed or checked out. Also on the report's first screen."""
    excluded: list[str] = Field(default_factory=list)
    """Untracked generated paths its candidate left out (built-in excludes and ``[run]
    exclude``; a directory ends with ``/``)."""
    dropped: list[str] = Field(default_factory=list)
    """Tracked generated files whose change its candidate dropped (the branch keeps the base
    version)."""
    files_changed: int | None = None
    """How many files its commit changes (None: it landed no commit, or git could not say)."""
    lines_changed: int | None = None
    """Lines its commit adds plus lines it deletes (binary files count no lines)."""
    dependency_changes: list[str] = Field(default_factory=list)
    """What its commit changes of the project's dependencies (a requirements file, the
    dependency tables of ``pyproject.toml``, a lockfile), one sentence each: landed because
    ``[predicate] allow_dependency_changes`` allows it."""


class GateBlock(_Model):
    """One of the repository's own checks (``[[gates]]``), as the night judged by it."""

    name: str
    kind: Literal["findings", "format"]
    base: int
    """Its findings on the base commit (a format gate: the files its formatter rewrites)."""
    landed: int
    """Its findings on the last commit that landed (the base's when none landed)."""
    new: list[str] = Field(default_factory=list)
    """The findings of what landed that the base commit does not have: none, for anything
    the harness landed."""
    removed: int = 0
    """Findings of the base commit that what landed no longer has."""
    unreadable: str = ""
    """Why its output on the base commit could not be read: then it judged nothing."""


class DriftPoint(_Model):
    at_task_count: int
    """How many tasks had run when the judge was asked."""
    seconds: float
    """When, in seconds of the run's wall clock."""
    score: float
    """The judge's score in [0, 1]: above 0.3 the off-goal tasks are pruned, above 0.5 the night
    halts."""
    action: Literal["none", "prune", "halt"]
    """What the score led to: ``none``, ``prune`` or ``halt``."""
    off_goal_task_ids: list[str]
    """The tasks the judge named as off the goal."""
    automation_shown: list[str] = Field(default_factory=list)
    """What the drift judge was shown of the automation paths the night's tasks changed, one
    line per task (``fix_ci: .github/workflows/ci.yml (landed)``); empty when none did."""


class SpendPoint(_Model):
    seconds: float
    """Seconds of the run's wall clock."""
    cost_usd: float
    """Dollars spent by then."""


class Spend(_Model):
    total_usd: float
    """Everything spent by this run across all its processes, wrap-up included, and every
    reservation that never had an answer at its worst case."""
    by_purpose: dict[str, float]
    """``total_usd`` split by the calls' purpose (plan, execute, drift, replan, compact,
    summarize)."""
    curve: list[SpendPoint]
    """Spend so far after each booked attempt, by the run's seconds."""
    cost_per_verified_task: float | None
    """``total_usd`` over the verified tasks; null when none was verified."""
    model_calls: int
    """Attempts booked (an attempt that failed after the provider had it is one)."""


class ResultWarning(_Model):
    """A call whose bill was not simply what was reserved for it and what it reported."""

    kind: Literal[
        "usage_unknown",
        "answer_unreadable",
        "attempt_failed",
        "over_reservation",
        "usage_suspect",
        "unanswered_reservation",
    ]
    """``usage_unknown``: the answer's usage was missing or unreadable, so its reservation
    (the worst case) was booked. ``answer_unreadable``: the answer could not be read at all;
    its reservation was booked. ``attempt_failed``: an attempt failed after the provider had
    the request (a timeout, a broken stream, an error inside the stream) and was booked at
    the usage it reported, else at its worst case. ``over_reservation``: the bill exceeded the
    reservation and was booked in full (spend may then pass a line; the next stop check sees
    it). ``usage_suspect``: the usage was booked as reported, but its figures disagree with
    each other. ``unanswered_reservation``: a reservation never had an answer (the process
    ended during the call) and counts at its worst case."""
    message: str
    """What happened, in words."""
    purpose: str | None = None
    """The call's purpose (plan, execute, drift, replan, compact, summarize)."""
    attempt: int | None = None
    """Which attempt at the call, counting from 1; null when the journal did not say."""
    reserved_usd: float | None = None
    """The worst case reserved for the attempt."""
    booked_usd: float | None = None
    """What was booked for it."""
    seconds: float | None = None
    """When, in seconds of the run's wall clock."""


class Wrapup(_Model):
    source: Literal["model", "structured"]
    """``model``: the summary call succeeded; ``structured``: rendered from the plan instead."""
    cost_usd: float
    """What the closing summary call cost (0 when none was made)."""
    error: str | None = None
    """Why the summary call failed, when ``source`` is ``structured`` after a failed call."""


class Branch(_Model):
    name: str
    """The run's branch, ``overnight/<run-id>``."""
    base_commit: str
    """The workspace's committed HEAD the night started from."""
    head: str | None
    """The branch's last commit when the night ended; null when it could not be read."""
    worktree: str
    """The run's worktree (``RUN_DIR/worktree``), removed once the night cannot be resumed."""
    diff_stat: str = ""
    """``git diff --stat`` of the branch against its base commit."""


class PredicateBlock(_Model):
    command: str
    """The goal predicate, as the spec gives it."""
    met: bool
    """Whether its last run met the goal."""
    exit_code: int | None
    """Its last run's exit code; null when it was cut or did not run."""
    detail: str
    """What its last run printed, shortened."""
    timed_out: bool = False
    """Cut at its timeout or at the night's time limit (not met)."""
    ran: bool = True
    """False when no time was left to start it."""
    evidence: Literal["tests", "exit_code_only"] = "exit_code_only"
    """``tests``: judged per test on the harness's own reporter (pytest); ``exit_code_only``:
    the verdict is the exit code's."""
    verdict: str = ""
    """For ``tests``: the judgement in one line, naming the tests that were not passed."""
    allowed: list[str] = Field(default_factory=list)
    """Tests that stayed skipped because the base commit skipped them in the same way (the same
    place, the same reason), each with where and why."""
    stayed_skipped: list[str] = Field(default_factory=list)
    """The same, grouped by reason with counts: ``33 skipped as on the base commit: numpy is
    not installed``."""
    at_start: list[str] = Field(default_factory=list)
    """What the check before the night found (an outcome that differs in the user's
    checkout, naming the files)."""


class SandboxBlock(_Model):
    mode: Literal["auto", "on", "off"]
    """``off``: an unsandboxed night, whatever its commands did."""
    network: bool
    """Whether sandboxed commands had the machine's network."""
    sandboxed_commands: int
    """Commands (tasks, verifies, the predicate, ``run_command``) run in the sandbox."""
    unsandboxed_commands: int
    """Commands run as written, outside the sandbox."""
    uid: int | None = None
    """The uid sandboxed commands ran as, seen from outside the sandbox; None: no sandbox was
    built (mode ``off``, or bubblewrap missing in a night that never needed it)."""
    ran_as_root: bool = False
    """True: sandboxed commands ran as root outside the sandbox too (the harness was root and
    could not drop to an unprivileged uid), so the process limit, file permissions and
    capabilities did not bind as for a normal user; ``root_reason`` says why."""
    root_reason: str = ""
    """Why the sandbox ran as root (empty when it did not)."""
    process_limit: str = ""
    """What ``[sandbox] processes`` (RLIMIT_NPROC, which the kernel counts per uid) bound, in
    one sentence starting with the mechanism: ``per night: uid N of its own`` (a root
    harness's sandbox held a uid no other sandbox of the machine had, so no other night's
    processes counted against it), ``shared: uid N, with other sandboxes of this machine``
    (every uid of the range was held; the reason follows), ``per user`` (a harness that is not
    root: its own uid, shared with its other processes), ``not bound`` (the sandbox ran as
    root) or ``none`` (no limit set). Empty: no sandbox was built, or a result from before
    this was recorded."""


class GoalBlock(_Model):
    text: str
    """The goal in the spec's words."""
    sha256: str
    """Its SHA-256: the harness checks the goal is the one the run started with."""


class CliAttempt(_Model):
    """One attempt a CLI agent made at a task, as the harness metered it and as the CLI told it."""

    task: str
    status: str
    """What the harness made of the CLI's run: ``finished``, ``limit_reached`` (its calls were
    refused at a budget, or its turn limit), ``gave_up`` (a crash, a hang, no changes)."""
    calls: int
    """Model calls the metering proxy forwarded for this attempt."""
    booked_usd: float
    """What the night booked for those calls: the harness's figure, the one that counts."""
    cli_success: bool | None
    """What the CLI said of its own success: its word, never the verdict."""
    cli_reported_usd: float | None
    """The CLI's own cost figure (Claude Code's ``total_cost_usd``): shown beside
    ``booked_usd``, never counted."""
    log: str
    """Its whole output, kept as an artifact."""


class ExecutorBlock(_Model):
    """The CLI agent that carried out the night's agent tasks."""

    kind: str
    """``claude-code``, ``codex`` or ``command``."""
    program: str
    """The CLI's executable."""
    version: str
    """The version it reported."""
    attempts: list[CliAttempt]
    """Each attempt it made at a task."""


class TerminalResult(_Model):
    kind: Literal["overnight-result"] = "overnight-result"
    """Always ``overnight-result``."""
    schema_version: int = RESULT_SCHEMA_VERSION
    """The format of this object (1)."""
    run_id: str
    """The run's id (also in its branch's name and its run directory's)."""
    status: Literal["SUCCESS", "PARTIAL", "FAILURE"]
    """The ending's class."""
    stop_reason: str
    """The ending, qualified: ``BUDGET_EXHAUSTED:money``, ``TIME_LIMIT:sigterm``, ..."""
    ending: str
    """One of the seven endings, unqualified."""
    exit_code: int
    """The exit code ``overnight run`` and ``resume`` exit with: 0, 2, 3 or 4."""
    resumable: bool
    """True exactly when ``overnight resume`` continues the run."""
    alert: Literal["none", "alert", "page"]
    """How urgently a person is told: ``none``, ``alert`` or ``page`` (see ``[alerts]``)."""
    message: str
    """One sentence: why the run ended."""
    goal: GoalBlock
    """The goal the night worked toward."""
    budgets: Budgets
    """Each budget's use, limit and lines: enough to recompute a budget-type stop reason."""
    plan: Plan
    """The queue when the night ended: done, remaining, in flight, parked, pruned."""
    verified: list[VerifiedTask]
    """Each verified task, with its commit."""
    drift: list[DriftPoint]
    """Every drift check, in order."""
    spend: Spend
    """The money: total, by purpose, over time."""
    predicate: PredicateBlock | None
    """The goal predicate's last verdict; null when it never ran."""
    branch: Branch
    """The run's branch and what it holds."""
    partial_output: str
    """The closing summary: written by the model, or rendered from the run's state (``wrapup`` says
    which)."""
    wrapup: Wrapup
    """Who wrote the closing summary, and what it cost."""
    trace_ref: str
    """Path of the run's trace: one JSON line per model call, tool call and decision."""
    started_at: str
    """When the night started (ISO 8601, UTC)."""
    ended_at: str
    """When it ended (ISO 8601, UTC)."""
    resumes: int
    """How many times the run was resumed."""
    already_met: bool = False
    """The goal predicate passed on the base commit before any work: the night did nothing,
    made no model call and kept no branch (most often the predicate does not cover the
    change the goal asks for)."""
    alerts: list[dict[str, Any]] = Field(default_factory=list)
    """What was sent when the run ended (action, how, ok, detail). A failed alert is recorded
    here and changes nothing else."""
    trace_lines_dropped: int = 0
    """Trace lines that could not be written (a full disk); the trace is then incomplete."""
    sandbox: SandboxBlock | None = None
    """How this night's commands were confined; null only in results written before the
    sandbox existed."""
    effects: list[dict[str, Any]] = Field(default_factory=list)
    """Every external effect this run wrote down: tool, run-step key, task key, task, state
    (intended, confirmed, failed, unknown), arguments, the provider's answer, error."""
    gates: list[GateBlock] = Field(default_factory=list)
    """The repository's own checks (``[[gates]]``): per gate, its findings on the base commit
    and on what landed, and the new ones (none for anything landed)."""
    warnings: list[ResultWarning] = Field(default_factory=list)
    """Every call of the run (all its processes) booked otherwise than at the bill it
    reported within its reservation: at its worst case, above its reservation, or on figures
    that disagree. Empty when every bill was read and fitted its reservation."""
    executor: ExecutorBlock | None = None
    """The CLI agent that carried out agent tasks, with what each attempt cost as the harness
    booked it beside what the CLI said; null for the built-in agent and command tasks."""

    @property
    def run_dir(self) -> Path:
        """The run's directory (where result.json, the trace and the report live)."""
        return Path(self.trace_ref).parent


def result_json_schema() -> dict[str, Any]:
    schema = TerminalResult.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://overnight.invalid/result.schema.json"
    return schema


def shipped_schema() -> dict[str, Any]:
    text = resources.files("overnight.store").joinpath("result.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


if __name__ == "__main__":  # regenerate the shipped schema: python -m overnight.store.result
    print(json.dumps(result_json_schema(), indent=2, sort_keys=True))
