"""``[executor]`` as a user writes it: each kind's fields checked when the spec is read, an
error naming the field and the fix; today's ``target = "module:attr"`` still meaning a Python
executor; a CLI executor without a ``[model]`` refused at preflight (its calls are booked
through it), before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from overnight.config.spec import parse_spec
from overnight.core.errors import ConfigError
from overnight.night.resolve import check_spec
from tests.helpers.nights import make_repo, spec_data


def spec_with(tmp_path: Path, executor: dict[str, Any], **kwargs: Any) -> Any:
    repo = make_repo(tmp_path / "repo")
    tasks = [{"id": "t1", "brief": "do it", "verify": "true"}]
    return parse_spec(spec_data(repo, executor=executor, tasks=tasks, **kwargs), repo)


def test_target_alone_is_a_python_executor_as_before(tmp_path: Path) -> None:
    spec = spec_with(tmp_path, {"target": "mypkg.agent:executor"})
    assert spec.executor.kind == "python" and not spec.executor.is_cli


@pytest.mark.parametrize(
    ("executor", "said"),
    [
        ({"kind": "command", "api": "openai-chat"}, "command"),
        ({"kind": "command", "command": ["mini", "{prompt}"]}, "api"),
        ({"kind": "claude-code", "target": "a:b"}, "target is for"),
        ({"kind": "codex", "command": ["x"]}, 'for kind = "command" only'),
        ({"kind": "python"}, "needs target"),
        ({"kind": "aider"}, "executor.kind"),
        ({"kind": "claude-code", "max_turns": 0}, "executor.max_turns"),
        ({"kind": "claude-code", "task_usd": -1}, "executor.task_usd"),
        ({"kind": "claude-code", "colour": "blue"}, "executor.colour"),
    ],
)
def test_a_wrong_executor_section_is_a_spec_error_naming_what_to_change(
    tmp_path: Path, executor: dict[str, Any], said: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        spec_with(tmp_path, executor)
    assert said in str(refused.value)


def test_each_cli_kind_speaks_its_api(tmp_path: Path) -> None:
    kinds = {
        "claude-code": ({"kind": "claude-code"}, "anthropic"),
        "codex": ({"kind": "codex"}, "openai-responses"),
        "command": ({"kind": "command", "api": "openai-chat", "command": ["x"]}, "openai-chat"),
    }
    for name, (executor, api) in kinds.items():
        spec = spec_with(tmp_path / name, executor)
        assert spec.executor.is_cli and spec.executor.cli_api() == api


def test_a_cli_executor_without_a_model_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    spec = spec_with(tmp_path, {"kind": "claude-code"}, model=False)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(ConfigError) as refused:
        check_spec(spec)
    assert refused.value.field == "model" and "metering proxy" in refused.value.problem
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_a_cli_model_no_price_is_known_for_names_the_executor_field(tmp_path: Path) -> None:
    spec = spec_with(tmp_path, {"kind": "claude-code", "model": "house-model-9"})
    with pytest.raises(ConfigError) as refused:
        spec.price_table()
    assert refused.value.field == "executor.model"
    assert "[prices.house-model-9]" in refused.value.fix
