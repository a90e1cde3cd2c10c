"""The toolbox: the tools an agent gets (built from ``overnight.config.tools.ToolsSpec``, the
``[tools]`` table of the spec), what the model is told about them (``specs``), and the one
entry point that runs them (``dispatch``), which never raises: every problem becomes an error
outcome the model reads.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overnight.config.tools import BUILTIN_TOOLS, ToolsSpec
from overnight.core.errors import DiskFull
from overnight.messages.types import ToolSpec
from overnight.process import Confinement
from overnight.seams import Tool, ToolContext, ToolError, ToolOutcome
from overnight.tools.external import load_external
from overnight.tools.files import EditFileTool, ReadFileTool, WriteFileTool
from overnight.tools.mcp import McpServer, mcp_tools
from overnight.tools.paths import tool_places
from overnight.tools.run_command import RunCommandTool
from overnight.tools.search import ListFilesTool, SearchTextTool

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

#: A crash message longer than this is cut (a repr can be huge).
_CRASH_REPR_CHARS = 2000


def build_tool(name: str, spec: ToolsSpec) -> Tool:
    """The built-in tool called ``name``, configured by ``spec``."""
    if name == "read_file":
        return ReadFileTool()
    if name == "list_files":
        return ListFilesTool()
    if name == "search_text":
        return SearchTextTool()
    if name == "write_file":
        return WriteFileTool()
    if name == "edit_file":
        return EditFileTool()
    if name == "run_command":
        return RunCommandTool(
            spec.commands,
            timeout_s=spec.command_timeout_s,
            max_output_chars=spec.max_output_chars,
        )
    raise ValueError(f"no built-in tool is called {name!r}")


class Toolbox:
    """The tools of one agent, by name."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two tools are called {tool.name!r}")
            self._tools[tool.name] = tool

    @classmethod
    def from_spec(
        cls,
        spec: ToolsSpec,
        *,
        base_dir: Path | None = None,
        confine: Callable[[], Confinement | None] | None = None,
        mcp_servers: Sequence[McpServer] = (),
    ) -> Toolbox:
        """The tools ``spec`` allows. ``[[tools.mcp]]`` servers need ``confine``: the sandbox
        a stdio server starts in (returning None: unsandboxed), and ``base_dir``, the spec's
        directory; ``mcp_servers`` are those started already (``start_servers``)."""
        tools: list[Tool] = [build_tool(name, spec) for name in BUILTIN_TOOLS if name in spec.allow]
        tools += [load_external(e, spec.command_timeout_s) for e in spec.external]
        if spec.mcp:
            if confine is None or base_dir is None:
                raise ValueError("MCP servers need the spec's directory and a sandbox (confine)")
            tools += mcp_tools(
                spec,
                base_dir=base_dir,
                confine=confine,
                default_timeout_s=spec.command_timeout_s,
                started=mcp_servers,
            )
        return cls(tools)

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        """What the model request lists, one entry per tool, in a stable order."""
        return [
            ToolSpec(
                name=tool.name,
                description=tool.description,
                input_schema=copy.deepcopy(dict(tool.input_schema)),
            )
            for tool in self._tools.values()
        ]

    def mutating(self, name: str) -> bool:
        """Whether the tool called ``name`` changes the worktree (False if there is none)."""
        tool = self._tools.get(name)
        return bool(tool is not None and tool.mutating)

    def dispatch(self, name: str, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Run one tool call. An unknown tool, arguments that do not fit the schema, a refusal
        and a crash all come back as error outcomes; only a full disk (``DiskFull``) is raised,
        because it ends the run rather than the tool call."""
        tool = self._tools.get(name)
        if tool is None:
            available = ", ".join(self._tools) or "none"
            if name in BUILTIN_TOOLS:
                why = f"the tool {name!r} is not enabled in this run"
            else:
                why = f"there is no tool called {name!r}"
            return ToolOutcome(f"{why}; the tools you can use are: {available}", is_error=True)
        if not isinstance(args, Mapping):
            return ToolOutcome(
                f"the arguments of {name} must be an object, got {type(args).__name__}",
                is_error=True,
            )
        try:
            problem = schema_problem(tool.input_schema, args)
        except Exception as exc:
            problem = f"the arguments could not be checked ({exc!r})"
        if problem is None:
            problem = self._full_check(name, tool.input_schema, args)
        if problem is not None:
            return ToolOutcome(f"invalid arguments for {name}: {problem}", is_error=True)
        # An error names the run's places as its output does (``tool_places``), before a cut.
        try:
            outcome = tool.run(args, ctx)
        except ToolError as exc:
            return ToolOutcome(tool_places(ctx)(str(exc)) or f"{name} failed", is_error=True)
        except DiskFull:
            raise  # not the model's problem to solve: the run ends disk_full, with a result
        except Exception as exc:
            said = tool_places(ctx)(repr(exc))
            return ToolOutcome(f"tool crashed: {_cut(said)}", is_error=True)
        if not isinstance(outcome, ToolOutcome):
            return ToolOutcome(
                f"tool crashed: {name} returned {_cut(repr(outcome))} instead of an outcome",
                is_error=True,
            )
        return outcome

    def _full_check(self, name: str, schema: Mapping[str, Any], args: object) -> str | None:
        """What a complete JSON Schema validator finds that the quick check above does not
        word (``pattern``, ``const``, ``oneOf``, formats of nested schemas...). An invalid call
        never reaches a tool, hence never the effects ledger."""
        validator = self._validators.get(name)
        if validator is None:
            from jsonschema import Draft202012Validator  # loaded at a night's first tool call

            validator = self._validators[name] = Draft202012Validator(dict(schema))
        errors = sorted(validator.iter_errors(args), key=lambda e: [str(p) for p in e.path])
        if not errors:
            return None
        return "; ".join(
            f"{'.'.join(str(p) for p in e.path) or 'the arguments'}: {e.message}"
            for e in errors[:5]
        )


def _cut(text: str) -> str:
    if len(text) <= _CRASH_REPR_CHARS:
        return text
    return text[:_CRASH_REPR_CHARS] + f"... [{len(text) - _CRASH_REPR_CHARS} characters cut]"


# --------------------------------------------------------------------------- schema check

_JSON_TYPES: dict[str, str] = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _fits_type(value: object, expected: str) -> bool:
    actual = _json_type(value)
    if expected == "number":
        return actual in ("integer", "number")
    if expected == "integer" and actual == "number":
        return isinstance(value, float) and value.is_integer()
    return actual == expected


_BOUNDS: tuple[tuple[str, Callable[[Any, Any], bool], str], ...] = (
    ("minimum", operator.ge, "at least"),
    ("maximum", operator.le, "at most"),
    ("exclusiveMinimum", operator.gt, "more than"),
    ("exclusiveMaximum", operator.lt, "less than"),
)


def schema_problem(schema: Mapping[str, Any], value: object, where: str = "") -> str | None:
    """The first way ``value`` fails ``schema``, or None when it fits.

    A small subset of JSON Schema, enough for tool inputs: ``type``, ``properties``,
    ``required``, ``additionalProperties: false``, ``items``, ``enum``, ``minimum``,
    ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``minLength``, ``maxLength``.
    """
    label = f"{where!r}" if where else "the arguments"
    expected = schema.get("type")
    if expected is not None:
        options = [expected] if isinstance(expected, str) else list(expected)
        if not any(_fits_type(value, t) for t in options):
            wanted = " or ".join(_JSON_TYPES.get(t, t) for t in options)
            return f"{label} must be {wanted}, got {_json_type(value)} {_short(value)}"
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(repr(c) for c in schema["enum"])
        return f"{label} must be one of {choices}, got {_short(value)}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        for key, ok, words in _BOUNDS:
            bound = schema.get(key)
            if bound is not None and not ok(value, bound):
                return f"{label} must be {words} {bound}, got {value}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{label} must have at least {schema['minLength']} character(s)"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{label} must have at most {schema['maxLength']} characters"
    if isinstance(value, Mapping):
        return _object_problem(schema, value, where)
    if isinstance(value, list | tuple) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            problem = schema_problem(schema["items"], item, f"{where}[{index}]")
            if problem is not None:
                return problem
    return None


def _object_problem(schema: Mapping[str, Any], value: Mapping[Any, Any], where: str) -> str | None:
    properties: Mapping[str, Any] = schema.get("properties", {})
    prefix = f"{where}." if where else ""
    for key in schema.get("required", ()):
        if key not in value:
            return f"{prefix}{key!r} is required"
    if schema.get("additionalProperties") is False:
        extra = [k for k in value if k not in properties]
        if extra:
            accepted = ", ".join(properties) or "none"
            return f"unexpected argument {prefix}{extra[0]!r} (accepted: {accepted})"
    for key, sub in properties.items():
        if key in value and isinstance(sub, Mapping):
            problem = schema_problem(sub, value[key], f"{prefix}{key}")
            if problem is not None:
                return problem
    return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
