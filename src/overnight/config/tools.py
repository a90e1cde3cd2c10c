"""The ``[tools]`` section: which built-in tools an agent task may use, the command prefixes
``run_command`` accepts, and the user's own Python tools (``[[tools.external]]``)."""

from __future__ import annotations

import re
import string
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from overnight.core.errors import ConfigError
from overnight.core.shell_words import ShellSyntaxError, is_git_command, split_command

#: The built-in tools, in the order the model is shown them.
BUILTIN_TOOLS: tuple[str, ...] = (
    "read_file",
    "list_files",
    "search_text",
    "write_file",
    "edit_file",
    "run_command",
)

#: What an agent gets when the spec says nothing: it can look, not touch.
READ_ONLY_TOOLS: tuple[str, ...] = ("read_file", "list_files", "search_text")


class ExternalToolSpec(BaseModel):
    """One ``[[tools.external]]`` entry."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The tool's name as the model sees it."""
    target: str
    """``module:attr`` of ``fn(args, idempotency_key) -> result`` (JSON-able); it raises
    ``overnight.effects.ToolFailure(message, retryable=...)`` when the call fails."""
    description: str = ""
    """What the tool does, for the model (default: the callable's docstring)."""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    """JSON Schema of the arguments."""
    mutating: bool
    """Changes the world. Mutating calls are written to the effects ledger before they run."""
    task_key: str | None = None
    """For a mutating tool: a template over the arguments naming the effect for the task,
    e.g. ``"{order_id}:refund"``. Two runs can never both perform the same task key."""
    timeout_s: float | None = Field(default=None, gt=0)
    """Seconds one call may take (never past the night's own end); default: the toolbox's
    (``[tools] command_timeout_s``). A mutating call that takes longer is recorded as an effect
    of unknown outcome and is not called again."""

    @model_validator(mode="after")
    def _keyed(self) -> ExternalToolSpec:
        if self.mutating and not self.task_key:
            raise ValueError(
                f'the mutating tool {self.name!r} needs a task_key, e.g. "{{order_id}}:refund"'
            )
        # Imported here: a spec without external tools does not pay for loading jsonschema.
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(self.input_schema)
        except SchemaError as exc:
            raise ValueError(
                f"the input_schema of {self.name!r} is not a valid JSON Schema: {exc.message}"
            ) from None
        return self


#: What a tool of an MCP server may be called here: what the model providers accept.
MCP_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class McpServerSpec(BaseModel):
    """One ``[[tools.mcp]]`` entry: an MCP server whose allowed tools the agent may call."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    """What the server is called in messages, the trace and the report."""
    command: list[str] | None = Field(
        default=None,
        # the validator below also takes one string, split into words: say so to editors
        json_schema_extra={
            "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]
        },
    )
    """The program and its arguments that start a stdio server, e.g. ``["npx", "-y",
    "@modelcontextprotocol/server-github"]`` (a string is split into words, no shell). It runs
    in the night's sandbox (unsandboxed when ``[sandbox] mode = "off"``), in an empty private
    directory; a word starting with ``./`` or ``../``, or naming a file in the spec's
    directory, is a path from the spec's directory. One of ``command`` and ``url``."""
    url: str | None = None
    """The address of a streamable HTTP server, e.g. ``"http://127.0.0.1:8931/mcp"``. One of
    ``command`` and ``url``."""
    env: list[str] = Field(default_factory=list)
    """Environment variables a stdio server gets besides PATH and HOME, e.g.
    ``["GITHUB_TOKEN"]``: nothing else of the harness's environment reaches it (the model
    providers' API keys included, unless listed here)."""
    allow: list[str] = Field(min_length=1)
    """The tools of this server the model is given; every other tool is never shown, and a
    call to it is a call to no tool. Each must be offered by the server (checked before the
    night starts)."""
    read_only: list[str] = Field(default_factory=list)
    """The allowed tools that only read, e.g. ``["search_issues"]``: called directly, outside
    the effects ledger. Only this list says so; what the server says of a tool
    (``readOnlyHint``) is a hint from a program the night does not trust, and changes
    nothing. Each must be in ``allow``."""
    task_keys: dict[str, str] = Field(default_factory=dict)
    """Per tool, a template over its arguments naming its effect for the task, e.g.
    ``{ create_issue = "{repo}:{title}:issue" }``. Every allowed tool not in ``read_only``
    changes the world: its calls go through the effects ledger, and it needs a template
    here. Two runs sharing the ledger never both perform the same key."""
    timeout_s: float | None = Field(default=None, gt=0)
    """Seconds one call may take (never past the night's end); default: ``[tools]
    command_timeout_s``. A mutating call with no answer in time is an effect of unknown
    outcome, never called again."""
    connect_timeout_s: float = Field(default=30.0, gt=0, le=600)
    """Seconds starting (or reaching) the server and listing its tools may take."""

    @field_validator("command", mode="before")
    @classmethod
    def _words(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return split_command(value)
            except ShellSyntaxError as exc:
                raise ConfigError(
                    "tools.mcp.command",
                    f"{value!r} is not a plain command: {exc}",
                    'write the program and its arguments, e.g. command = ["python3", "server.py"]',
                ) from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> McpServerSpec:
        where = f"tools.mcp.{self.name}"
        if (self.command is None) == (self.url is None):
            raise ConfigError(
                where,
                "a server is started with a command or reached at a url: give exactly one",
                'command = ["python3", "server.py"] (stdio) or url = "http://127.0.0.1:8931/mcp"',
            )
        if self.command is not None and (not self.command or not self.command[0]):
            raise ConfigError(f"{where}.command", "the command is empty", "name the program")
        if self.url is not None:
            if not self.url.startswith(("http://", "https://")):
                raise ConfigError(
                    f"{where}.url",
                    f"{self.url!r} is not an http(s) address",
                    'e.g. url = "http://127.0.0.1:8931/mcp"',
                )
            if self.env:
                raise ConfigError(
                    f"{where}.env",
                    "env is passed to a server the harness starts (command), not to one at a url",
                    "remove env",
                )
        for name in self.env:
            if not _ENV_NAME.match(name):
                raise ConfigError(
                    f"{where}.env",
                    f"{name!r} is not an environment variable name",
                    'list names only, e.g. env = ["GITHUB_TOKEN"]',
                )
        for tool in self.allow:
            if not MCP_TOOL_NAME.match(tool):
                raise ConfigError(
                    f"{where}.allow",
                    f"{tool!r} cannot be given to a model (letters, digits, _ and - only, at "
                    "most 64)",
                    "remove it from allow",
                )
        for tool in self.read_only:
            if tool not in self.allow:
                raise ConfigError(
                    f"{where}.read_only",
                    f"{tool!r} is listed as read-only but is not in allow",
                    f"add {tool!r} to allow, or remove it from read_only",
                )
            if tool in self.task_keys:
                raise ConfigError(
                    f"{where}.read_only",
                    f"{tool!r} is listed as read-only and has a task key: a tool that only "
                    "reads makes no effect to name",
                    f"remove its task key, or remove {tool!r} from read_only if it changes "
                    "the world",
                )
        for tool, template in self.task_keys.items():
            if tool not in self.allow:
                raise ConfigError(
                    f"{where}.task_keys",
                    f"{tool!r} has a task key but is not in allow",
                    f"add {tool!r} to allow, or remove its task key",
                )
            if not template_fields(template, f"{where}.task_keys.{tool}"):
                raise ConfigError(
                    f"{where}.task_keys.{tool}",
                    f"{template!r} names no argument, so every call would be the same effect",
                    'name the arguments that make the effect, e.g. "{repo}:{title}:issue"',
                )
        self.allow = list(dict.fromkeys(self.allow))
        self.read_only = list(dict.fromkeys(self.read_only))
        return self


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def template_fields(template: str, where: str) -> list[str]:
    """The argument names a task key template uses (``"{repo}:{n}"``: repo, n); a
    ``ConfigError`` for a template ``str.format`` cannot read."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ConfigError(
            where, f"{template!r} is not a key template: {exc}", 'e.g. "{repo}:{title}:issue"'
        ) from None
    names = []
    for _text, field, _spec, _conversion in parsed:
        if field is None:
            continue
        base = re.split(r"[.\[]", field, maxsplit=1)[0]
        if not base or base.isdigit():
            raise ConfigError(
                where,
                f"{template!r}: every field must name an argument ({{{field}}} does not)",
                'e.g. "{repo}:{title}:issue"',
            )
        names.append(base)
    return names


class ToolsSpec(BaseModel):
    """The ``[tools]`` table: the tools an agent task may use."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    external: list[ExternalToolSpec] = Field(default_factory=list)
    """User-defined Python tools (``[[tools.external]]``); mutating ones go through the
    effects ledger."""
    mcp: list[McpServerSpec] = Field(default_factory=list)
    """MCP servers (``[[tools.mcp]]``, the ``mcp`` extra): their allowed tools are given to the
    agent; those the server does not mark read-only go through the effects ledger."""
    allow: list[str] = Field(default_factory=lambda: list(READ_ONLY_TOOLS))
    """Built-in tools the agent may call: read_file, list_files, search_text, write_file,
    edit_file, run_command. Default: the read-only three."""
    commands: list[str] = Field(default_factory=list)
    """Command prefixes ``run_command`` accepts, compared word by word (``"pytest"`` allows
    ``pytest -q tests``; ``"python -m pytest"`` does not allow ``python -c ...``). Empty:
    ``run_command`` refuses every command. git can never be allowed."""
    command_timeout_s: float = Field(default=300.0, gt=0)
    """Longest a ``run_command`` call may run, in seconds (never past the run's own end)."""
    max_output_chars: int = Field(default=8000, ge=200)
    """Characters of a command's output the model sees; the full output goes to the run's
    artifacts."""

    @field_validator("external")
    @classmethod
    def _distinct_names(cls, value: list[ExternalToolSpec]) -> list[ExternalToolSpec]:
        seen: set[str] = set()
        for tool in value:
            if tool.name in BUILTIN_TOOLS or tool.name in seen:
                raise ConfigError(
                    "tools.external",
                    f"the tool name {tool.name!r} is taken",
                    "give every external tool a name of its own, not a built-in one",
                )
            seen.add(tool.name)
        return value

    @model_validator(mode="after")
    def _distinct_mcp_names(self) -> ToolsSpec:
        taken = {*BUILTIN_TOOLS, *(e.name for e in self.external)}
        servers: set[str] = set()
        for server in self.mcp:
            if server.name in servers:
                raise ConfigError(
                    "tools.mcp",
                    f"two servers are called {server.name!r}",
                    "give every [[tools.mcp]] entry a name of its own",
                )
            servers.add(server.name)
            for tool in server.allow:
                if tool in taken:
                    raise ConfigError(
                        f"tools.mcp.{server.name}.allow",
                        f"the tool name {tool!r} is taken (a built-in tool, an external tool "
                        "or another server's tool)",
                        "allow each tool name once in [tools]",
                    )
                taken.add(tool)
        return self

    @field_validator("allow")
    @classmethod
    def _known_tools(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in BUILTIN_TOOLS:
                raise ConfigError(
                    "tools.allow",
                    f"unknown tool {name!r}",
                    f"use names of built-in tools: {', '.join(BUILTIN_TOOLS)}",
                )
        return list(dict.fromkeys(value))

    @field_validator("commands")
    @classmethod
    def _plain_prefixes(cls, value: list[str]) -> list[str]:
        for command in value:
            try:
                words = split_command(command)
            except ShellSyntaxError as exc:
                raise ConfigError(
                    "tools.commands",
                    f"{command!r} is not a plain command prefix: {exc}",
                    'write program names and arguments only, e.g. "pytest" or "ruff check"',
                ) from None
            if is_git_command(words):
                raise ConfigError(
                    "tools.commands",
                    f"{command!r}: git cannot be allowed, overnight manages the repository's "
                    "history itself",
                    "remove it from tools.commands",
                )
        return value
