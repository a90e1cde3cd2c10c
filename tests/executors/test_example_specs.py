"""The bundled example's spec per executor (``src/overnight/examples/textstats/night.*.toml``):
each is a valid spec whose executor is the kind its name says, and preflight finds the pinned
CLI it names when that CLI is on PATH; with nothing on PATH it is a spec error naming how to
install it (exit 64 from ``overnight check``, nothing spent)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from overnight.config.spec import load_spec
from overnight.core.errors import ConfigError
from overnight.demo import prepare_example
from overnight.executors import check_cli
from tests.executors.clis import BIN, cli_path

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "overnight" / "examples" / "textstats"
KINDS = {
    "night.claude-code.toml": "claude-code",
    "night.codex.toml": "codex",
    "night.mini-swe-agent.toml": "command",
}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_example_spec_loads_with_its_executor(name: str) -> None:
    spec = load_spec(EXAMPLE / name)
    assert spec.executor is not None and spec.executor.kind == KINDS[name]
    assert spec.model is not None and spec.budget.usd > 0
    assert spec.executor.is_cli


@pytest.mark.parametrize("name", ["night.claude-code.toml", "night.codex.toml"])
def test_preflight_finds_the_pinned_cli_on_path(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("claude" if "claude" in name else "codex")
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    spec = load_spec(EXAMPLE / name)
    assert spec.executor is not None
    found = check_cli(spec.executor, EXAMPLE)
    assert found.version


@pytest.mark.parametrize("name", ["night.claude-code.toml", "night.codex.toml"])
def test_overnight_check_without_the_cli_exits_64_naming_how_to_install(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = dict(os.environ)
    env["PATH"] = "/usr/bin:/bin"
    env["ANTHROPIC_API_KEY"] = env["OPENAI_API_KEY"] = "sk-not-used"
    # no network: were the model asked, it would be at a port where nothing listens
    env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9"
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"
    done = subprocess.run(
        [sys.executable, "-m", "overnight", "check", str(EXAMPLE / name)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 64, said
    assert "executor.path" in said and "npm install" in said
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    spec = load_spec(EXAMPLE / name)
    assert spec.executor is not None
    with pytest.raises(ConfigError) as refused:
        check_cli(spec.executor, EXAMPLE)
    assert refused.value.field == "executor.path"


@pytest.mark.parametrize("name", ["night.claude-code.toml", "night.codex.toml"])
def test_overnight_check_names_the_cli_its_path_version_and_tools(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = cli_path("claude" if "claude" in name else "codex")
    workspace = prepare_example(tmp_path)
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    env["ANTHROPIC_API_KEY"] = env["OPENAI_API_KEY"] = "sk-not-used"
    env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9"
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"
    done = subprocess.run(
        [sys.executable, "-m", "overnight", "check", str(workspace / name)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    [settings] = [ln for ln in done.stdout.splitlines() if ln.startswith("settings")]
    kind = "claude-code" if "claude" in name else "codex"
    monkeypatch.setenv("PATH", env["PATH"])
    spec = load_spec(workspace / name)
    assert spec.executor is not None
    found = check_cli(spec.executor, workspace)
    assert f"executor {kind} {found.version} at {found.path}" in settings, settings
    assert found.path.resolve() == program.resolve() or found.path.parent == BIN
    if kind == "claude-code":
        tools = spec.executor.tools or ["Bash", "Edit", "Read", "Write"]
        assert f"its tools: {', '.join(tools)}" in settings
    assert "tools read_file" not in settings  # the built-in agent's list is not its
