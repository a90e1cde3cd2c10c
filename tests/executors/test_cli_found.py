"""``check_cli`` at preflight: the pinned CLIs are found with their versions and the files the
sandbox must show; a missing CLI, one that names no version or an unsupported one is a spec
error (exit 64) saying how to install one that fits, before anything is spent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from overnight.config.spec import ExecutorSpec
from overnight.core.errors import ConfigError
from overnight.executors import SUPPORTED, check_cli
from tests.executors.clis import ROOT, find, pinned


def fake_cli(where: Path, said: str, code: int = 0) -> Path:
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(f"#!/bin/sh\necho '{said}'\nexit {code}\n")
    where.chmod(0o755)
    return where


def spec(kind: str, path: str | None = None) -> ExecutorSpec:
    return ExecutorSpec.model_validate({"kind": kind, **({"path": path} if path else {})})


def test_the_pinned_versions_are_the_supported_ones() -> None:
    for kind, supported in SUPPORTED.items():
        assert supported.pinned == pinned(supported.package), kind


def test_the_pinned_claude_code_is_found_as_its_native_binary() -> None:
    _, found = find("claude-code")
    assert found.version == pinned("@anthropic-ai/claude-code")
    assert found.program.read_bytes()[:4] == b"\x7fELF"
    assert found.files == (found.program,)


def test_the_pinned_codex_is_found_as_its_native_binary_with_its_tools() -> None:
    _, found = find("codex")
    assert found.version == pinned("@openai/codex")
    assert found.program.read_bytes()[:4] == b"\x7fELF"
    assert found.program in found.files
    assert all(f.is_file() and not f.is_symlink() for f in found.files)
    assert [d.name for d in found.path_dirs] == ["codex-path"]


def test_a_missing_path_names_the_install(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        check_cli(spec("claude-code", "node_modules/.bin/claude"), tmp_path)
    error = caught.value
    assert error.field == "executor.path"
    assert str(tmp_path / "node_modules/.bin/claude") in error.problem
    assert "npm install @anthropic-ai/claude-code@2.1.332" in error.fix


def test_not_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        check_cli(spec("codex"), tmp_path)
    assert caught.value.problem == "codex is not on PATH"
    assert "npm install @openai/codex@0.171.0" in caught.value.fix


def test_an_unsupported_version(tmp_path: Path) -> None:
    fake_cli(tmp_path / "bin" / "claude", "1.0.44 (Claude Code)")
    with pytest.raises(ConfigError) as caught:
        check_cli(spec("claude-code", "bin/claude"), tmp_path)
    assert "is version 1.0.44, which overnight does not support" in caught.value.problem
    assert "supported: 2.0.0 up to, not including, 3.0.0" in caught.value.fix


def test_a_version_found_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cli(tmp_path / "bin" / "claude", "2.5.1 (Claude Code)")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    found = check_cli(spec("claude-code"), ROOT)
    assert found.version == "2.5.1" and found.path == tmp_path / "bin" / "claude"


def test_no_version_and_a_failing_version(tmp_path: Path) -> None:
    fake_cli(tmp_path / "quiet", "hello")
    with pytest.raises(ConfigError, match="which names no version"):
        check_cli(spec("claude-code", "quiet"), tmp_path)
    fake_cli(tmp_path / "broken", "claude native binary not installed", code=1)
    with pytest.raises(ConfigError, match="--version exited 1"):
        check_cli(spec("claude-code", "broken"), tmp_path)


def test_a_codex_launcher_without_its_native_binary(tmp_path: Path) -> None:
    package = tmp_path / "node_modules" / "@openai" / "codex"
    (package / "package.json").parent.mkdir(parents=True)
    (package / "package.json").write_text('{"name": "@openai/codex"}')
    fake_cli(package / "bin" / "codex.js", "codex-cli 0.171.0")
    with pytest.raises(ConfigError) as caught:
        check_cli(spec("codex", str(package / "bin" / "codex.js")), tmp_path)
    assert "its native binary" in caught.value.problem and "not installed" in caught.value.problem


def test_a_command_that_is_not_there(tmp_path: Path) -> None:
    missing = ExecutorSpec.model_validate(
        {"kind": "command", "command": ["no-such-agent-cli", "{prompt}"], "api": "anthropic"}
    )
    with pytest.raises(ConfigError) as caught:
        check_cli(missing, tmp_path)
    assert caught.value.field == "executor.command"
    assert "no-such-agent-cli" in caught.value.problem
