"""``overnight check night.toml``: every check a night makes before its first model call, run
on their own. Nothing is spent and nothing is written: no run directory, no run index entry,
no branch, no worktree.

The checks are the ones ``overnight run`` makes (the spec, the settings ``check_spec`` checks,
the model's reachability, the sandbox, the goal predicate on a clean checkout of the base
commit), the programs the spec names found on PATH, and ``overnight estimate``'s cost against
the budget. Exit 0 when all pass, 64 when the spec must change, 3 when the machine lacks what
the spec names or the model cannot be asked.

For a pytest predicate that runs, the check also reads the base commit's pytest
configuration as ``overnight init`` does and proposes, on the predicate's line, the
``[predicate] pytest_plugins`` line for installed plugins whose options or ini keys it names
and the spec does not list (a base that cannot run is refused with that line already).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from overnight.cli.estimate import spec_estimate
from overnight.cli.gate_check import gate_counts_on_base, gate_programs_missing
from overnight.cli.uncommitted import harness_reads
from overnight.config.model_script import Script
from overnight.config.spec import ExecutorSpec, Spec, load_spec
from overnight.core.errors import ConfigError, SpecProblems
from overnight.core.resume import runs_pytest
from overnight.core.text import printable
from overnight.messages.types import ModelRequest, ModelResponse
from overnight.night import worktree as ws
from overnight.night.plugins import advise, installed_plugins, names_options, project_python
from overnight.night.preflight import (
    check_model_reach,
    check_programs,
    command_path,
    program_of,
    tool_programs,
)
from overnight.night.resolve import check_spec, check_spec_telemetry, new_run_id, sandbox_policy
from overnight.night.startcheck import StartCheck, check_predicate
from overnight.sandbox.policy import SandboxPolicy
from overnight.store.rundir import default_runs_root

EXIT_SPEC = 64
EXIT_MACHINE = 3

Status = Literal["ok", "warning", "failed", "skipped"]


@dataclass(frozen=True)
class Outcome:
    """One check: ``ok`` with what it found, ``failed`` with the problem and the fix, or
    ``skipped`` with why."""

    name: str
    status: Status
    said: str
    fix: str = ""
    spec_problem: bool = False
    """The spec must change (exit 64); otherwise the machine lacks something (exit 3)."""


def _failed(name: str, exc: ConfigError) -> Outcome:
    if isinstance(exc, SpecProblems):  # every problem, one per line, each with its fix
        lines = [
            f"{p.field}: {p.problem}" + (f" (fix: {p.fix})" if p.fix else "") for p in exc.problems
        ]
        said = "\n".join([f"{len(lines)} problems in the spec:", *lines])
        return Outcome(name, "failed", said, spec_problem=True)
    return Outcome(name, "failed", f"{exc.field}: {exc.problem}", exc.fix, spec_problem=True)


class _NoModel:
    """Stands in for the spec's model while the other settings are checked."""

    def complete(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("overnight check makes no model call")


def check_night(path: Path) -> list[Outcome]:
    """Every check, in the order a night makes them; the later ones are skipped when what
    they stand on failed."""
    try:
        spec = load_spec(path)
    except ConfigError as exc:
        return [_failed("spec", exc)]
    out = [Outcome("spec", "ok", f"{path}: {_spec_line(spec)}")]
    workspace = _workspace(spec, path)
    out.append(workspace)
    settings, model = _settings_and_model(spec, workspace.status == "ok")
    out += [settings, model]
    policy: SandboxPolicy | None = None
    if settings.status == "ok":
        try:
            policy = sandbox_policy(spec, default_runs_root() / new_run_id())
            out.append(Outcome("sandbox", "ok", _sandbox_line(spec, policy)))
        except ConfigError as exc:
            out.append(_failed("sandbox", exc))
    else:
        out.append(Outcome("sandbox", "skipped", "the settings above must pass first"))
    out.append(_programs(spec))
    if policy is not None:
        out.append(_predicate(spec, policy))
    else:
        out.append(Outcome("predicate", "skipped", "the settings and sandbox must pass first"))
    if spec.gates:
        out.append(_gates(spec, policy))
    out.append(_estimate(spec))
    return out


def _gates(spec: Spec, policy: SandboxPolicy | None) -> Outcome:
    """The gates' programs, then each gate's findings on the base commit, sandboxed."""
    if policy is None:
        return Outcome("gates", "skipped", "the settings and sandbox must pass first")
    missing = gate_programs_missing(spec.gates)
    if missing:
        return Outcome(
            "gates",
            "failed",
            "; ".join(missing),
            "install what each gate runs where the night runs, or remove the gate",
        )
    counts = gate_counts_on_base(spec, policy)
    unread = [c for c in counts if "could not be read" in c or "timed out" in c or "exited" in c]
    if unread:
        return Outcome(
            "gates", "warning", "; ".join(counts), "fix the gate's command so that it runs"
        )
    return Outcome("gates", "ok", "; ".join(counts))


def _spec_line(spec: Spec) -> str:
    money = f"${spec.budget.usd:,.2f}, " if spec.model is not None else ""
    tasks = f"{len(spec.tasks)} task(s)" if spec.tasks else "tasks planned by the model"
    return f"{money}{spec.budget.hours:g} h, {tasks}"


def _workspace(spec: Spec, path: Path) -> Outcome:
    try:
        repo = ws.check_repository(spec.workspace_path())
        found = f"{repo} at {ws.head(repo)[:12]}"
        changed = ws.uncommitted(repo)
    except ConfigError as exc:
        return _failed("workspace", exc)
    reads = harness_reads(spec, path)  # read from the checkout as it is, not from HEAD
    changed = [c for c in changed if (repo / c).resolve() not in reads]
    if changed:
        found += (
            f"; {len(changed)} uncommitted change(s) the night will not see "
            f"({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''}): commit them first"
        )
    return Outcome("workspace", "ok", found)


def _settings_and_model(spec: Spec, workspace_ok: bool) -> tuple[Outcome, Outcome]:
    """``check_spec`` as ``overnight run`` calls it; when it fails on the model, once more
    without the model, so that the rest of the settings are judged apart from it."""
    if not workspace_ok:
        return (
            Outcome("settings", "skipped", "the workspace must pass first"),
            Outcome("model", "skipped", "the workspace must pass first"),
        )
    try:
        check_spec(spec, programs=False)  # on the programs line
        check_spec_telemetry(spec)
    except ConfigError as exc:
        if isinstance(exc, SpecProblems) or not exc.field.startswith("model"):
            return _failed("settings", exc), Outcome("model", "skipped", "settings failed")
        try:
            check_spec(spec, model=_NoModel(), programs=False)
            check_spec_telemetry(spec)
        except ConfigError as again:
            return _failed("settings", again), Outcome("model", "skipped", "settings failed")
        return Outcome("settings", "ok", _settings_line(spec)), _failed("model", exc)
    return Outcome("settings", "ok", _settings_line(spec)), _model(spec)


def _settings_line(spec: Spec) -> str:
    commands = f"commands {', '.join(spec.tools.commands) or 'none'}"
    cli = spec.executor
    if cli is not None and cli.is_cli:
        return f"{_cli_line(cli, Path(spec.base_dir))}; {commands}"
    tools = ", ".join(spec.tools.allow) or "none"
    return f"tools {tools}; {commands}"


def _cli_line(cli: ExecutorSpec, base_dir: Path) -> str:
    """Which CLI agent carries out the agent tasks: found where, at which version, with
    which tools (its own: the built-in agent's [tools] are not handed to it)."""
    from overnight.executors import check_cli  # node CLIs are an optional part

    found = check_cli(cli, base_dir)
    version = f" {found.version}" if found.version else ""
    if cli.kind == "claude-code":
        from overnight.executors.claude import DEFAULT_TOOLS

        tools = ", ".join(cli.tools if cli.tools is not None else DEFAULT_TOOLS)
    else:
        tools = "its own (the CLI's built-in tools)"
    return (
        f"executor {cli.kind}{version} at {found.path}; its tools: {tools} "
        "(the built-in agent's [tools] are not used)"
    )


def _model(spec: Spec) -> Outcome:
    """The model's settings passed; now whether it can be reached, as a night asks it."""
    model = spec.model
    if model is None:
        return Outcome("model", "ok", "none: this night makes no model call")
    try:
        notes = check_model_reach(spec)
    except ConfigError as exc:
        return _failed("model", exc)
    except Exception as exc:  # a provider failing in a way the check does not classify
        return Outcome("model", "failed", f"the model could not be asked: {exc}", "try again")
    found = f"{model.provider} {model.name}"
    if model.provider == "script":
        script = model.scripted_turns()
        counts = ", ".join(
            f"{len(script.turns(p))} {p}" for p in Script.model_fields if script.turns(p)
        )
        found += f", answers from {model.script} ({counts or 'no turn'})"
    elif model.provider == "python":
        found += f", answers from {model.target}"
    else:
        found += f": {'; '.join(notes)}" if notes else ", reached"
    return Outcome("model", "ok", found)


def _sandbox_line(spec: Spec, policy: SandboxPolicy) -> str:
    if policy.sandbox is None:
        return f"mode {spec.sandbox.mode}: commands run unconfined"
    return f"mode {spec.sandbox.mode}: bubblewrap works; checked commands run in it"


def _named_programs(spec: Spec) -> Iterator[tuple[str, str]]:
    """Each program the spec names, with where it names it."""
    for program, field, _need, _fix in tool_programs(spec):
        yield program, field
    for prefix in spec.tools.commands:
        if (p := program_of(prefix)) is not None:
            yield p, "[tools] commands"
    if (p := program_of(spec.predicate.command)) is not None:
        yield p, "[predicate] command"
    for task in spec.tasks:
        for field, command in (("command", task.command), ("verify", task.verify)):
            if command is not None and (p := program_of(command)) is not None:
                yield p, f"task {task.id} {field}"
    for server in spec.tools.mcp:
        if server.command and "/" not in server.command[0]:
            yield server.command[0], f"[[tools.mcp]] {server.name}"
    if spec.needs_sandbox():
        yield "bwrap", f"[sandbox] mode {spec.sandbox.mode}"


def _programs(spec: Spec) -> Outcome:
    """What ``overnight run`` refuses (the programs the night's tools need: exit 64, as the
    run would), then every program the spec names (missing: exit 3)."""
    try:
        check_programs(spec)
    except ConfigError as exc:
        return _failed("programs", exc)
    found: dict[str, str] = {}
    missing: dict[str, list[str]] = {}
    for program, where in _named_programs(spec):
        if program in found:
            continue
        path = shutil.which(program, path=command_path(spec))
        if path is None:
            missing.setdefault(program, []).append(where)
        else:
            found[program] = path
    if missing:
        named = "; ".join(f"{p} ({', '.join(dict.fromkeys(w))})" for p, w in missing.items())
        return Outcome(
            "programs",
            "failed",
            f"not on PATH: {named}",
            "install them (or put their directory on PATH), or change what the spec names",
        )
    return Outcome("programs", "ok", ", ".join(found) + " on PATH" if found else "none named")


def _predicate(spec: Spec, policy: SandboxPolicy) -> Outcome:
    try:
        start: StartCheck = check_predicate(
            spec.predicate, spec.workspace_path(), policy, hours=spec.budget.hours
        )
    except ConfigError as exc:
        return _failed("predicate", exc)
    said = f"`{spec.predicate.command}` runs on a clean checkout of {start.commit[:12]}"
    record = start.predicate
    if record is not None:
        verdict = record.verdict or (
            "met (exit 0)" if record.met else f"not met yet (exit {record.exit_code})"
        )
        said += f": {verdict}"
    notes = [*start.notes]
    if not any("pytest_plugins = [" in note for note in notes):
        notes += _plugins_proposal(spec, start)
    said += "".join(f"; note: {note}" for note in notes)
    if record is not None and record.met:
        said += (
            "; the goal is already met on the base commit: `overnight run` would end at once, "
            "doing nothing"
        )
        fix = (
            f"make `{spec.predicate.command}` fail without the change the goal asks for "
            "(a test that does not cover the bug passes already)"
        )
        return Outcome("predicate", "warning", said, fix)
    return Outcome("predicate", "ok", said)


def _plugins_proposal(spec: Spec, start: StartCheck) -> list[str]:
    """The plugins the base commit's pytest configuration (and the predicate's options) need
    and the spec does not list, found in the predicate's Python: a base can run without them
    (an unknown ini key is a warning) and its tests still not be the tests the suite means."""
    command = spec.predicate.command
    config = start.config
    if not runs_pytest(command) or not names_options(config, command):
        return []
    installed = installed_plugins(project_python(command), user_site=spec.sandbox.mode != "on")
    advice = advise(installed, config, command, loaded=spec.predicate.pytest_plugins)
    if not advice:
        return []
    found = f" ({config.file})" if config.file else ""
    return [f"in the pytest configuration{found}: {advice.said()}; fix: {advice.fix()}"]


def _estimate(spec: Spec) -> Outcome:
    try:
        found = spec_estimate(spec)
    except ConfigError as exc:
        if exc.field == "--tasks":
            return Outcome(
                "estimate",
                "skipped",
                exc.problem,
                "set [estimate] tasks = N (how many tasks you expect), or run "
                "`overnight estimate night.toml --tasks N`",
            )
        return _failed("estimate", exc)
    if found.learned is not None:
        learned = found.learned
        cap = spec.budget.usd
        said = (
            f"from {len(learned.runs)} recorded night(s): median ${learned.median_usd:,.2f}, "
            f"p90 ${learned.p90_usd:,.2f}; recommended cap ${learned.recommended_cap_usd:,.2f}"
        )
        if cap < learned.recommended_cap_usd:
            return Outcome(
                "estimate",
                "failed",
                f"the ${cap:,.2f} cap is under the recommended cap ({said})",
                f"set budget.usd to at least {learned.recommended_cap_usd:,.2f}",
                spec_problem=True,
            )
        return Outcome("estimate", "ok", said)
    assert found.derived is not None
    check = found.derived.budget
    if check is None:
        return Outcome("estimate", "ok", f"derived ${found.derived.total_usd:,.2f}")
    if not check.covers:
        return Outcome(
            "estimate",
            "failed",
            check.verdict,
            f"set budget.usd to at least {check.least_cap_usd:,.2f}",
            spec_problem=True,
        )
    return Outcome("estimate", "ok", check.verdict)


def exit_code(outcomes: list[Outcome]) -> int:
    failed = [o for o in outcomes if o.status == "failed"]
    if any(o.spec_problem for o in failed):
        return EXIT_SPEC
    return EXIT_MACHINE if failed else 0


def render(outcomes: list[Outcome]) -> str:
    """One line per check (a problem's further lines, such as a command's output, indented
    under it)."""
    lines = []
    for o in outcomes:
        first, *rest = o.said.splitlines() or [""]
        fix = f" (fix: {o.fix})" if o.fix and o.status != "ok" else ""
        lines.append(f"{o.name:<10} {o.status:<8} {first}{fix}")
        lines += [f"{'':<20}{line}" for line in rest]
    return printable("\n".join(lines))
