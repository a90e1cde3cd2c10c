"""The reference pages of the files a person writes: ``night.toml`` (from ``Spec`` and the
models of its tables) and a scripted model's ``turns.toml`` (from ``Script``)."""

from __future__ import annotations

from overnight.config.model_script import Script
from overnight.config.spec import Spec
from overnight.config.spec_schema import LOADER_FIELDS, SCHEMA_FILE
from overnight.reference.markup import field_tables, header
from overnight.reference.model_fields import walk


def night_toml_page() -> str:
    tables = walk(
        Spec,
        "toml",
        top_doc="The keys at the top of the file, before any table.",
        skip=LOADER_FIELDS,
    )
    lines = [
        *header("night.toml", "the config models (`overnight.config`, rooted at `Spec`)"),
        "Every key of the spec, table by table: its type and bounds, its default, and what it "
        "does. A key no table takes is refused, and so is a value outside its bounds: "
        "`overnight check night.toml` names the field and the fix. The same facts as a JSON "
        f"Schema: [`{SCHEMA_FILE}`](../{SCHEMA_FILE}) (`overnight schema` prints it; see "
        "[Editor support](../guides/editors.md)).",
        "",
        'A table\'s default is what a spec without that table gets; "unset" means the key '
        "has no value unless given (TOML has no null).",
        "",
        *field_tables(tables, "the top level"),
    ]
    return "\n".join(lines).rstrip() + "\n"


def turns_toml_page() -> str:
    tables = walk(Script, "toml")
    lines = [
        *header("turns.toml", "the scripted model's models (`overnight.config.model_script`)"),
        'The file `[model] script` names when `provider = "script"`: the model\'s answers, in '
        "order per purpose (see [A scripted model](../guides/scripted-model.md)). A JSON file "
        "(its name ending in `.json`) holds the same keys.",
        "",
        *field_tables(tables, "the top level"),
    ]
    return "\n".join(lines).rstrip() + "\n"
