"""The ``python`` provider: any callable or ``ModelClient`` named in the spec as ``module:attr``
(imported by the rules of ``overnight.config.targets``)."""

from __future__ import annotations

from collections.abc import Callable

from overnight.config.targets import resolve_target
from overnight.core.errors import ConfigError
from overnight.messages.types import ModelRequest, ModelResponse, coerce_response
from overnight.seams import ModelClient


class CallableModel:
    """Adapts a plain callable ``f(request) -> ModelResponse | dict`` to the seam: a dict shaped
    like an Anthropic Messages response is read here, and anything unreadable is raised as
    ``UnreadableAnswer`` (the gateway books it at its worst case)."""

    def __init__(self, fn: Callable[[ModelRequest], object]) -> None:
        self._fn = fn

    def complete(self, request: ModelRequest) -> ModelResponse:
        return coerce_response(self._fn(request))


def python_model(target: str) -> ModelClient:
    """The ``python`` provider: ``target`` names a ModelClient or a callable."""
    obj = resolve_target(target, "model.target")
    if isinstance(obj, ModelClient):
        return CallableModel(obj.complete)  # a user's client may answer with a dict too
    if callable(obj):
        return CallableModel(obj)
    raise ConfigError("model.target", f"{target!r} is neither callable nor a model client")
