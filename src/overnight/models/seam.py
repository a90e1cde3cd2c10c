"""The one seam for model calls, and the ``python`` provider: any callable named in the spec."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from overnight.core.errors import ConfigError
from overnight.models.types import ModelRequest, ModelResponse


@runtime_checkable
class ModelClient(Protocol):
    """Anything that answers a ``ModelRequest``. The gateway prices and records what it returns."""

    def complete(self, request: ModelRequest) -> ModelResponse | dict[str, object]: ...


class CallableModel:
    """Adapts a plain callable ``f(request) -> ModelResponse | dict`` to the seam."""

    def __init__(self, fn: Callable[[ModelRequest], object]) -> None:
        self._fn = fn

    def complete(self, request: ModelRequest) -> ModelResponse | dict[str, object]:
        return self._fn(request)  # type: ignore[return-value]


def resolve_target(target: str, field: str) -> object:
    """Import ``module:attr`` (attr may be dotted). Failures are configuration errors."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            field, f"{target!r} is not of the form module:attr", "e.g. mypkg.fakes:model"
        )
    try:
        obj: object = importlib.import_module(module_name)
    except Exception as exc:  # an import can fail in any way user code can
        raise ConfigError(
            field,
            f"cannot import module {module_name!r}: {exc}",
            "check the module is on PYTHONPATH (or in the spec's directory)",
        ) from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(field, f"{module_name} has no attribute {attr!r}", "check the name")
        obj = getattr(obj, part)
    return obj


def python_model(target: str) -> ModelClient:
    """The ``python`` provider: ``target`` names a ModelClient or a callable."""
    obj = resolve_target(target, "model.target")
    if isinstance(obj, ModelClient):
        return obj
    if callable(obj):
        return CallableModel(obj)
    raise ConfigError("model.target", f"{target!r} is neither callable nor a model client")
