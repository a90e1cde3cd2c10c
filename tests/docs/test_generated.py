"""The generated reference and the schema of night.toml are what the code says: regenerated,
they match what is committed, and the check that CI runs names a stale one. The pages carry
every field, flag and ending the code has, so a new one cannot go undocumented."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from overnight.cli.parser import EXITS, build_parser
from overnight.config.spec import Spec
from overnight.config.spec_schema import SCHEMA_FILE, shipped_schema_path
from overnight.core.endings import PRIORITY
from overnight.reference.command_line import commands
from overnight.reference.generate import GENERATED, main, render, stale, write
from overnight.reference.model_fields import nested
from overnight.store.result import TerminalResult
from tests.docs.pages import DOCS, ROOT
from tests.helpers.project import overnight


def test_regenerating_the_reference_and_the_schema_changes_nothing(tmp_path: Path) -> None:
    written = write(tmp_path / "fresh")
    assert sorted(written) == sorted(GENERATED)  # an empty tree: every file is written
    for path in GENERATED:
        fresh = (tmp_path / "fresh" / path).read_text(encoding="utf-8")
        committed = (ROOT / path).read_text(encoding="utf-8")
        assert committed == fresh, f"{path} is stale: run python -m overnight.reference"
    assert stale(ROOT) == []


def test_the_check_ci_runs_passes_here_and_names_what_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "overnight.reference", "--check", "--root", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    copy = tmp_path / "repo"
    write(copy)
    page = copy / "docs" / "reference" / "night-toml.md"
    page.write_text(page.read_text(encoding="utf-8").replace("Hard cap", "Soft cap"))
    (copy / "docs" / SCHEMA_FILE).unlink()
    capsys.readouterr()
    assert main(["--check", "--root", str(copy)]) == 1
    said = capsys.readouterr().err
    assert "stale: docs/reference/night-toml.md" in said
    assert f"stale: docs/{SCHEMA_FILE}" in said
    assert "stale: docs/reference/commands.md" not in said
    # --check wrote nothing; a write mends both, and the check then passes.
    assert not (copy / "docs" / SCHEMA_FILE).exists()
    assert sorted(write(copy)) == ["docs/night.schema.json", "docs/reference/night-toml.md"]
    assert main(["--check", "--root", str(copy)]) == 0


def test_overnight_schema_prints_the_schema_the_docs_and_the_package_keep() -> None:
    done = overnight("schema")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (DOCS / SCHEMA_FILE).read_text(encoding="utf-8")
    assert done.stdout == shipped_schema_path().read_text(encoding="utf-8")
    schema = json.loads(done.stdout)
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["additionalProperties"] is False
    assert "base_dir" not in schema["properties"]  # the loader's, never the file's


def _keys(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[str]:
    """Every field name of ``model`` and of the models under it."""
    if model in seen:
        return set()
    seen.add(model)
    names = set(model.model_fields)
    for info in model.model_fields.values():
        inner = nested(info.annotation)
        if inner is not None:
            names |= _keys(inner[0], seen)
    return names


def _rows(page: str) -> set[str]:
    """The first cell of every table row of a generated page: the keys it documents."""
    text = render()[f"docs/reference/{page}"]
    return {
        line.split("|")[1].strip().strip("`")
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| key ")
    }


def test_the_night_toml_page_has_a_row_for_every_field_of_every_table() -> None:
    keys = _keys(Spec, set()) - {"base_dir"}
    assert {"usd", "command", "provider", "mode", "otlp_endpoint", "usd_per_day"} <= keys
    assert keys - _rows("night-toml.md") == set()


def test_the_result_page_has_a_row_for_every_field_of_the_result() -> None:
    keys = _keys(TerminalResult, set())
    assert {"stop_reason", "cost_usd", "drift_score", "base_commit"} <= keys
    assert keys - _rows("result-json.md") == set()


def test_the_commands_page_has_every_command_and_option_of_the_parser() -> None:
    text = render()["docs/reference/commands.md"]
    found = list(commands(build_parser()))
    assert len(found) > 20
    for words, _, sub in found:
        heading = f"## `overnight {' '.join(words)}`"
        assert heading in text
        section = text[text.index(heading) :].split("\n## ", 1)[0]
        shown = [
            a
            for a in sub._actions
            if a.help != argparse.SUPPRESS
            and not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
        ]
        # one row per argument, and each option under its own name
        assert section.count("\n| `") == len(shown), words
        for action in shown:
            for name in action.option_strings:
                assert f"| `{name}" in section or f", `{name}" in section, (words, name)
    # every command, subcommand and all, has its exit line, and no line names a command
    # the parser lacks
    assert {" ".join(w) for w, _, sub in found if not sub._subparsers} <= set(EXITS)
    assert set(EXITS) <= {" ".join(w) for w, _, _ in found}


def test_the_exit_codes_page_has_every_ending_in_priority_order() -> None:
    text = render()["docs/reference/exit-codes.md"]
    endings = text[text.index("## The seven endings") :]
    at = [endings.index(f"| `{e}` |") for e in PRIORITY]
    assert len(PRIORITY) == 7 and at == sorted(at)


def test_a_new_field_docstring_is_in_the_next_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pages are read from the models at generation time, not from a copy."""
    from overnight.config import spec as spec_module

    info = spec_module.BudgetSpec.model_fields["usd"]
    monkeypatch.setattr(info, "description", "A marker sentence 7f3e.")
    assert "A marker sentence 7f3e." in render()["docs/reference/night-toml.md"]
    assert stale(ROOT) == ["docs/reference/night-toml.md"]
