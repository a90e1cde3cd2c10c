"""The programs a night's tools need are found before anything is spent: ripgrep for
``search_text``, the program of each ``[tools] commands`` prefix, on PATH as the night's
commands see it. A missing one exits 64 naming the field, the program and the fix, with
nothing written; ``overnight check`` says the same."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers.nights import cli_env, spec_data, write_spec
from tests.helpers.sandbox import require_bwrap

#: What the night needs up to its tool checks (git for the repository, the sandbox's probe).
BASICS = ("python3", "git", "bwrap", "prlimit", "setpriv", "sh", "true", "false", "test", "env")


def bin_without_rg(tmp_path: Path) -> Path:
    """A PATH of one directory: links to the basics, no ripgrep."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in BASICS:
        found = shutil.which(name)
        if found is not None:
            (bin_dir / name).symlink_to(found)
    return bin_dir


def agent_night(repo: Path, **tools: Any) -> dict[str, Any]:
    data = spec_data(repo, tasks=[{"id": "a", "brief": "do it", "verify": "true"}])
    data["tools"] = {"commands": ["true", "test"], **tools}
    return data


def overnight(args: list[str], path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = cli_env()
    if path is not None:
        env["PATH"] = str(path)
    return subprocess.run(
        [sys.executable, "-m", "overnight", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def home() -> Path:
    return Path(os.environ["OVERNIGHT_HOME"])


def test_a_night_whose_search_text_has_no_ripgrep_exits_64_writing_nothing(
    repo: Path, tmp_path: Path
) -> None:
    require_bwrap()
    bin_dir = bin_without_rg(tmp_path)
    spec = write_spec(tmp_path / "night.toml", agent_night(repo))  # default allow: search_text
    run_dir = tmp_path / "run"
    done = overnight(["run", str(spec), "--run-dir", str(run_dir)], bin_dir)
    assert done.returncode == 64, done.stdout + done.stderr
    assert "tools.allow: rg is not on PATH" in done.stderr
    assert "apt-get install ripgrep" in done.stderr
    assert "remove search_text from [tools] allow" in done.stderr
    assert not run_dir.exists()
    assert not home().exists() or list(home().rglob("*")) == []

    checked = overnight(["check", str(spec)], bin_dir)
    assert checked.returncode == 64, checked.stdout + checked.stderr
    [line] = [x for x in checked.stdout.splitlines() if x.startswith("programs")]
    assert "failed" in line and "tools.allow: rg is not on PATH" in line
    assert "apt-get install ripgrep" in line
    assert not home().exists() or list(home().rglob("*")) == []

    # Without search_text, the same machine is enough for the tools.
    lean = write_spec(tmp_path / "lean.toml", agent_night(repo, allow=["read_file"]))
    checked = overnight(["check", str(lean)], bin_dir)
    [line] = [x for x in checked.stdout.splitlines() if x.startswith("programs")]
    assert line.split()[1] == "ok", checked.stdout


def test_a_command_prefix_whose_program_is_missing_exits_64(repo: Path, tmp_path: Path) -> None:
    data = agent_night(repo)
    data["tools"]["commands"] = ["true", "no-such-tool-xyz --flag"]
    spec = write_spec(tmp_path / "night.toml", data)
    run_dir = tmp_path / "run"
    done = overnight(["run", str(spec), "--run-dir", str(run_dir)])
    assert done.returncode == 64, done.stdout + done.stderr
    assert "tools.commands: no-such-tool-xyz is not on PATH" in done.stderr
    assert "'no-such-tool-xyz --flag'" in done.stderr
    assert not run_dir.exists()


def test_with_ripgrep_present_check_lists_it(repo: Path, tmp_path: Path) -> None:
    assert shutil.which("rg") is not None, "the test machine has ripgrep"
    spec = write_spec(tmp_path / "night.toml", agent_night(repo))
    checked = overnight(["check", str(spec)])
    [line] = [x for x in checked.stdout.splitlines() if x.startswith("programs")]
    assert line.split()[1] == "ok" and "rg" in line, checked.stdout
