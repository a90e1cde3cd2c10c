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
from overnight.gates.discovery import install_hint, python_module_installed
from overnight.gates.readers import FindingsUnreadable, program_of, read_findings
from overnight.night import worktree as ws
from overnight.night.candidate_commit import export
from overnight.night.gates import format_finding
from overnight.process import run_command


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


def gate_counts_on_base(spec: Spec) -> list[str]:
    """Each gate run on a fresh copy of the workspace's HEAD: ``ruff: 3 finding(s)``, or what
    kept it from being read."""
    repo = spec.workspace_path()
    head = ws.head(repo)
    said: list[str] = []
    for gate in spec.gates:
        with tempfile.TemporaryDirectory(prefix="overnight-gate-") as tmp:
            where = Path(tmp) / "checkout"
            where.mkdir()
            export(ws.git_common_dir(repo), head, where)
            said.append(_one(gate, where, Path(tmp) / "gate.log"))
    return said


def _one(gate: GateSpec, where: Path, log: Path) -> str:
    files = sorted(str(p.relative_to(where)) for p in where.rglob("*") if p.is_file())
    before = {f: (where / f).read_bytes() for f in files} if gate.kind == "format" else {}
    result = run_command(gate.command, cwd=where, timeout_s=gate.timeout_s, log_path=log)
    if result.timed_out or result.exit_code is None:
        return f"{gate.name}: timed out after {gate.timeout_s:g} s"
    if gate.kind == "format":
        if result.exit_code != 0:
            return f"{gate.name}: exited {result.exit_code}: {result.output.strip()[-300:]}"
        rewritten = [
            f for f in files if not (where / f).is_file() or (where / f).read_bytes() != before[f]
        ]
        shown = ", ".join(format_finding(gate.name, f).file for f in rewritten[:3])
        return f"{gate.name}: {len(rewritten)} file(s) not formatted" + (
            f" ({shown}{', ...' if len(rewritten) > 3 else ''})" if rewritten else ""
        )
    output = result.output
    if result.log_path is not None and result.log_path.is_file():
        output = result.log_path.read_text(errors="replace")
    try:
        found = read_findings(gate.reads_with(), output, result.exit_code, str(where))
    except FindingsUnreadable as exc:
        return f"{gate.name}: its output could not be read, so it would judge nothing: {exc}"
    return f"{gate.name}: {len(found)} finding(s) on the base commit"
