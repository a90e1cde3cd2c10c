"""Pydantic models read as reference tables: one table per nested model, one row per field
(its key, its type with the model's constraints, its default, its docstring).

The walk is generic: it starts at a root model and follows every field whose type holds
another model (itself, optional, in a list, as a mapping's values), depth first in the
order the fields are declared, so a field added to a model is in the next generated page
without a change here. Two fields of the same model (``[alerts.alert]`` and
``[alerts.page]``) share one table. Two dialects name things: ``toml`` for the spec
(``[budget]``, ``[[tasks]]``, a float, "unset"), ``json`` for a result file (``budgets``,
``verified[]``, a number, null).
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import textwrap
import types
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from overnight.config.spec_schema import plain_text

Dialect = Literal["toml", "json"]

#: A name in each dialect for the simple types.
SIMPLE: dict[Dialect, dict[type, str]] = {
    "toml": {str: "string", int: "integer", float: "float", bool: "boolean"},
    "json": {str: "string", int: "integer", float: "number", bool: "boolean"},
}


@dataclass(frozen=True)
class Row:
    key: str
    type: str
    default: str
    doc: str


@dataclass
class Table:
    """One model's fields, and every path in the file where that model stands."""

    model: type[BaseModel]
    paths: list[str]
    doc: str
    rows: list[Row] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return anchor_of(self.paths[0])


def anchor_of(path: str) -> str:
    """The page anchor of a table's first path (``[tools.external]`` -> ``tools-external``)."""
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "top-level"


def attribute_docs(model: type) -> dict[str, str]:
    """Each field's docstring as the source writes it (the string after the field), for
    models that do not keep them as descriptions; base classes first, so a subclass's wins."""
    docs: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        if klass is object or klass.__module__.startswith("pydantic"):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        if not isinstance(body, ast.ClassDef):
            continue
        for node, after in zip(body.body, body.body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _options(annotation: Any) -> list[Any]:
    """The members of a union annotation (``X | None``), or the annotation alone."""
    if get_origin(annotation) in (Union, types.UnionType):
        return list(get_args(annotation))
    return [annotation]


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def nested(annotation: Any) -> tuple[type[BaseModel], str] | None:
    """The model an annotation holds and how: ``table`` (itself, or optional), ``array`` (in a
    list) or ``map`` (a mapping's values); None when it holds none."""
    for option in _options(annotation):
        if isinstance(option, type) and issubclass(option, BaseModel):
            return option, "table"
        origin, args = get_origin(option), get_args(option)
        if origin is list and args and _is_model(args[0]):
            return args[0], "array"
        if origin is dict and len(args) == 2 and _is_model(args[1]):
            return args[1], "map"
    return None


def type_name(annotation: Any, dialect: Dialect) -> str:
    """An annotation in words: ``integer``, ``list of strings``, ``one of "a", "b"``."""
    if annotation is Any:
        return "any"
    if annotation is type(None):
        return "null"
    options = _options(annotation)
    if len(options) > 1:
        kept = [o for o in options if not (dialect == "toml" and o is type(None))]
        return " or ".join(type_name(o, dialect) for o in kept)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return "one of " + ", ".join(f"`{json.dumps(a)}`" for a in args)
    if origin is list:
        inner = type_name(args[0], dialect) if args else "any"
        if isinstance(args[0], type) and issubclass(args[0], BaseModel):
            return "array of tables" if dialect == "toml" else "list of objects"
        return f"list of {_plural(inner)}"
    if origin is dict:
        table = "table" if dialect == "toml" else "object"
        if len(args) == 2 and args[1] is not Any:
            value = args[1]
            if isinstance(value, type) and issubclass(value, BaseModel):
                return f"{table}s, one per name"
            return f"{table} of {_plural(type_name(value, dialect))}"
        return table
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table" if dialect == "toml" else "object"
    if isinstance(annotation, type) and annotation in SIMPLE[dialect]:
        return SIMPLE[dialect][annotation]
    return getattr(annotation, "__name__", str(annotation))


def _plural(name: str) -> str:
    if name.startswith(("one of", "list of", "any")) or " or " in name:
        return f"({name})" if " or " in name or name.startswith("one of") else name
    return name + "s"


def constraints(info: FieldInfo) -> list[str]:
    """What the field's metadata bounds: ``> 0``, ``≤ 200``, ``at least 1 long``, a pattern."""
    said: list[str] = []
    for item in info.metadata:
        for attr, sign in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
            bound = getattr(item, attr, None)
            if bound is not None:
                said.append(f"{sign} {literal(bound)}")
        shortest = getattr(item, "min_length", None)
        if shortest is not None:
            said.append("not empty" if shortest == 1 else f"length ≥ {shortest}")
        longest = getattr(item, "max_length", None)
        if longest is not None:
            said.append(f"length ≤ {longest}")
        pattern = getattr(item, "pattern", None)
        if pattern is not None:
            said.append(f"matching `{pattern}`")
    return said


def literal(value: Any) -> str:
    """A value as TOML writes it (a JSON result writes the same for these)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:_}" if abs(value) >= 100_000 else str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) >= 100_000:
            return f"{int(value):_}.0"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{k} = {literal(v)}" for k, v in value.items()) + " }"
    return str(value)


def default_of(info: FieldInfo, dialect: Dialect) -> str:
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "its table's defaults" if dialect == "toml" else ""
    if value is None:
        return "unset" if dialect == "toml" else "null"
    return f"`{literal(value)}`"


def child_path(parent: str, key: str, how: str, dialect: Dialect) -> str:
    """Where a nested model stands: ``[tools.external]``-style for TOML (``[[...]]`` for an
    array, ``.<name>`` for a map), ``plan.parked[]``-style for JSON."""
    if dialect == "toml":
        inner = parent.strip("[]")
        dotted = f"{inner}.{key}" if inner else key
        if how == "array":
            return f"[[{dotted}]]"
        return f"[{dotted}.<name>]" if how == "map" else f"[{dotted}]"
    dotted = f"{parent}.{key}" if parent else key
    return dotted + ("[]" if how == "array" else ".<name>" if how == "map" else "")


def walk(
    root: type[BaseModel],
    dialect: Dialect,
    *,
    top: str = "",
    top_doc: str = "",
    skip: tuple[str, ...] = (),
) -> list[Table]:
    """Every table under ``root`` (itself first), in declaration order, depth first."""
    tables: dict[type[BaseModel], Table] = {}

    def visit(model: type[BaseModel], path: str, doc: str) -> None:
        if model in tables:
            tables[model].paths.append(path)
            return
        table = Table(model, [path], doc)
        tables[model] = table
        sources = attribute_docs(model)
        for key, info in model.model_fields.items():
            if key in skip and model is root:
                continue
            inner = nested(info.annotation)
            field_doc = info.description or sources.get(key, "")
            if inner is not None and not field_doc:
                field_doc = inspect.cleandoc(inner[0].__doc__ or "")
            kind = type_name(info.annotation, dialect)
            bounds = constraints(info)
            if bounds:
                kind += ", " + ", ".join(bounds)
            if inner is not None:
                where = child_path(path, key, inner[1], dialect)
                link = tables[inner[0]].paths[0] if inner[0] in tables else where
                kind += f": [`{link}`](#{anchor_of(link)})"
                table.rows.append(Row(key, kind, default_of(info, dialect), plain_text(field_doc)))
                visit(inner[0], where, field_doc)
            else:
                table.rows.append(Row(key, kind, default_of(info, dialect), plain_text(field_doc)))

    visit(root, top, top_doc or inspect.cleandoc(root.__doc__ or ""))
    return list(tables.values())
