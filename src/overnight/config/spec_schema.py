"""The JSON Schema of ``night.toml``, generated from the spec's models (``Spec`` and the models
of its tables), for editors that check and complete TOML against a schema (Taplo, Even Better
TOML in VS Code).

The schema is JSON Schema draft-07, the newest draft every such editor reads, shaped for
TOML: TOML has no null, so an optional field is its type alone (absence is how a file leaves
it out), and a field the loader fills itself (``base_dir``) is not offered. A copy ships in
the package beside this module (``night.schema.json``: the file ``overnight init`` points a
new spec at) and another in the docs; ``python -m overnight.reference --check`` holds both
equal to what this module generates.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

#: The file name of the schema, in the package and in the docs.
SCHEMA_FILE = "night.schema.json"
DRAFT = "http://json-schema.org/draft-07/schema#"
#: Fields of ``Spec`` that the loader sets and a file never holds.
LOADER_FIELDS = ("base_dir",)


def night_schema() -> dict[str, Any]:
    """The JSON Schema of ``night.toml``, as a JSON-ready mapping (same input, same output)."""
    from overnight.config.spec import Spec  # the models, only when a schema is asked for

    raw = Spec.model_json_schema(ref_template="#/definitions/{model}")
    definitions = raw.pop("$defs", {})
    for name in LOADER_FIELDS:
        raw["properties"].pop(name, None)
    schema: dict[str, Any] = {
        "$schema": DRAFT,
        "title": "night.toml",
        "description": (
            "The spec of one overnight night. Generated from overnight's config models by "
            "`python -m overnight.reference`; `overnight schema` prints it."
        ),
        **{k: v for k, v in raw.items() if k not in ("title", "description")},
        "definitions": definitions,
    }
    shaped: dict[str, Any] = _for_toml(schema)
    return shaped


def schema_text() -> str:
    """The schema as the files hold it: indented JSON and a final newline."""
    return json.dumps(night_schema(), indent=2, ensure_ascii=False) + "\n"


def shipped_schema_path() -> Path:
    """The schema file inside the installed package: what ``overnight init`` names in the
    ``#:schema`` line it writes (a path, so that an editor reads it offline)."""
    return Path(str(resources.files("overnight.config").joinpath(SCHEMA_FILE)))


def _for_toml(node: Any) -> Any:
    """``node`` with every schema in it shaped for TOML (see the module's docstring)."""
    if isinstance(node, list):
        return [_for_toml(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _for_toml(value) for key, value in node.items()}
    options = out.get("anyOf")
    if isinstance(options, list):
        kept = [o for o in options if o != {"type": "null"}]
        if len(kept) < len(options):
            out.pop("anyOf")
            out = {**kept[0], **out} if len(kept) == 1 else {"anyOf": kept, **out}
    if "default" in out and out["default"] is None:
        out.pop("default")  # TOML has no null: a field left out is the way to leave it unset
    if "$ref" in out and len(out) > 1:
        # draft-07 ignores the siblings of a $ref: keep the description where editors read it
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    description = out.get("description")
    if isinstance(description, str):
        out["description"] = plain_text(description)
    return out


def plain_text(docstring: str) -> str:
    """A field's docstring as Markdown: its wrapped lines joined, paragraphs kept apart by a
    blank line, and reStructuredText's double backquotes around code made single."""
    paragraphs = [" ".join(p.split()) for p in docstring.strip().split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p).replace("``", "`")
