"""``overnight completion {bash,zsh,fish}``: a script from the parser, for each shell, naming
every subcommand; bash's and zsh's parse (``bash -n``, ``zsh -n``), fish's too, and each
completes the subcommands and options it should when the shell is there to ask."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from overnight.cli.main import HANDLERS, main

SHELLS = ("bash", "zsh", "fish")


def script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["completion", shell]) == 0
    printed = capsys.readouterr()
    assert printed.err == ""
    return printed.out


def needs(program: str) -> str:
    found = shutil.which(program)
    if found is None:
        pytest.skip(f"{program} is not installed: its script is not checked by {program} here")
    return found


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("shell", SHELLS)
def test_each_shell_s_script_names_every_subcommand(
    shell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = script(shell, capsys)
    assert len(HANDLERS) > 15
    missing = [c for c in HANDLERS if re.search(rf"\b{re.escape(c)}\b", text) is None]
    assert missing == []
    assert "worker" in text and "run-dir" in text  # a fleet subcommand, a subcommand's option


def test_an_unknown_shell_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["completion", "csh"])
    assert stop.value.code == 64
    assert "invalid choice" in capsys.readouterr().err


def test_the_bash_script_is_valid_and_completes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bash = needs("bash")
    path = tmp_path / "overnight.bash"
    path.write_text(script("bash", capsys))
    checked = run([bash, "-n", str(path)])
    assert checked.returncode == 0, checked.stderr

    def completes(*words: str) -> list[str]:
        ask = (
            f"source {path}; COMP_WORDS=(overnight {' '.join(words)}); "
            f"COMP_CWORD={len(words)}; _shtab_overnight; printf '%s\\n' \"${{COMPREPLY[@]}}\""
        )
        done = run([bash, "-c", ask])
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert set(completes('""')) == set(HANDLERS)
    assert set(completes("fleet", '""')) == {"worker", "submit", "schedule", "status", "report"}
    assert {"--md", "--html", "--json", "--out"} <= set(completes("report", "--"))


def test_the_zsh_script_is_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    zsh = needs("zsh")
    path = tmp_path / "_overnight"
    path.write_text(script("zsh", capsys))
    checked = run([zsh, "-n", str(path)])
    assert checked.returncode == 0, checked.stderr


def test_the_fish_script_is_valid_and_completes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fish = needs("fish")
    path = tmp_path / "overnight.fish"
    path.write_text(script("fish", capsys))
    checked = run([fish, "-n", str(path)])
    assert checked.returncode == 0, checked.stderr

    def completes(line: str) -> dict[str, str]:
        done = run([fish, "--no-config", "-c", f"source {path}; complete -C '{line}'"])
        assert done.returncode == 0, done.stderr
        rows = (row.partition("\t") for row in done.stdout.splitlines())
        return {word: help_text for word, _, help_text in rows}

    top = completes("overnight ")
    assert set(HANDLERS) <= set(top)
    assert top["run"] == "start a night from a spec file"
    assert set(completes("overnight fleet ")) == {
        "worker",
        "submit",
        "schedule",
        "status",
        "report",
    }
    # ``status`` of the fleet is not the top-level ``status``: each has its own options
    assert "--database" in completes("overnight fleet status --")
    assert "--database" not in completes("overnight status --")
    assert {"bash", "zsh", "fish"} <= set(completes("overnight completion "))
    assert "--main-price-input" in completes("overnight estimate --main-price-i")
