"""The JSON Schema of night.toml agrees with overnight's own check: it accepts every example
spec the repository holds (the bundled examples, the README's and the docs' spec blocks,
what ``overnight init`` writes, what the tests' specs are made from), and it refuses a spec
with an unknown key or a value of the wrong type exactly where ``overnight check`` does."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import overnight.examples as bundled
from overnight.cli.init import SCRIPT_NAME, Predicate, schema_line, script_text, spec_text
from overnight.config.spec import parse_spec
from overnight.config.spec_schema import SCHEMA_FILE, shipped_schema_path
from overnight.core.errors import ConfigError, SpecProblems
from tests.docs.pages import DOCS, all_blocks, blocks
from tests.helpers.nights import make_repo, spec_data
from tests.helpers.project import calc_repo, overnight
from tests.helpers.toml import dumps

SCHEMA: dict[str, Any] = json.loads((DOCS / SCHEMA_FILE).read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)
EXAMPLES = Path(bundled.__file__).parent

#: What a fragment of a page (one table, shown alone) is set into to make a whole spec.
BASE: dict[str, Any] = {
    "goal": "Make every test pass without editing the tests.",
    "workspace": ".",
    "budget": {"usd": 5.0},
    "predicate": {"command": "python -m pytest -q"},
}


def schema_fields(data: dict[str, Any]) -> set[str]:
    """The fields the schema refuses in ``data``, named as ``overnight check`` names them
    (``budget.usd``, ``tasks[0].verify``; an unknown key by its own path)."""
    fields = set()
    for error in VALIDATOR.iter_errors(data):
        parts: list[str] = []
        for p in error.absolute_path:
            if isinstance(p, int):
                parts[-1] = f"{parts[-1]}[{p}]"
            else:
                parts.append(str(p))
        if error.validator == "additionalProperties":
            extra = re.findall(r"'([^']+)'", error.message.split("(", 1)[1])
            fields |= {".".join([*parts, key]) for key in extra}
        elif error.validator == "required":
            (missing,) = re.findall(r"^'([^']+)'", error.message)
            fields.add(".".join([*parts, missing]))
        else:
            fields.add(".".join(parts))
    return fields


def check_fields(data: dict[str, Any], where: Path) -> set[str]:
    """The fields the spec's loader refuses in ``data`` (empty: it loads)."""
    try:
        parse_spec(data, where)
    except SpecProblems as problems:
        return {p.field for p in problems.problems}
    except ConfigError as problem:
        return {problem.field}
    return set()


def page_specs(tmp_path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every spec a page of the docs or the README shows, a fragment set into ``BASE``; a
    scripted model's ``turns.toml`` shown on the same page is written where its spec reads it."""
    found = []
    for block in all_blocks("toml"):
        data = tomllib.loads(block.text)
        if {"plan", "execute"} & data.keys():
            continue  # a turns.toml, not a spec (tests/docs/test_examples.py loads those)
        script = data.get("model", {}).get("script")
        if script is not None:
            (turns,) = [b for b in blocks(block.page, "toml") if "[[plan]]" in b.text]
            (tmp_path / script).write_text(turns.text, encoding="utf-8")
        whole = set(SCHEMA["required"]) <= data.keys()
        found.append((block.where, data if whole else {**BASE, **data}))
    return found


def example_specs(tmp_path: Path) -> list[tuple[str, dict[str, Any], Path]]:
    """Every example spec of the repository, with the directory it is read from."""
    found: list[tuple[str, dict[str, Any], Path]] = []
    for path in sorted(EXAMPLES.rglob("night*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        found.append((str(path.relative_to(EXAMPLES.parent)), data, path.parent))
    found += [(where, data, tmp_path) for where, data in page_specs(tmp_path)]
    predicate = Predicate("python -m pytest -q", "python -m pytest", "pyproject.toml")
    for provider, model in (("anthropic", "claude-opus-4-5"), ("script", "scripted")):
        text = spec_text(BASE["goal"], predicate, 28.0, 8.0, provider, model)
        here = tmp_path / f"init-{provider}"
        here.mkdir()
        (here / SCRIPT_NAME).write_text(script_text(BASE["goal"], predicate), "utf-8")
        found.append((f"overnight init --provider {provider}", tomllib.loads(text), here))
    tests_spec = tomllib.loads(dumps(spec_data(tmp_path)))
    found.append(("tests/helpers/nights.py spec_data", tests_spec, tmp_path))
    return found


def test_the_schema_is_a_valid_draft_07_schema() -> None:
    jsonschema.Draft7Validator.check_schema(SCHEMA)


def test_every_example_spec_is_valid_by_the_schema_and_by_the_loader(tmp_path: Path) -> None:
    found = example_specs(tmp_path)
    where = {name for name, _, _ in found}
    # the bundled examples, the README's spec, the docs' and init's are all among them
    assert {"examples/textstats/night.toml", "examples/refunds/night.toml"} <= where
    assert any(name.startswith("README.md:") for name in where)
    assert sum(name.startswith("docs/") for name in where) >= 10
    assert len(found) >= 20
    for name, data, base in found:
        assert schema_fields(data) == set(), name
        assert check_fields(data, base) == set(), name


#: Specs the check refuses, each with the fields it names: unknown keys at each depth, values
#: of the wrong type (a string for a number, a boolean for an integer, a table for a list),
#: and one out of its bounds.
REFUSED: dict[str, tuple[dict[str, Any], set[str]]] = {
    "an unknown top-level key": ({**BASE, "bugdet": {"usd": 5.0}}, {"bugdet"}),
    "an unknown key in a table": (
        {**BASE, "budget": {"usd": 5.0, "dollars": 5}},
        {"budget.dollars"},
    ),
    "an unknown key in a nested table": (
        {
            **BASE,
            "tools": {
                "external": [{"name": "x", "target": "m:f", "mutating": False, "timeout": 3}]
            },
        },
        {"tools.external[0].timeout"},
    ),
    "a string for a number": ({**BASE, "budget": {"usd": "lots"}}, {"budget.usd"}),
    "a numeric string for an integer": ({**BASE, "run": {"drift_every": "5"}}, {"run.drift_every"}),
    "a boolean for an integer": ({**BASE, "agent": {"max_calls": True}}, {"agent.max_calls"}),
    "a string for a list": (
        {**BASE, "sandbox": {"mode": "on", "writable": "/var/cache"}},
        {"sandbox.writable"},
    ),
    "a value outside its choices": ({**BASE, "sandbox": {"mode": "maybe"}}, {"sandbox.mode"}),
    "a number under its bound": ({**BASE, "run": {"drift_every": 0}}, {"run.drift_every"}),
    "a missing required key": (
        {key: value for key, value in BASE.items() if key != "predicate"},
        {"predicate"},
    ),
    "two problems at once": (
        {**BASE, "budget": {"usd": "lots"}, "colour": "blue"},
        {"budget.usd", "colour"},
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_the_schema_refuses_what_the_check_refuses_and_names_the_same_fields(
    case: str, tmp_path: Path
) -> None:
    data, fields = REFUSED[case]
    assert schema_fields(data) == fields
    assert check_fields(data, tmp_path) == fields
    # and the real command line says so, exit 64, naming each field
    spec = tmp_path / "night.toml"
    spec.write_text(dumps(data), encoding="utf-8")
    done = overnight("check", "--json", str(spec))
    assert done.returncode == 64, done.stdout + done.stderr
    (checked,) = [c for c in json.loads(done.stdout)["checks"] if c["status"] == "failed"]
    named = {line.split(": ", 1)[0] for line in checked["said"].splitlines() if ": " in line}
    assert fields <= named, checked["said"]


def test_a_spec_the_check_accepts_the_schema_accepts(tmp_path: Path) -> None:
    """The other direction, by the real command line: a whole spec that passes every check."""
    repo = make_repo(tmp_path / "repo")
    data = {
        **BASE,
        "workspace": str(repo),
        "sandbox": {"mode": "off"},
        "predicate": {"command": "true"},
        "tasks": [{"id": "t1", "command": "true", "verify": "true"}],
    }
    spec = tmp_path / "night.toml"
    spec.write_text(dumps(data), encoding="utf-8")
    done = overnight("check", str(spec))
    assert done.returncode == 0, done.stdout + done.stderr
    assert schema_fields(data) == set()


def test_init_points_the_spec_at_the_schema_the_package_ships() -> None:
    line = schema_line()
    assert line.startswith("#:schema file:///") and line.endswith(f"/{SCHEMA_FILE}")
    shipped = Path(line.removeprefix("#:schema file://"))
    assert shipped == shipped_schema_path()
    assert json.loads(shipped.read_text(encoding="utf-8")) == SCHEMA


def test_the_spec_overnight_init_writes_names_its_schema_on_the_first_line(
    tmp_path: Path,
) -> None:
    repo = calc_repo(tmp_path / "calc")
    done = overnight("init", str(repo), "--goal", BASE["goal"], "--provider", "script")
    written = repo / "night.toml"
    assert written.is_file(), done.stdout + done.stderr
    text = written.read_text(encoding="utf-8")
    first = text.splitlines()[0]
    assert first == schema_line()
    named = Path(first.removeprefix("#:schema file://"))
    assert named.read_text(encoding="utf-8") == (DOCS / SCHEMA_FILE).read_text(encoding="utf-8")
    data = tomllib.loads(text)  # to TOML the line is a comment
    assert schema_fields(data) == set()
    assert check_fields(data, repo) == set()
