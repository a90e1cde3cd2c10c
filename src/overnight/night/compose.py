"""Composition: the one place that names the concrete classes behind the seams.

From a ``Spec`` it builds the model client, the gateway's ledger, the executor, the toolbox
and the effects store that a ``Night`` is given; everything else depends on the Protocols in
``overnight.seams`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overnight.agent.loop import AgentExecutor
from overnight.config.spec import ModelSpec, Spec
from overnight.config.targets import import_roots, resolve_target
from overnight.core.budget import Ledger, PriceTable
from overnight.core.candidate_rules import rules_for
from overnight.core.errors import ConfigError
from overnight.core.goal import Goal
from overnight.core.state import RunState
from overnight.effects.store import SqliteEffectStore
from overnight.models.gateway import ModelGateway
from overnight.models.providers import build_client
from overnight.night.attempts import Attempts, TaskExecutors
from overnight.night.checkouts import Checkouts
from overnight.night.commands import NightCommands
from overnight.night.effect_holds import EffectHolds
from overnight.night.ending import EndingSections, NightEnding
from overnight.night.gates import Gates
from overnight.night.judging import Judge
from overnight.night.outage import OutageBoard
from overnight.night.outputs import load_outputs
from overnight.night.planner import Planner, PlanRules
from overnight.night.signals import Signals, sleep_until_stopped
from overnight.night.timer import RunTimer
from overnight.night.verdict import VerdictRules, Verdicts
from overnight.night.worktree import Worktree
from overnight.proxy.access import NightProxy
from overnight.sandbox.policy import SandboxPolicy
from overnight.seams import (
    Clock,
    EffectStore,
    Fence,
    ModelClient,
    NoFence,
    SharedCap,
    TaskExecutor,
)
from overnight.store.answer_log import ANSWERS_FILE, AnswerRecorder, placeholders
from overnight.store.journal import Journal, read_journal
from overnight.store.rundir import RunDir
from overnight.store.spend import spend_totals
from overnight.store.trace import Trace
from overnight.telemetry.content import ContentTap
from overnight.telemetry.setup import content_tap
from overnight.tools.mcp import McpServer
from overnight.tools.toolbox import Toolbox


def open_effects(spec: Spec, run_dir: Path) -> EffectStore:
    """The run's effects ledger where the spec puts it (its own file by default)."""
    return SqliteEffectStore(spec.effects_path(run_dir))


def load_executor(target: str) -> TaskExecutor:
    """The user's executor named ``module:attr`` (an object, or a class to construct)."""
    obj = resolve_target(target, "executor.target")
    if isinstance(obj, type):
        try:
            obj = obj()
        except Exception as exc:
            raise ConfigError("executor.target", f"cannot construct {target}: {exc}") from exc
    if not isinstance(obj, TaskExecutor):
        raise ConfigError(
            "executor.target",
            f"{target!r} has no execute(task, context) method",
            "point it at an object (or class) implementing the executor seam",
        )
    return obj


@dataclass(frozen=True)
class FleetShared:
    """What a night may share with other nights (a fleet): the effects ledger, in place of
    the run's own SQLite file, a money cap held against before every model call, and the
    fence that says whether this process still owns the run."""

    effects: EffectStore | None = None
    cap: SharedCap | None = None
    fence: Fence | None = None


class FencedJournal(Journal):
    """The spend journal of a fenced run: no record once the fence is lost."""

    def __init__(self, path: Path, fence: Fence) -> None:
        super().__init__(path, durable=True)
        self._fence = fence

    def append(self, record: dict[str, Any]) -> None:
        self._fence.check("a spend record")
        super().append(record)


@dataclass
class NightParts:
    """What a ``Night`` is given: every concrete object behind its seams."""

    timer: RunTimer
    ledger: Ledger
    spend: Journal
    trace: Trace
    gateway: ModelGateway | None
    executors: TaskExecutors
    effects: EffectStore
    sandbox: SandboxPolicy
    worktree: Worktree
    content: ContentTap | None = None
    """Where the spans take prompts and tool results from (``[telemetry] content``)."""
    fence: Fence = field(default_factory=NoFence)
    """Asked before every write that matters (``FleetShared.fence``; none on one machine)."""
    proxy: NightProxy | None = None
    """The metering proxy a CLI agent reaches its model through; None for other executors."""
    hands: NightHands = field(init=False)
    """The collaborators built over these parts (``hands_for``)."""


@dataclass
class NightHands:
    """The collaborators a ``Night`` works through, built over its parts: the commands it
    runs, the checkouts its checks run in, the verdict, the judging and landing of a task,
    the holds for effects of unknown outcome, the attempts at tasks with their executors,
    the planner (None without a model), and the end."""

    commands: NightCommands
    attempts: Attempts
    checkouts: Checkouts
    verdicts: Verdicts
    judge: Judge
    holds: EffectHolds
    planner: Planner | None
    ending: NightEnding


def compose(
    spec: Spec,
    run_dir: RunDir,
    state: RunState,
    clock: Clock,
    signals: Signals,
    *,
    goal: Goal,
    expected_goal_sha: str,
    model: ModelClient | None = None,
    executor: TaskExecutor | None = None,
    sandbox: SandboxPolicy | None = None,
    prices: PriceTable | None = None,
    mcp_servers: Sequence[McpServer] = (),
    spend_readable: bool = True,
    shared: FleetShared | None = None,
) -> NightParts:
    """The parts of one night from its spec. ``model`` and ``executor``, when given, replace
    the spec's (tests and embedders hand in theirs). ``spend_readable`` False: the spend
    journal is not read (a resume that must refuse a corrupt run may not be able to).
    ``shared``: what a fleet shares between nights (its effects ledger, its money cap).
    ``goal`` is the run's, ``expected_goal_sha`` the hash its manifest recorded. ``sandbox``,
    ``prices`` and ``mcp_servers`` (started and listed) are what ``resolve`` built, when it
    did (``overnight.night.resolve``)."""
    shared = shared or FleetShared()
    fractions = spec.budget.fractions()
    timer = RunTimer(clock, state.seconds_used, spec.budget.hours, fractions)
    totals = spend_totals(read_journal(run_dir.spend) if spend_readable else [])
    ledger = Ledger(
        prices=prices or spec.price_table(),
        limit_usd=spec.budget.usd,
        enforce_fraction=fractions.enforce_at,
        limit_tokens=spec.budget.tokens,
        spent_usd=max(totals.usd + totals.dangling_usd, state.spent_usd),
        tokens_used=max(totals.tokens + totals.dangling_tokens, state.tokens_used),
    )
    fence = shared.fence or NoFence()
    spend = Journal(run_dir.spend, durable=True)
    if shared.fence is not None:
        spend = FencedJournal(run_dir.spend, shared.fence)
    trace = Trace(run_dir.trace, timer.seconds_used, clock.now_iso)
    policy = sandbox or SandboxPolicy(spec.sandbox.mode, None)
    with import_roots(spec.base_dir, spec.workspace_path()):
        if model is None and spec.model is not None:
            board = OutageBoard(run_dir.outage, trace, clock)
            model = _spec_model(spec.model, clock, signals, board, timer)
        tap = content_tap(spec.telemetry)
        if tap is not None and model is not None:
            model = tap.client(model)
        gateway = None
        if model is not None and spec.model is not None:
            gateway = ModelGateway(
                model, ledger, spend, trace, timer.seconds_used, fractions, shared.cap
            )
            names = placeholders(run_dir.path, spec.workspace_path(), state.run_id, state.branch)
            gateway.answers = AnswerRecorder(run_dir.path / ANSWERS_FILE, names)
        proxy: NightProxy | None = None
        chosen = spec.executor
        if executor is None and chosen is not None and chosen.target is not None:
            executor = load_executor(chosen.target)
        elif executor is None and chosen is not None and chosen.is_cli and gateway is not None:
            assert spec.model is not None
            model_name = chosen.model or spec.model.name
            proxy = NightProxy(
                gateway,
                model=model_name,
                task_usd=chosen.task_usd,
                hosts=spec.sandbox.hosts,
                network=spec.sandbox.network,
            )
            from overnight.executors import cli_executor  # node CLIs are an optional part

            executor = cli_executor(chosen, goal=spec.goal, base_dir=Path(spec.base_dir))
        if executor is None and gateway is not None:
            toolbox = Toolbox.from_spec(
                spec.tools,
                base_dir=Path(spec.base_dir),
                # an MCP server is a tool's command: in the sandbox unless the mode is off
                confine=lambda: policy.confinement(agent_worked=True, tool=True),
                mcp_servers=mcp_servers,
            )
            executor = AgentExecutor(spec.agent, toolbox if tap is None else tap.tools(toolbox))
    parts = NightParts(
        timer=timer,
        ledger=ledger,
        spend=spend,
        trace=trace,
        gateway=gateway,
        executors=TaskExecutors(agent=executor if gateway is not None else None),
        proxy=proxy,
        effects=shared.effects or open_effects(spec, run_dir.path),
        sandbox=policy,
        worktree=Worktree(
            run_dir.worktree,
            run_dir.checkout,
            spec.workspace_path(),
            state.branch,
            rules_for(
                spec.run.exclude, spec.run.include, spec.run.max_file_mb, load_outputs(run_dir)
            ),
        ),
        content=tap,
        fence=fence,
    )
    parts.hands = hands_for(spec, run_dir, state, goal, expected_goal_sha, signals, parts)
    return parts


def hands_for(
    spec: Spec,
    run_dir: RunDir,
    state: RunState,
    goal: Goal,
    expected_goal_sha: str,
    signals: Signals,
    parts: NightParts,
) -> NightHands:
    """The collaborators of one night over its ``parts``, each handed the parts of ``spec``
    it reads."""
    timer, trace = parts.timer, parts.trace
    predicate = spec.predicate
    commands = NightCommands(
        predicate.pytest_plugins, run_dir, state, parts.sandbox, signals, trace, timer.seconds_left
    )
    runs = (commands.run, commands.confinement, commands.log_name)
    checkouts = Checkouts(predicate, parts.worktree, trace, *runs)
    verdict_rules = VerdictRules(
        predicate, spec.tools.commands, [t.verify for t in spec.tasks], spec.gates
    )
    verdicts = Verdicts(
        verdict_rules, state, parts.worktree, checkouts.clean, trace, *runs, timer.seconds_left
    )
    gates = Gates(
        spec.gates,
        state,
        parts.worktree,
        checkouts.clean,
        *runs,
        trace,
        run_dir.gates,
        run_dir.artifacts,
    )
    judge = Judge(
        state,
        run_dir,
        parts.worktree,
        checkouts,
        verdicts,
        trace,
        parts.fence,
        commands.log_name,
        parts.effects,
        gates,
    )
    planner = None
    if parts.gateway is not None:
        if spec.model is None:
            raise ValueError("a planner needs the spec's [model]")
        run = spec.run
        plan_rules = PlanRules(spec.model, spec.tools.commands, run.retries, run.replan)
        planner = Planner(
            plan_rules, state, goal, expected_goal_sha, parts.gateway, trace, timer.seconds_used
        )
    sections = EndingSections(spec.model, spec.budget, predicate, spec.sandbox, spec.alerts)
    ending = NightEnding(
        sections,
        state,
        goal,
        run_dir,
        parts.ledger,
        trace,
        parts.effects,
        parts.sandbox,
        parts.worktree,
        timer.clock,
        parts.fence,
        started_at=timer.clock.now_iso(),
        gates=gates,
    )
    holds = judge.holds
    attempts = Attempts(
        parts.executors,
        state,
        run_dir,
        spec.model.name if spec.model else "",
        parts.gateway,
        parts.ledger,
        parts.effects,
        holds,
        verdicts,
        commands,
        parts.proxy,
        signals,
        timer,
        trace,
    )
    return NightHands(commands, attempts, checkouts, verdicts, judge, holds, planner, ending)


def _spec_model(
    model: ModelSpec, clock: Clock, signals: Signals, board: OutageBoard, timer: RunTimer
) -> ModelClient | None:
    """The spec's model client, its retry waits on the night's clock and cut by a stop, an
    outage shown on the board while it lasts."""
    if model.provider == "python" and model.target is None:
        return None
    return build_client(
        model,
        sleep=sleep_until_stopped(clock.sleep, signals),
        monotonic=clock.monotonic,
        watch=board,
        time_left=timer.seconds_left,
        call_guard=signals.interruptible,
    )
