"""``[[tools.mcp]]``: the tools of MCP servers, given to the agent like any other tool.

Only the tools an entry's ``allow`` names exist for the model; the rest are never listed, and
a call to one is a call to no tool. The entry decides a tool's path, never the server: one in
its ``read_only`` is called directly; any other changes the world and goes through the
effects ledger exactly as a mutating external tool does (the same ``ExternalTool``: intent
row first, the call with the run-step key in the request's ``_meta``, then the outcome; a
task key from the entry's ``task_keys`` template; with telemetry on, the W3C ``traceparent`` of
the call's span beside it). A server's annotations
(``readOnlyHint``) are hints from a program the night does not trust, and change nothing.

A server is listed once, when the model first needs its tools (or a call first needs its
schema); the arguments of a call are checked against the listed input schema before the
ledger or the server sees them. A server that cannot be reached, dies, hangs or answers
garbage makes that call fail (an ``unknown`` effect for a mutating call whose intent was
written), never the night.

The SDK is imported by ``overnight.tools.mcp_client`` only, when a spec has servers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overnight.config.tools import ExternalToolSpec, McpServerSpec, ToolsSpec, template_fields
from overnight.core.errors import ConfigError, SpecProblems
from overnight.process import Confinement
from overnight.seams import Tool, ToolContext, ToolError, ToolOutcome
from overnight.tools.external import DEFAULT_TIMEOUT_S, ExternalTool

if TYPE_CHECKING:
    from overnight.tools.mcp_client import ListedTool, McpConnection

EXTRA = "pip install 'overnight[mcp]'"

#: Seconds before a server that could not be listed is tried again for the model's tool list
#: (a call tries at once).
RELIST_AFTER_S = 60.0

Confine = Callable[[], Confinement | None]


def connect(spec: McpServerSpec, base_dir: Path, confine: Confine) -> McpConnection:
    """A connection to ``spec``'s server (opened on first use). A ``ConfigError`` naming the
    extra when the ``mcp`` package is not installed."""
    try:
        from overnight.tools.mcp_client import McpConnection
    except ImportError as exc:
        raise ConfigError(
            f"tools.mcp.{spec.name}",
            f"MCP servers need the mcp package, which cannot be imported ({exc})",
            EXTRA,
        ) from None
    return McpConnection(spec, base_dir=base_dir, confine=confine)


class McpServer:
    """One server as the night sees it: its listing, fetched once and kept."""

    def __init__(
        self,
        spec: McpServerSpec,
        connection: McpConnection,
        listing: dict[str, ListedTool] | None = None,
    ) -> None:
        self.spec = spec
        self.connection = connection
        self._listing = listing
        self._problem = ""
        self._failed_at: float | None = None
        self._lock = threading.Lock()

    def listing(self, *, eager: bool) -> dict[str, ListedTool] | None:
        """The server's tools, or None when it cannot be listed now. ``eager`` False (the
        model's tool list) does not try again within ``RELIST_AFTER_S`` of a failure."""
        with self._lock:
            if self._listing is not None:
                return self._listing
            recent = self._failed_at is not None and (
                time.monotonic() - self._failed_at < RELIST_AFTER_S
            )
            if recent and not eager:
                return None
            try:
                self._listing = self.connection.list_tools()
            except Exception as exc:
                self._problem = str(exc)
                self._failed_at = time.monotonic()
                return None
            return self._listing

    def tool(self, name: str) -> ListedTool:
        """The listed tool ``name``; a ``ToolError`` when the server cannot be listed or no
        longer offers it."""
        listing = self.listing(eager=True)
        if listing is None:
            raise ToolError(
                f"the MCP server {self.spec.name!r} is not available ({self._problem}); "
                f"{name} was not called"
            )
        listed = listing.get(name)
        if listed is None:
            raise ToolError(f"the MCP server {self.spec.name!r} does not offer {name!r}")
        return listed


class McpTool:
    """One allowed tool of a server. Its description, schema and whether it changes the
    world come from the server's listing (until it is known: a placeholder, mutating)."""

    def __init__(self, server: McpServer, name: str, default_timeout_s: float | None) -> None:
        self.server = server
        self.name = name
        self.timeout_s = server.spec.timeout_s or default_timeout_s or DEFAULT_TIMEOUT_S
        self._fixed: dict[str, Any] = {}

    def _listed(self) -> ListedTool | None:
        listing = self.server.listing(eager=False)
        return None if listing is None else listing.get(self.name)

    @property
    def description(self) -> str:
        if "description" in self._fixed:
            return str(self._fixed["description"])
        listed = self._listed()
        if listed is None:
            return f"{self.name} (MCP server {self.server.spec.name}, not reachable right now)"
        return listed.description

    @description.setter
    def description(self, value: str) -> None:
        self._fixed["description"] = value

    @property
    def input_schema(self) -> Mapping[str, Any]:
        listed = self._listed()
        if listed is None or not usable_schema(listed.input_schema):
            return {"type": "object"}
        return listed.input_schema

    @input_schema.setter
    def input_schema(self, value: Mapping[str, Any]) -> None:
        raise AttributeError("the input schema of an MCP tool is the server's")

    @property
    def mutating(self) -> bool:
        return self.name not in self.server.spec.read_only

    @mutating.setter
    def mutating(self, value: bool) -> None:
        raise AttributeError("whether an MCP tool changes the world is its entry's to say")

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        listed = self.server.tool(self.name)
        if not usable_schema(listed.input_schema):
            raise ToolError(f"{self.name}: the server's input schema is not valid JSON Schema")
        # The toolbox checked the arguments against the schema it had; when the server was
        # not listed then, that was a placeholder, so they are checked here again.
        from jsonschema import Draft202012Validator

        errors = list(Draft202012Validator(listed.input_schema).iter_errors(dict(args)))
        if errors:
            raise ToolError(f"invalid arguments for {self.name}: {errors[0].message}")
        task_key = self.server.spec.task_keys.get(self.name)
        if self.mutating and task_key is None:
            raise ToolError(
                f"refused: {self.name} is not in tools.mcp.{self.server.spec.name}.read_only, "
                f"and it has no task key (tools.mcp.{self.server.spec.name}.task_keys)"
            )
        stopping = ctx.stop_requested()
        if stopping is not None:
            raise ToolError(f"the run is stopping ({stopping}): {self.name} was not called")
        try:
            self.server.connection.ensure()  # started here, not on the call's own clock
        except Exception as exc:
            raise ToolError(
                f"the MCP server {self.server.spec.name!r} is not available ({exc}); "
                f"{self.name} was not called"
            ) from None
        trace = ctx.trace_context(self.name)
        return self._path(listed, trace).run(args, ctx)

    def _path(self, listed: ListedTool, trace: Mapping[str, str]) -> ExternalTool:
        """The external-tool path for one call of this tool: the ledger for a mutating one;
        the call carries ``trace`` (its span's W3C trace context) to the server."""
        spec = ExternalToolSpec.model_construct(
            name=self.name,
            target=f"mcp:{self.server.spec.name}",
            description=listed.description,
            input_schema=listed.input_schema,
            mutating=self.mutating,
            task_key=self.server.spec.task_keys.get(self.name) if self.mutating else None,
            timeout_s=self.timeout_s,
        )
        return ExternalTool(spec, lambda a, k: self._call(a, k, trace), self.timeout_s)

    def _call(self, args: dict[str, Any], key: str | None, trace: Mapping[str, str]) -> Any:
        """What the external-tool path calls: the server, with the run-step key of a
        mutating call (None for a read-only one) and the trace context in ``_meta``."""
        return self.server.connection.call(self.name, args, key, self.timeout_s, trace)


def usable_schema(schema: Mapping[str, Any]) -> bool:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(dict(schema))
    except SchemaError:
        return False
    return True


def mcp_tools(
    spec: ToolsSpec,
    *,
    base_dir: Path,
    confine: Confine,
    default_timeout_s: float | None = None,
    started: Sequence[McpServer] = (),
) -> list[Tool]:
    """The allowed tools of every ``[[tools.mcp]]`` server: the ``started`` ones (by
    ``start_servers``, before the night) as they are, any other started on first use."""
    by_name = {s.spec.name: s for s in started}
    tools: list[Tool] = []
    for entry in spec.mcp:
        server = by_name.get(entry.name) or McpServer(entry, connect(entry, base_dir, confine))
        tools += [McpTool(server, name, default_timeout_s) for name in entry.allow]
    return tools


# --------------------------------------------------------------------------- spec check


def start_servers(spec: ToolsSpec, *, base_dir: Path, confine: Confine) -> list[McpServer]:
    """Start (or reach) every server, list its tools and hold the entry to them: each
    allowed tool is offered, with a valid input schema, and every one the entry does not list
    as read-only has a task key naming arguments it takes. The servers, started and listed,
    for the night to use; a ``ConfigError`` (several: ``SpecProblems``) otherwise, every
    server started here stopped again."""
    problems: list[ConfigError] = []
    servers: list[McpServer] = []
    for entry in spec.mcp:
        connection = connect(entry, base_dir, confine)
        try:
            listing = connection.list_tools()
        except Exception as exc:
            connection.close()
            problems.append(
                ConfigError(
                    f"tools.mcp.{entry.name}",
                    f"the server cannot be used: {exc}",
                    "check its command (or url) and the names in env; it must answer "
                    f"within connect_timeout_s ({entry.connect_timeout_s:g} s)",
                )
            )
            continue
        servers.append(McpServer(entry, connection, listing))
        problems += entry_problems(entry, listing)
    if problems:
        for server in servers:
            server.connection.close()
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise SpecProblems(problems)
    return servers


def check_servers(spec: ToolsSpec, *, base_dir: Path, confine: Confine) -> None:
    """``start_servers``, and every server started stopped again."""
    for server in start_servers(spec, base_dir=base_dir, confine=confine):
        server.connection.close()


def entry_problems(entry: McpServerSpec, listing: Mapping[str, ListedTool]) -> list[ConfigError]:
    """What is wrong with ``entry`` against what its server lists."""
    where = f"tools.mcp.{entry.name}"
    problems: list[ConfigError] = []
    offered = ", ".join(sorted(listing)) or "none"
    for name in entry.allow:
        listed = listing.get(name)
        if listed is None:
            problems.append(
                ConfigError(
                    f"{where}.allow",
                    f"the server offers no tool {name!r} (it offers: {offered})",
                    f"remove {name!r} from allow, or correct its spelling",
                )
            )
            continue
        if not usable_schema(listed.input_schema):
            problems.append(
                ConfigError(
                    f"{where}.allow",
                    f"the server's input schema of {name!r} is not valid JSON Schema",
                    f"remove {name!r} from allow, or fix the server",
                )
            )
            continue
        template = entry.task_keys.get(name)
        if name in entry.read_only:
            continue
        properties = listed.input_schema.get("properties") or {}
        if template is None:
            example = next(iter(properties), "id")
            problems.append(
                ConfigError(
                    f"{where}.task_keys",
                    f"{name!r} is not in read_only, so its calls change the world and go "
                    "through the effects ledger, which needs a task key naming each effect "
                    "(what the server says of the tool, readOnlyHint included, is not trusted)",
                    f'add task_keys = {{ {name} = "{{{example}}}:{name}" }} to the entry (the '
                    f'arguments that make one effect), or read_only = ["{name}"] if it only '
                    "reads",
                )
            )
            continue
        unknown = [
            f for f in template_fields(template, f"{where}.task_keys.{name}") if f not in properties
        ]
        if unknown:
            problems.append(
                ConfigError(
                    f"{where}.task_keys.{name}",
                    f"{template!r} names {', '.join(unknown)}, which {name} does not take (it "
                    f"takes: {', '.join(properties) or 'nothing'})",
                    "name arguments of the tool in the template",
                )
            )
    return problems


__all__ = [
    "EXTRA",
    "McpServer",
    "McpTool",
    "check_servers",
    "connect",
    "entry_problems",
    "mcp_tools",
]
