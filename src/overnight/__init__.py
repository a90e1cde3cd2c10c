"""overnight: an unattended agent night inside a hard budget; only the harness gives the verdict.

Embedding::

    import overnight

    result = overnight.run("night.toml", on_event=print)
    print(result.stop_reason, result.exit_code)

``run`` and ``resume`` return the terminal ``Result`` (the model of result.json); events are
the typed ``Event`` union; every seam a night talks through is a Protocol declared in
``overnight.seams`` and exported here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from overnight.version import __version__

if TYPE_CHECKING:
    from overnight.api import Result, load_spec, resume, run
    from overnight.config.spec import Spec
    from overnight.core.errors import ConfigError, OvernightError, RunError
    from overnight.night.compose import FleetShared
    from overnight.night.events import (
        Decision,
        Event,
        ModelCall,
        ModelRetry,
        RunCreated,
        TaskEvent,
        ToolCall,
        TraceEvent,
    )
    from overnight.night.signals import Signals
    from overnight.seams import (
        Clock,
        EffectStore,
        ExecContext,
        ExecResult,
        ModelClient,
        SharedCap,
        TaskExecutor,
        Tool,
        ToolContext,
        ToolOutcome,
    )

#: Where each public name lives. They are imported on first use, so that importing one
#: module of the package (``overnight.core.budget``) does not import all of them.
_HOMES: dict[str, str] = {
    "Result": "overnight.api",
    "load_spec": "overnight.api",
    "resume": "overnight.api",
    "run": "overnight.api",
    "Spec": "overnight.config.spec",
    "ConfigError": "overnight.core.errors",
    "OvernightError": "overnight.core.errors",
    "RunError": "overnight.core.errors",
    "Decision": "overnight.night.events",
    "Event": "overnight.night.events",
    "ModelCall": "overnight.night.events",
    "ModelRetry": "overnight.night.events",
    "RunCreated": "overnight.night.events",
    "TaskEvent": "overnight.night.events",
    "ToolCall": "overnight.night.events",
    "TraceEvent": "overnight.night.events",
    "Signals": "overnight.night.signals",
    "FleetShared": "overnight.night.compose",
    "SharedCap": "overnight.seams",
    "Clock": "overnight.seams",
    "EffectStore": "overnight.seams",
    "ExecContext": "overnight.seams",
    "ExecResult": "overnight.seams",
    "ModelClient": "overnight.seams",
    "TaskExecutor": "overnight.seams",
    "Tool": "overnight.seams",
    "ToolContext": "overnight.seams",
    "ToolOutcome": "overnight.seams",
}

__all__ = [
    "Clock",
    "ConfigError",
    "Decision",
    "EffectStore",
    "Event",
    "ExecContext",
    "ExecResult",
    "FleetShared",
    "ModelCall",
    "ModelClient",
    "ModelRetry",
    "OvernightError",
    "Result",
    "RunCreated",
    "RunError",
    "SharedCap",
    "Signals",
    "Spec",
    "TaskEvent",
    "TaskExecutor",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolOutcome",
    "TraceEvent",
    "__version__",
    "load_spec",
    "resume",
    "run",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'overnight' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return __all__
