"""``target = "module:attr"`` resolves from the spec's directory and the workspace, and leaves
the process's import path as it found it: a night run in-process (the fleet worker, an
embedding program, a test) does not leave its directories on ``sys.path``."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from overnight.config.spec import parse_spec
from overnight.config.targets import import_roots, resolve_target
from overnight.core.errors import ConfigError
from overnight.messages.types import ModelRequest
from overnight.testing import FunctionModel, text_answer, tool_answer
from tests.helpers.nights import run_night, spec_data


@pytest.fixture
def module_name() -> Iterator[str]:
    name = f"roots_{uuid.uuid4().hex[:10]}"
    yield name
    sys.modules.pop(name, None)


def test_a_target_resolves_from_its_roots_and_the_path_is_restored(
    tmp_path: Path, module_name: str
) -> None:
    (tmp_path / f"{module_name}.py").write_text("def tool(args, key):\n    return 7\n")
    before = list(sys.path)

    with import_roots(tmp_path, None, ""):
        fn = resolve_target(f"{module_name}:tool", "tools.external.t.target")

    assert callable(fn) and fn({}, None) == 7
    assert sys.path == before


def test_outside_its_roots_a_target_is_not_found(tmp_path: Path, module_name: str) -> None:
    (tmp_path / f"{module_name}.py").write_text("X = 1\n")
    with pytest.raises(ConfigError) as info:
        resolve_target(f"{module_name}:X", "model.target")
    assert "cannot import" in str(info.value)
    assert str(tmp_path) not in sys.path


def test_a_target_that_exits_at_import_is_a_configuration_error(
    tmp_path: Path, module_name: str
) -> None:
    (tmp_path / f"{module_name}.py").write_text("import sys\nsys.exit(0)\n")
    before = list(sys.path)
    with import_roots(tmp_path), pytest.raises(ConfigError) as info:
        resolve_target(f"{module_name}:X", "model.target")
    assert "SystemExit" in str(info.value)
    assert sys.path == before


def test_a_night_resolves_its_tools_beside_the_spec_and_leaves_sys_path_alone(
    repo: Path, tmp_path: Path, module_name: str
) -> None:
    beside = tmp_path / "spec-dir"
    beside.mkdir()
    calls = tmp_path / "calls"
    (beside / f"{module_name}.py").write_text(
        "def lookup(args, key):\n"
        '    """Look an order up."""\n'
        f"    open({str(calls)!r}, 'a').write('called\\n')\n"
        "    return {'order': args['order_id']}\n"
    )

    def answer(request: ModelRequest) -> dict[str, Any]:
        if request.purpose != "execute":
            return text_answer("closing note")
        last = request.messages[-1]["content"]
        if isinstance(last, list):
            return text_answer("looked it up")
        return tool_answer("lookup", {"order_id": "4471"})

    data = spec_data(
        repo, tasks=[{"id": "a_1", "brief": "look 4471 up", "verify": "true"}], predicate="false"
    )
    data["tools"]["external"] = [
        {"name": "lookup", "target": f"{module_name}:lookup", "mutating": False}
    ]
    spec = parse_spec(data, beside)
    before = list(sys.path)

    _rd, r = run_night(spec, tmp_path / "run", model=FunctionModel(answer))

    assert [v.id for v in r.verified] == ["a_1"]
    assert calls.read_text().splitlines() == ["called"]
    assert sys.path == before
