"""The reference pages of what a night leaves: ``result.json`` (from ``TerminalResult`` and
the models of its blocks) and the run directory (from ``overnight.store.rundir.LAYOUT``)."""

from __future__ import annotations

from overnight.reference.markup import field_tables, header, table
from overnight.reference.model_fields import walk
from overnight.store.result import RESULT_KIND, RESULT_SCHEMA_VERSION, TerminalResult
from overnight.store.rundir import LAYOUT


def result_json_page() -> str:
    tables = walk(TerminalResult, "json", top_doc="The fields at the top of the object.")
    lines = [
        *header("result.json", "the result models (`overnight.store.result`)"),
        f"The terminal result of a night: one JSON object of `kind` `{RESULT_KIND}`, "
        f"`schema_version` {RESULT_SCHEMA_VERSION}, written to `RUN_DIR/result.json` when "
        "the night ends, whatever its ending (`overnight run --json` prints it too). Its JSON "
        "Schema ships in the package, `overnight/store/result.schema.json`. Every block below "
        "is written in every result unless its type says it may be null; `fleet_money` is "
        "left out of `budgets` when no fleet cap applied.",
        "",
        "What these fields mean together (the budget lines, the endings, the verdict) is told "
        "in [How a night runs](../concepts/how-a-night-runs.md).",
        "",
        *field_tables(tables, "`result.json`", with_default=False),
    ]
    return "\n".join(lines).rstrip() + "\n"


def run_directory_page() -> str:
    lines = [
        *header("The run directory", "`overnight.store.rundir.LAYOUT`"),
        "Each night keeps everything it knows in one directory, `RUN_DIR`: "
        "`$OVERNIGHT_HOME/runs/<run-id>` unless `overnight run --run-dir` names another "
        "(`OVERNIGHT_HOME` defaults to `~/.overnight`). The directory and the directories in "
        "it are 0700, the files the run writes 0600: they hold prompts, outputs, spend and "
        "effects.",
        "",
        *table(["path", "what it is"], ((f"`RUN_DIR/{name}`", what) for name, what in LAYOUT)),
        "What each file's format promises, and how an older or newer overnight reads it, is in "
        "[Checkpoints and resume](../concepts/checkpoints-and-resume.md).",
    ]
    return "\n".join(lines).rstrip() + "\n"
