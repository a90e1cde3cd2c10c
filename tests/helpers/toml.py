"""A minimal TOML writer for the specs tests build (strings, numbers, booleans, tables,
arrays of tables). Enough for night.toml; not a general serializer."""

from __future__ import annotations

import json
from typing import Any


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def dumps(data: dict[str, Any]) -> str:
    lines: list[str] = []
    tables: list[tuple[str, dict[str, Any]]] = []
    arrays: list[tuple[str, list[dict[str, Any]]]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            tables.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
            arrays.append((key, value))
        else:
            lines.append(f"{key} = {_value(value)}")
    for name, table in tables:
        scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
        nested = {k: v for k, v in table.items() if isinstance(v, dict)}
        if scalars or not nested:
            lines.append(f"\n[{name}]")
            lines.extend(f"{k} = {_value(v)}" for k, v in scalars.items())
        for sub, subtable in nested.items():
            lines.append(f"\n[{name}.{json.dumps(sub) if '.' in sub else sub}]")
            lines.extend(f"{k} = {_value(v)}" for k, v in subtable.items())
    for name, items in arrays:
        for item in items:
            lines.append(f"\n[[{name}]]")
            lines.extend(f"{k} = {_value(v)}" for k, v in item.items())
    return "\n".join(lines) + "\n"
