"""``overnight check``'s look at the spec's gates (``[[gates]]``): each gate's program is
found, and each gate runs once on a fresh copy of the base commit, its findings counted the
way the night reads them, so that a gate that cannot run or whose output cannot be read is
known before the night rather than found in the morning."""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Callable
from pathlib import Path

from overnight.config.gates import GateSpec
from overnight.config.spec import Spec
from overnight.core.errors import ConfigError
from overnight.gates.discovery import install_hint, python_module_installed
from overnight.gates.readers import FindingsUnreadable, program_of, read_findings
from overnight.night import worktree as ws
from overnight.night.candidate_commit import export
from overnight.night.gates import read_log, rewritten_files, tree_hashes
from overnight.night.startcheck import set_up_export
from overnight.night.testrun import check_placement
from overnight.process import run_command
from overnight.sandbox.policy import SandboxPolicy


def gate_programs_missing(
    gates: list[GateSpec], installed: Callable[[str, str], bool] = python_module_installed
) -> list[str]:
    """One line per gate whose program cannot be run here, with how to install it."""
    missing: list[str] = []
    for gate in gates:
        words = shlex.split(gate.command)
        program, _args = program_of(gate.command)
        if words and "-m" in words[:3] and program:
            python = words[0]
            if not installed(python, program):
                missing.append(
                    f"{gate.name}: `{python}` cannot import {program} ({install_hint(program)})"
                )
    return missing


def gate_counts_on_base(spec: Spec, policy: SandboxPolicy) -> list[str]:
    """Each gate run as the night runs it on the base commit: in the sandbox, on a fresh
    export of the workspace's HEAD that the spec's set-up has run in. ``ruff: 3 finding(s)``,
    or what kept it from being read."""
    repo = spec.workspace_path()
    head = ws.head(repo)
    files = sorted(ws.tree_paths(ws.git_common_dir(repo), head)[0])
    said: list[str] = []
    for gate in spec.gates:
        with tempfile.TemporaryDirectory(prefix="overnight-gate-") as tmp:
            where = Path(tmp) / "checkout"
            where.mkdir()
            export(ws.git_common_dir(repo), head, where)
            try:
                set_up_export(spec.predicate, policy, where, head)
            except ConfigError as exc:
                said.append(f"{gate.name}: the set-up failed, so it could not run: {exc.problem}")
                continue
            said.append(_one(gate, where, files if gate.kind == "format" else [], policy))
    return said


def _one(gate: GateSpec, where: Path, files: list[str], policy: SandboxPolicy) -> str:
    before = tree_hashes(where, files)
    confine, env = check_placement(policy.confinement(agent_worked=False), [where])
    log = where.parent / "gate.log"
    result = run_command(
        gate.command,
        cwd=where,
        timeout_s=gate.timeout_s,
        log_path=log,
        env=env,
        confine=confine,
    )
    if result.timed_out or result.exit_code is None:
        return f"{gate.name}: timed out after {gate.timeout_s:g} s"
    if gate.kind == "format":
        if result.exit_code != 0:
            return f"{gate.name}: exited {result.exit_code}: {result.output.strip()[-300:]}"
        rewritten = rewritten_files(files, before, tree_hashes(where, files))
        shown = ", ".join(rewritten[:3])
        return f"{gate.name}: {len(rewritten)} file(s) not formatted" + (
            f" ({shown}{', ...' if len(rewritten) > 3 else ''})" if rewritten else ""
        )
    try:
        found = read_findings(gate.reads_with(), read_log(log), result.exit_code, str(where))
    except FindingsUnreadable as exc:
        return f"{gate.name}: its output could not be read, so it would judge nothing: {exc}"
    return f"{gate.name}: {len(found)} finding(s) on the base commit"
