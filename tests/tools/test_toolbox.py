"""ToolsSpec validation and Toolbox dispatch: the model only ever gets outcomes, never
exceptions."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from overnight.config.tools import BUILTIN_TOOLS, ToolsSpec
from overnight.core.errors import ConfigError
from overnight.messages.types import ToolSpec
from overnight.seams import Tool, ToolContext, ToolError, ToolOutcome
from overnight.tools.toolbox import Toolbox, schema_problem

ALL = list(BUILTIN_TOOLS)


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.txt").write_text("hello\n")
    return ToolContext(root=root, artifacts=tmp_path / "artifacts", call_id="t1")


class _Crashing:
    name = "crash"
    description = "always crashes"
    input_schema: Mapping[str, Any] = {"type": "object", "properties": {}}
    mutating = False

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        table: dict[str, ToolOutcome] = {}
        return table["missing"]


class _Refusing(_Crashing):
    name = "refuse"

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        raise ToolError("no, and here is why")


class _Wrong(_Crashing):
    name = "wrong"

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        return "not an outcome"  # type: ignore[return-value]


def test_defaults_are_read_only() -> None:
    box = Toolbox.from_spec(ToolsSpec())
    assert box.names() == ["read_file", "list_files", "search_text"]
    assert not any(box.mutating(n) for n in box.names())


def test_specs_are_valid_json_schema_tool_specs() -> None:
    box = Toolbox.from_spec(ToolsSpec(allow=ALL, commands=["pytest", "ruff check"]))
    specs = box.specs()
    assert [s.name for s in specs] == ALL
    for spec in specs:
        assert isinstance(spec, ToolSpec)
        assert spec.description
        jsonschema.Draft202012Validator.check_schema(spec.input_schema)
    run = next(s for s in specs if s.name == "run_command")
    assert "`pytest`" in run.description
    assert "`ruff check`" in run.description
    assert box.mutating("write_file")
    assert box.mutating("run_command")


def test_every_tool_satisfies_the_protocol() -> None:
    box = Toolbox.from_spec(ToolsSpec(allow=ALL))
    for name in box.names():
        assert isinstance(box._tools[name], Tool)


def test_unknown_tool_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        ToolsSpec(allow=["read_file", "delete_everything"])
    assert err.value.field == "tools.allow"
    assert "delete_everything" in err.value.problem
    for name in BUILTIN_TOOLS:
        assert name in err.value.fix


def test_spec_rejects_unknown_fields_and_bad_values() -> None:
    with pytest.raises(ValidationError):
        ToolsSpec.model_validate({"allow": ["read_file"], "comands": ["pytest"]})
    with pytest.raises(ValidationError):
        ToolsSpec(command_timeout_s=0)


@pytest.mark.parametrize("command", ["pytest; rm -rf /", "make $(x)", "pytest | tee", ""])
def test_commands_must_be_plain_prefixes(command: str) -> None:
    with pytest.raises(ConfigError) as err:
        ToolsSpec(commands=[command])
    assert err.value.field == "tools.commands"


def test_git_cannot_be_allowlisted() -> None:
    with pytest.raises(ConfigError, match="git"):
        ToolsSpec(commands=["pytest", "git status"])


def test_dispatch_runs_a_tool(ctx: ToolContext) -> None:
    out = Toolbox.from_spec(ToolsSpec()).dispatch("read_file", {"path": "a.txt"}, ctx)
    assert out == ToolOutcome("     1\thello")


def test_dispatch_unknown_and_disabled_tools(ctx: ToolContext) -> None:
    box = Toolbox.from_spec(ToolsSpec())
    unknown = box.dispatch("rm_rf", {}, ctx)
    assert unknown.is_error
    assert "no tool called 'rm_rf'" in unknown.content
    assert "read_file, list_files, search_text" in unknown.content
    disabled = box.dispatch("write_file", {"path": "b.txt", "content": "x"}, ctx)
    assert disabled.is_error
    assert "not enabled" in disabled.content
    assert not (ctx.root / "b.txt").exists()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({}, "'path' is required"),
        ({"path": 3}, "'path' must be a string"),
        ({"path": "a.txt", "offset": "two"}, "'offset' must be an integer"),
        ({"path": "a.txt", "offset": True}, "'offset' must be an integer"),
        ({"path": "a.txt", "offset": 0}, "at least 1"),
        ({"path": "a.txt", "lines": 3}, "unexpected argument 'lines'"),
        (["a.txt"], "must be an object"),
    ],
)
def test_dispatch_rejects_bad_arguments(ctx: ToolContext, args: Any, fragment: str) -> None:
    out = Toolbox.from_spec(ToolsSpec()).dispatch("read_file", args, ctx)
    assert out.is_error
    assert fragment in out.content


def test_dispatch_turns_tool_errors_and_crashes_into_outcomes(ctx: ToolContext) -> None:
    box = Toolbox([_Crashing(), _Refusing(), _Wrong()])
    crashed = box.dispatch("crash", {}, ctx)
    assert crashed.is_error
    assert crashed.content == "tool crashed: KeyError('missing')"
    refused = box.dispatch("refuse", {}, ctx)
    assert refused == ToolOutcome("no, and here is why", is_error=True)
    wrong = box.dispatch("wrong", {}, ctx)
    assert wrong.is_error
    assert wrong.content.startswith("tool crashed:")


def test_dispatch_refusals_from_builtin_tools(ctx: ToolContext) -> None:
    box = Toolbox.from_spec(ToolsSpec(allow=ALL, commands=["python"]))
    outside = box.dispatch("read_file", {"path": "../outside.txt"}, ctx)
    assert outside.is_error
    assert "outside the workspace" in outside.content
    chained = box.dispatch("run_command", {"command": "python -V && touch pwned"}, ctx)
    assert chained.is_error
    assert not (ctx.root / "pwned").exists()
    git = box.dispatch("run_command", {"command": "git status"}, ctx)
    assert git.is_error
    assert "git is not available" in git.content


def test_duplicate_tool_names_are_a_programming_error() -> None:
    with pytest.raises(ValueError, match="crash"):
        Toolbox([_Crashing(), _Crashing()])


@pytest.mark.parametrize(
    "value",
    [
        {"path": "x"},
        {"path": "x", "offset": 2, "limit": 5},
        {"path": "x", "offset": 0},
        {"path": None},
        {"offset": 1},
        {"path": "x", "extra": 1},
        {"path": "x", "limit": 2.5},
        "x",
    ],
)
def test_schema_check_agrees_with_jsonschema(value: object) -> None:
    schema = Toolbox.from_spec(ToolsSpec()).specs()[0].input_schema
    ours = schema_problem(schema, value) is None
    theirs = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert ours == theirs
