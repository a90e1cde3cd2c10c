"""The ``script`` model's file (``[model] script = "turns.toml"``, or ``.json``): the model's
answers as data, in order per purpose.

Each purpose (``plan``, ``execute``, ``replan``, ``drift``, ``compact``, ``summarize``) holds a
list of turns; a turn is one answer: text, tool calls, or both, and optionally the usage it is
billed for. The file is read and checked when the spec is loaded: a bad one is a
``ConfigError`` naming the file, the turn and the field (``overnight run`` exits 64).
"""

from __future__ import annotations

import json
import tomllib
from difflib import get_close_matches
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from overnight.core.drift import DriftVerdict
from overnight.core.errors import ConfigError
from overnight.messages.answers import DRIFT_TOOL, PLAN_TOOL, REPLAN_TOOL, PlanAnswer, ReplanAnswer

ScriptPurpose = Literal["plan", "execute", "replan", "drift", "compact", "summarize"]

#: The tool each structured purpose hands its answer in with, and the answer's schema.
ANSWER_TOOLS: dict[str, tuple[str, type[BaseModel]]] = {
    "plan": (PLAN_TOOL.name, PlanAnswer),
    "replan": (REPLAN_TOOL.name, ReplanAnswer),
    "drift": (DRIFT_TOOL.name, DriftVerdict),
}

FIX = "see the turns.toml reference (docs/reference/turns-toml.md) for the format"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)


class ToolCall(_Strict):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    """The tool called: ``read_file``, ``edit_file``, ``run_command``... in an execute turn;
    ``submit_plan``, ``submit_replan`` or ``submit_drift_verdict`` in a plan, replan or drift
    turn."""
    input: dict[str, Any] = Field(default_factory=dict)
    """The call's arguments, as the tool's input schema names them."""


class TurnUsage(_Strict):
    input: int | None = Field(default=None, ge=0)
    """Uncached input tokens billed. Default: the request's size in bytes / 4."""
    output: int | None = Field(default=None, ge=0)
    """Output tokens billed. Default: the answer's size in bytes / 4, at most the request's
    ``max_tokens``."""
    cache_read: int = Field(default=0, ge=0)
    """Input tokens read from the prompt cache."""
    cache_write_5m: int = Field(default=0, ge=0)
    """Input tokens written to a 5-minute cache entry."""
    cache_write_1h: int = Field(default=0, ge=0)
    """Input tokens written to a 1-hour cache entry."""


class Turn(_Strict):
    text: str | None = None
    """Text of the answer. An execute turn with text and no tool call ends the task's
    conversation (the agent stops and the harness verifies the task)."""
    tool: str | None = Field(default=None, min_length=1)
    """One tool call, with ``input``: shorthand for ``calls = [{ name = ..., input = ... }]``."""
    input: dict[str, Any] | None = None
    """The arguments of ``tool``."""
    calls: list[ToolCall] = Field(default_factory=list)
    """Tool calls made in this turn, in order (instead of ``tool`` and ``input``)."""
    usage: TurnUsage = Field(default_factory=TurnUsage)
    """What the turn is billed for; the counts left out are derived from the request and the
    answer, so that the gateway meters the turn as a real call."""

    @model_validator(mode="after")
    def _one_answer(self) -> Turn:
        if self.tool is not None and self.calls:
            raise ValueError("give `tool` (with `input`) or `calls`, not both")
        if self.input is not None and self.tool is None:
            raise ValueError("`input` belongs to `tool`: name the tool called")
        if self.text is None and self.tool is None and not self.calls:
            raise ValueError("a turn answers with `text`, a `tool` call, or `calls`")
        return self

    def tool_calls(self) -> list[ToolCall]:
        if self.tool is not None:
            return [ToolCall(name=self.tool, input=self.input or {})]
        return list(self.calls)


class Script(_Strict):
    """A scripted model's answers: each purpose's turns, taken in order."""

    plan: list[Turn] = Field(default_factory=list)
    """Answers to the planning call (the night's tasks, with ``submit_plan``). When they run
    out, the last one is given again."""
    execute: list[Turn] = Field(default_factory=list)
    """The agent's turns, across every task in the order the tasks run: each task's turns end
    with a turn of text only. When they run out, the answer is the text ``done``."""
    replan: list[Turn] = Field(default_factory=list)
    """Answers to replanning calls (``submit_replan``). When they run out (or there are
    none): nothing to add."""
    drift: list[Turn] = Field(default_factory=list)
    """Drift verdicts (``submit_drift_verdict``). When they run out, the last one is given
    again; with none: every task serves the goal (score 0.0)."""
    compact: list[Turn] = Field(default_factory=list)
    """Summaries of a long conversation. When they run out: the text ``done``."""
    summarize: list[Turn] = Field(default_factory=list)
    """The closing summary. When it runs out: the text ``done``."""

    def turns(self, purpose: str) -> list[Turn]:
        turns: list[Turn] = getattr(self, purpose, [])
        return turns


def _field_path(parts: tuple[int | str, ...]) -> str:
    """``calls[0].name`` for the parts ``calls, 0, name``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _where(loc: tuple[int | str, ...]) -> str:
    """``[[execute]] turn 3, `calls[0].name``` for the location ``execute.2.calls.0.name``."""
    head, rest = loc[0], loc[1:]
    if not rest or not isinstance(rest[0], int):
        return f"`{_field_path(loc)}`"
    turn = f"[[{head}]] turn {rest[0] + 1}"
    return f"{turn}, `{_field_path(rest[1:])}`" if rest[1:] else turn


def _problem(err: Any) -> str:
    loc = tuple(err["loc"])
    if err["type"] == "extra_forbidden" and len(loc) == 1:
        near = get_close_matches(str(loc[0]), list(Script.model_fields), n=1, cutoff=0.6)
        hint = f" (did you mean `{near[0]}`?)" if near else ""
        return f"`{loc[0]}` is not a purpose{hint}; purposes: {', '.join(Script.model_fields)}"
    if err["type"] == "extra_forbidden":
        return f"{_where(loc)}: unknown field"
    message = str(err["msg"]).removeprefix("Value error, ")
    return f"{_where(loc)}: {message}" if loc else message


def _answers_checked(script: Script) -> list[str]:
    """Problems of the structured turns: a plan, replan or drift turn hands its answer in with
    its purpose's tool, and the answer passes the schema the harness reads it with."""
    problems: list[str] = []
    for purpose, (tool, schema) in ANSWER_TOOLS.items():
        for n, turn in enumerate(script.turns(purpose), start=1):
            for i, call in enumerate(turn.tool_calls()):
                field = "tool" if turn.tool is not None else f"calls[{i}].name"
                where = f"[[{purpose}]] turn {n}"
                if call.name != tool:
                    problems.append(f"{where}, `{field}`: a {purpose} answer is a `{tool}` call")
                    continue
                try:
                    schema.model_validate(call.input)
                except ValidationError as exc:
                    base = ("input",) if turn.tool is not None else ("calls", i, "input")
                    problems += [
                        f"{where}, `{_field_path((*base, *err['loc']))}`: {err['msg']}"
                        for err in exc.errors()
                    ]
    return problems


def parse_script(data: object, source: str) -> Script:
    """Check a script's data; a ``ConfigError`` naming ``source``, the turn and the field."""
    if not isinstance(data, dict):
        raise ConfigError(
            "model.script", f"{source}: a script is a table of purposes, each a list of turns", FIX
        )
    try:
        script = Script.model_validate(data)
    except ValidationError as exc:
        problems = [_problem(err) for err in exc.errors()]
    else:
        problems = _answers_checked(script)
        if not problems:
            return script
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    raise ConfigError("model.script", f"{source}: {problems[0]}{more}", FIX)


def load_script(path: Path) -> Script:
    """Read a script file (TOML, or JSON when its name ends in ``.json``) and check it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            "model.script",
            f"the script file {path} does not exist",
            "write it (a path relative to the spec's directory), or fix `script`",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("model.script", f"cannot read the script file {path}: {exc}") from None
    try:
        data: object = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if path.suffix == ".json" else "TOML"
        raise ConfigError("model.script", f"{path} is not valid {kind}: {exc}", FIX) from None
    return parse_script(data, str(path))
