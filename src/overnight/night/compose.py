"""Composition: the one place that names the concrete classes behind the seams.

From a ``Spec`` it builds the model client, the gateway's ledger, the executor, the toolbox
and the effects store that a ``Night`` is given; everything else depends on the Protocols in
``overnight.seams`` only.
"""

from __future__ import annotations

from overnight.core.errors import ConfigError
from overnight.models.seam import resolve_target
from overnight.seams import TaskExecutor


def load_executor(target: str) -> TaskExecutor:
    """The user's executor named ``module:attr`` (an object, or a class to construct)."""
    obj = resolve_target(target, "executor.target")
    if isinstance(obj, type):
        try:
            obj = obj()
        except Exception as exc:
            raise ConfigError("executor.target", f"cannot construct {target}: {exc}") from exc
    if not isinstance(obj, TaskExecutor):
        raise ConfigError(
            "executor.target",
            f"{target!r} has no execute(task, context) method",
            "point it at an object (or class) implementing the executor seam",
        )
    return obj
