"""The tools an agent may be given: each confined to the run's worktree, each allowlisted."""

from overnight.config.tools import BUILTIN_TOOLS, READ_ONLY_TOOLS
from overnight.seams import Tool, ToolContext, ToolError, ToolOutcome
from overnight.tools.paths import resolve_inside
from overnight.tools.toolbox import Toolbox

__all__ = [
    "BUILTIN_TOOLS",
    "READ_ONLY_TOOLS",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "Toolbox",
    "resolve_inside",
]
