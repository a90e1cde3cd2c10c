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
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {v!r} as TOML")


def _is_table(v: Any) -> bool:
    return isinstance(v, dict)


def _is_tables(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def _inline(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_inline(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_inline(x) for x in v) + "]"
    return _value(v)


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
        scalars = {k: v for k, v in table.items() if not _is_table(v) and not _is_tables(v)}
        nested = {k: v for k, v in table.items() if _is_table(v)}
        listed = {k: v for k, v in table.items() if _is_tables(v)}
        if scalars or not (nested or listed):
            lines.append(f"\n[{name}]")
            lines.extend(f"{k} = {_value(v)}" for k, v in scalars.items())
        for sub, subtable in nested.items():
            lines.append(f"\n[{name}.{json.dumps(sub) if '.' in sub else sub}]")
            lines.extend(f"{k} = {_value(v)}" for k, v in subtable.items())
        for sub, entries in listed.items():
            for entry in entries:
                lines.append(f"\n[[{name}.{sub}]]")
                lines.extend(f"{k} = {_inline(v)}" for k, v in entry.items())
    for name, items in arrays:
        for item in items:
            lines.append(f"\n[[{name}]]")
            lines.extend(f"{k} = {_value(v)}" for k, v in item.items())
    return "\n".join(lines) + "\n"
