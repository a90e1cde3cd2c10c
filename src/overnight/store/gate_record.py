"""What the night's gates found (``[[gates]]``), kept in the run directory as ``gates.json``:
each gate's findings on the base commit, recorded once per night, and on each landed commit.
A resume reads the base's findings back instead of running the gates on the base again; the
result and the audit read the counts (the audit recomputes them from the raw outputs named
here)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from overnight.gates.readers import Finding
from overnight.store.rundir import read_json, write_json_atomic


class FoundRow(BaseModel):
    """One finding, as kept."""

    model_config = ConfigDict(extra="forbid")

    file: str
    rule: str
    message: str
    line: int | None = None

    @classmethod
    def of(cls, finding: Finding) -> FoundRow:
        return cls(file=finding.file, rule=finding.rule, message=finding.message, line=finding.line)

    def finding(self) -> Finding:
        return Finding(self.file, self.rule, self.message, self.line)


class GateRun(BaseModel):
    """One gate's run on one commit: its findings, and the raw output they were read from."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["gate_run"] = "gate_run"
    gate: str
    commit: str
    findings: list[FoundRow] = Field(default_factory=list)
    raw: str | None = None
    """The artifact the findings were read from: the command's output for a findings gate,
    the list of files the formatter rewrote for a format gate."""
    exit_code: int | None = None
    """How the command exited (None: it did not finish, did not run, or the run was recorded
    before exit codes were): the audit reads ``raw`` again with it."""
    unreadable: str = ""
    """Why no findings could be read (the tool crashed, timed out, or printed what its reader
    does not know): a gate unreadable on the base commit judges nothing that night."""

    def found(self) -> list[Finding]:
        return [row.finding() for row in self.findings]


class GatesRecord(BaseModel):
    """Every gate's run on the base commit, and on each commit that landed."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["gates"] = "gates"
    base_commit: str
    base: dict[str, GateRun] = Field(default_factory=dict)
    landed: dict[str, dict[str, GateRun]] = Field(default_factory=dict)
    """Per landed commit, each gate's run on it (the run that judged it)."""


def read_gates(path: Path) -> GatesRecord | None:
    """The record at ``path``; None when there is none (a spec without gates, or a night that
    ended before any gate ran)."""
    if not path.exists():
        return None
    return GatesRecord.model_validate(read_json(path))


def write_gates(path: Path, record: GatesRecord) -> None:
    write_json_atomic(path, record.model_dump(mode="json"))
