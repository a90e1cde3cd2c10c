"""Writes the generated reference, or checks that what is committed is what it would write.

``python -m overnight.reference`` (from the repository's root, or ``--root DIR``) writes
``docs/reference/*.md``, ``docs/night.schema.json`` and the schema shipped in the package;
``--check`` writes nothing and exits 1 naming every file that differs, so CI fails on a
reference left stale after a model, a flag or an ending changed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from overnight.config.spec_schema import SCHEMA_FILE, schema_text
from overnight.reference.command_line import command_line_page
from overnight.reference.exit_codes import exit_codes_page
from overnight.reference.markup import COMMAND, header
from overnight.reference.result_pages import result_json_page, run_directory_page
from overnight.reference.spec_pages import night_toml_page, turns_toml_page


def reference_index_page() -> str:
    lines = [
        *header("Reference", "the code"),
        "Every page of this section is written from the code that decides what it says, so "
        "it cannot drift from it; CI fails when one is stale "
        f"(`{COMMAND} --check`).",
        "",
        "- [night.toml](night-toml.md): every key of the spec, from the config models; also "
        f"as a JSON Schema, [`{SCHEMA_FILE}`](../{SCHEMA_FILE}).",
        "- [turns.toml](turns-toml.md): the file a scripted model answers from.",
        "- [Commands](commands.md): every command and option, from the parser.",
        "- [result.json](result-json.md): the terminal result, from the result models.",
        "- [The run directory](run-directory.md): what a night keeps, and where.",
        "- [Exit codes](exit-codes.md): the seven endings and what every command exits with.",
    ]
    return "\n".join(lines) + "\n"


#: Every generated file, by its path from the repository's root, and what writes it.
GENERATED: dict[str, Callable[[], str]] = {
    "docs/reference/index.md": reference_index_page,
    "docs/reference/night-toml.md": night_toml_page,
    "docs/reference/turns-toml.md": turns_toml_page,
    "docs/reference/commands.md": command_line_page,
    "docs/reference/result-json.md": result_json_page,
    "docs/reference/run-directory.md": run_directory_page,
    "docs/reference/exit-codes.md": exit_codes_page,
    f"docs/{SCHEMA_FILE}": schema_text,
    f"src/overnight/config/{SCHEMA_FILE}": schema_text,
}


def render() -> dict[str, str]:
    """Every generated file's text (each written once, however many files hold it)."""
    made: dict[Callable[[], str], str] = {}
    return {path: made.setdefault(page, page()) for path, page in GENERATED.items()}


def stale(root: Path) -> list[str]:
    """The generated files under ``root`` whose text is not what would be written."""
    found = []
    for path, text in render().items():
        target = root / path
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            found.append(path)
    return found


def write(root: Path) -> list[str]:
    """Write every generated file under ``root``; the ones that changed."""
    changed = []
    for path, text in render().items():
        target = root / path
        if target.is_file() and target.read_text(encoding="utf-8") == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m overnight.reference",
        description="Write the reference pages and the schema of night.toml from the code.",
    )
    parser.add_argument(
        "--root", type=Path, default=Path.cwd(), help="the repository (default: here)"
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 naming every stale file"
    )
    args = parser.parse_args(argv)
    root: Path = args.root
    if not (root / "docs").is_dir():
        print(f"{root} has no docs/ folder: run from the repository's root", file=sys.stderr)
        return 64
    if args.check:
        found = stale(root)
        for path in found:
            print(f"stale: {path}", file=sys.stderr)
        if found:
            print("regenerate with: python -m overnight.reference", file=sys.stderr)
            return 1
        print(f"the generated reference is up to date ({len(GENERATED)} files)")
        return 0
    for path in write(root):
        print(f"wrote {path}")
    return 0
