"""Reading a tool call's arguments: a wrong or missing one is a ``ToolError`` naming it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from overnight.seams import ToolError


def str_arg(args: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = args.get(key, default)
    if value is None:
        raise ToolError(f"the argument {key!r} is required")
    if not isinstance(value, str):
        raise ToolError(f"the argument {key!r} must be a string, got {type(value).__name__}")
    return value


def optional_str_arg(args: Mapping[str, Any], key: str) -> str | None:
    if args.get(key) is None:
        return None
    return str_arg(args, key)


def int_arg(args: Mapping[str, Any], key: str, default: int, minimum: int = 1) -> int:
    value = args.get(key, default)
    if value is None:
        value = default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"the argument {key!r} must be an integer, got {value!r}")
    if value < minimum:
        raise ToolError(f"the argument {key!r} must be at least {minimum}, got {value}")
    return value
