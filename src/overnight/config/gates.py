"""``[[gates]]``: the repository's own checks (its linter, formatter, type checker) that a
task's change must pass as well as its verify, judged against the base commit: a candidate
may not add a finding the base commit did not have (``overnight.night.gates``).

``overnight init`` writes the gates it finds configured (``overnight.gates.discovery``);
each is the user's to edit or remove. A spec with no gates is judged by its verifies alone.
"""

from __future__ import annotations

import re
import shlex
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from overnight.core.errors import ConfigError
from overnight.gates.discovery import gate_config_files
from overnight.gates.readers import READERS, program_of, reader_for

#: Words that make a formatter only report instead of rewriting: a format gate's command
#: rewrites files, and the files it changes are the findings.
_CHECK_ONLY = ("--check", "--diff", "--check-only", "-c")


class GateSpec(BaseModel):
    """One of the repository's own checks, run at the top of a clean checkout."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=60, pattern=r"^[A-Za-z0-9_.-]+$")
    """What the report and the park reasons call it (``ruff``, ``mypy``, ``ruff-format``)."""
    command: str = Field(min_length=1)
    """The command, run by the harness in the sandbox at the top of a clean checkout of
    exactly what would land (and once of the base commit): ``python -m ruff check
    --output-format=json .``. For a ``format`` gate, a command that rewrites files in place
    (``python -m ruff format .``, ``python -m black -q .``)."""
    kind: Literal["findings", "format"] = "findings"
    """``findings``: the command's output lists findings (read by ``reader``); a candidate may
    not add one. ``format``: the command rewrites files; a file the candidate changed that it
    rewrites is a finding, unless the base commit's version of it was not formatted either."""
    reader: str | None = None
    """How a findings gate's output is read: ``ruff-json``, ``flake8``, ``mypy``,
    ``pyright-json``, ``pylint-json``, ``eslint-json``, or ``exit-code`` (any command: exit 0
    is no finding, any other exit one finding). Unset: chosen from the command's words."""
    timeout_s: float = Field(default=600.0, gt=0)
    """Seconds before the command is killed (a gate that times out judges the candidate not
    done)."""
    config: list[str] = Field(default_factory=list)
    """Files of the repository that configure the gate (``setup.cfg``, ``.flake8``): they join
    the protected paths, so that no candidate can silence a rule. The files the tool is
    known to read are protected whether listed or not."""

    @field_validator("reader")
    @classmethod
    def _known_reader(cls, value: str | None) -> str | None:
        if value is not None and value not in READERS:
            # a ValueError, so that pydantic lists it with the spec's other problems
            raise ValueError(f"{value!r} is not a reader; use one of {', '.join(READERS)}")
        return value

    @field_validator("command")
    @classmethod
    def _words(cls, value: str) -> str:
        try:
            shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a command line ({exc}): close the quotes") from None
        return value

    def reads_with(self) -> str:
        """The reader of a findings gate's output (``exit-code`` for a format gate)."""
        if self.kind == "format":
            return "exit-code"
        return self.reader or reader_for(self.command)

    def config_files(self) -> list[str]:
        """The files that configure the gate: those listed, and those its tool reads."""
        program, _args = program_of(self.command)
        known = (*gate_config_files(self.name), *gate_config_files(program))
        return list(dict.fromkeys([*self.config, *known]))

    def check_only(self) -> bool:
        """A format gate whose command only reports (``--check``): it would find nothing."""
        words = shlex.split(self.command)
        return self.kind == "format" and any(w in _CHECK_ONLY for w in words)


def check_gates(gates: list[GateSpec]) -> None:
    """What no single gate can say of itself: names are distinct; a format gate rewrites."""
    seen: set[str] = set()
    for n, gate in enumerate(gates):
        if gate.name in seen:
            raise ConfigError(
                f"gates[{n}].name", f"two gates are named {gate.name!r}", "name each gate once"
            )
        seen.add(gate.name)
        if gate.check_only():
            raise ConfigError(
                f"gates[{n}].command",
                f"the format gate {gate.name!r} only checks (`{gate.command}`): a format gate's "
                "command rewrites the files, and the files it changes are what it finds",
                "drop --check/--diff (e.g. `python -m ruff format .`, `python -m black -q .`)",
            )


def gate_slug(name: str) -> str:
    """The gate's name as it appears in artifact file names."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)
