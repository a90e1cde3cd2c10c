"""A spec resolved once: checked, and turned into what a night is built from.

``resolve`` is the one place that checks a spec before a night (``check_spec`` and
``overnight check`` are its error path): it picks the run's id and directory, builds the
sandbox policy once (with the run directory among the places it hides), prices the models
once, starts each ``[[tools.mcp]]`` server once and lists its tools, and asks the model once
whether it can be reached. ``overnight run``, ``overnight.run``, the demo and a fleet's worker
resolve once and hand the ``ResolvedNight`` on; the night uses its parts instead of building
them again (the MCP servers it started are the night's own, kept open).

``prepared`` builds the same parts without the checks, for a caller that has made them.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from overnight.config.spec import Spec
from overnight.core.budget import BudgetFractions, PriceTable
from overnight.night.preflight import (
    check_model_reach,
    check_settings,
    check_spec_basics,
    sealed_places,
)
from overnight.night.workload import ModelSource
from overnight.sandbox.policy import SandboxPolicy, check_paths, make_sandbox
from overnight.seams import ModelClient, TaskExecutor
from overnight.store.rundir import default_runs_root
from overnight.telemetry.setup import check_telemetry
from overnight.tools.mcp import McpServer, start_servers


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def sandbox_policy(spec: Spec, run_dir: Path) -> SandboxPolicy:
    """The run's sandbox policy; a ConfigError (nothing written yet) when the night needs the
    sandbox and it does not work here, or when a ``[sandbox]`` path would expose the run."""
    sealed = sealed_places(spec, run_dir)
    check_paths(spec.sandbox, Path(spec.base_dir), sealed)
    sandbox = make_sandbox(spec.sandbox, Path(spec.base_dir), sealed, required=spec.needs_sandbox())
    return SandboxPolicy(spec.sandbox.mode, sandbox)


@dataclass
class ResolvedNight:
    """A spec and everything a night of it is built from, resolved once."""

    spec: Spec
    run_id: str
    run_dir: Path
    """Where the run's directory will be (absolute; not created yet)."""
    policy: SandboxPolicy
    """The one sandbox policy of the night (its sandbox, its uid)."""
    prices: PriceTable
    fractions: BudgetFractions
    model: ModelClient | None = None
    """The caller's model, replacing the spec's."""
    executor: TaskExecutor | None = None
    """The caller's executor, replacing the spec's."""
    mcp_servers: list[McpServer] = field(default_factory=list)
    """Every ``[[tools.mcp]]`` server, started and listed: the night's toolbox uses these."""
    notes: list[str] = field(default_factory=list)
    """What the checks found worth saying (the model's reach), for the night's trace."""
    model_source: ModelSource = "spec"
    """Who answers the night's calls: the spec's model, the caller's (``model`` given), or a
    recording (``overnight replay``); only the spec's real models' nights teach the
    estimate."""

    def __post_init__(self) -> None:
        if self.model is not None and self.model_source == "spec":
            self.model_source = "caller"

    def close(self) -> None:
        """The night is over, or will not start: its MCP servers stop, its sandbox's uid goes
        back to the machine (idempotent)."""
        servers, self.mcp_servers = self.mcp_servers, []
        for server in servers:
            server.connection.close()
        self.policy.close()


def prepared(
    spec: Spec,
    run_dir: Path | None = None,
    *,
    model: ModelClient | None = None,
    executor: TaskExecutor | None = None,
) -> ResolvedNight:
    """The parts of a night of ``spec``, without the checks ``resolve`` makes (the caller
    made them): the run's id and directory, the sandbox policy (refused, a ConfigError, when
    the night needs the sandbox and it does not work here), the price table, the budget's
    lines. MCP servers start when the night first lists its tools."""
    run_id = new_run_id()
    target = Path(run_dir or default_runs_root() / run_id).absolute()
    policy = sandbox_policy(spec, target)
    return ResolvedNight(
        spec,
        run_id,
        target,
        policy,
        spec.price_table(),
        spec.budget.fractions(),
        model=model,
        executor=executor,
    )


def resolve(
    spec: Spec,
    run_dir: Path | None = None,
    *,
    model: ModelClient | None = None,
    executor: TaskExecutor | None = None,
    programs: bool = True,
    reach: bool = True,
) -> ResolvedNight:
    """Check ``spec`` once and resolve it: a ``ConfigError`` naming the field and the fix,
    before anything is written, or the night's parts. A ``model`` or ``executor`` handed in
    replaces the spec's, whose targets and credentials are then not checked. ``programs``:
    also check the programs the night's commands need; ``reach``: ask the model once whether
    it can be reached (``check_model_reach``)."""
    check_spec_basics(spec, model_given=model is not None)
    run_id = new_run_id()
    target = Path(run_dir or default_runs_root() / run_id).absolute()
    policy = sandbox_policy(spec, target)
    try:
        prices = check_settings(spec, model=model, executor=executor, programs=programs)
    except BaseException:
        policy.close()
        raise
    fractions = spec.budget.fractions()
    night = ResolvedNight(spec, run_id, target, policy, prices, fractions, model, executor)
    try:
        if spec.tools.mcp:
            # An MCP server is a tool's command: in the sandbox unless the mode is off, the
            # night's own sandbox, which counts it once the night counts its commands.
            night.mcp_servers = start_servers(
                spec.tools,
                base_dir=Path(spec.base_dir),
                confine=lambda: policy.confinement(agent_worked=True, tool=True),
            )
        if reach:
            night.notes = check_model_reach(spec, model=model)
    except BaseException:
        night.close()
        raise
    return night


def check_spec(
    spec: Spec,
    *,
    model: ModelClient | None = None,
    executor: TaskExecutor | None = None,
    programs: bool = True,
) -> None:
    """``resolve``'s error path: everything that can be known before a run starts, and fails
    it if wrong (a ``ConfigError`` naming the field and the fix); what it built is released
    again. The model is not asked whether it can be reached."""
    resolve(spec, model=model, executor=executor, programs=programs, reach=False).close()


def check_spec_telemetry(spec: Spec) -> None:
    """``check_telemetry`` of the spec's ``[telemetry]`` section, whether it was written in
    the spec or not (a ``ConfigError``, nothing written yet)."""
    check_telemetry(spec.telemetry, written="telemetry" in spec.model_fields_set)
