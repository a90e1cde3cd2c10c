"""The set-up scripts hold under ``set -o pipefail``: a pipeline whose reader may stop reading
early (``head``, ``grep -q``, ``sed ...q``, ``awk ... exit``) fails the script whenever the writer
is still writing when the reader closes the pipe, which happens by chance, one run in several.
One test runs ``scripts/system-deps`` many times; the other finds such pipelines by reading the
scripts."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_DEPS = ROOT / "scripts" / "system-deps"
RUNS = 200

#: What scripts/system-deps runs: bwrap and rg print their versions; a missing prlimit would
#: send it to apt-get, which a test must not do.
TOOLS = {"bwrap": "bubblewrap", "rg": "ripgrep", "prlimit": "util-linux"}


def require_tools() -> None:
    missing = [f"{tool} ({package})" for tool, package in TOOLS.items() if not shutil.which(tool)]
    if not missing:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"not installed, and CI must have them (scripts/setup): {', '.join(missing)}")
    pytest.skip(f"not installed: {', '.join(missing)}")


def expected_output() -> str:
    bwrap = subprocess.run(["bwrap", "--version"], capture_output=True, text=True, check=True)
    rg = subprocess.run(["rg", "--version"], capture_output=True, text=True, check=True)
    return bwrap.stdout + rg.stdout.splitlines()[0] + "\n"


def test_system_deps_succeeds_every_time() -> None:
    require_tools()
    expected = expected_output()
    assert expected.startswith("bubblewrap ") and "\nripgrep " in expected, expected
    failures: list[str] = []
    for run in range(RUNS):
        done = subprocess.run(
            [str(SYSTEM_DEPS)], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        if done.returncode != 0 or done.stdout != expected:
            failures.append(
                f"run {run}: exit {done.returncode}, stdout {done.stdout!r}, stderr {done.stderr!r}"
            )
    assert not failures, f"{len(failures)} of {RUNS} runs failed:\n" + "\n".join(failures[:5])


# A pipe: not `||`, not the `>|` redirection; `|&` pipes stderr too.
_PIPE = r"(?<![|>])\|(?!\|)&?\s*"
# Environment assignments, `command` or `exec` before the reader's name, and a path to it.
_PREFIX = r"(?:\w+=\S*\s+)*(?:(?:command|exec)\s+)?(?:\S*/)?"
_EARLY_READER = re.compile(
    _PIPE
    + _PREFIX
    + r"(?:"
    + r"head\b"
    # grep (and rg) stop at the first match with -q, -m, -l, -L, or their long names.
    + r"|(?:[ef]?grep|rg)\b[^|]*?\s(?:-[A-Za-z]*[qmlL]|--quiet|--silent|--max-count"
    + r"|--files-with(?:out)?-match)"
    # sed's q and Q commands quit (a letter on either side makes it part of a word).
    + r"|sed\b.*(?<![A-Za-z$\\])[qQ](?![A-Za-z])"
    + r"|awk\b.*\bexit\b"
    + r")"
)
_PIPEFAIL = re.compile(r"^\s*set\b[^#\n]*\bpipefail\b", re.MULTILINE)


def strip_comment(line: str) -> str:
    """The line without its comment: a `#` that starts a word outside quotes."""
    quote = ""
    escaped = False
    for i, char in enumerate(line):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] in " \t;&|("):
            return line[:i]
    return line


def early_reader_pipes(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each pipeline into a reader that may exit before its input ends.
    A command continued with a trailing `\\` or `|` is read as one line, numbered by its first.
    """
    found: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = strip_comment(raw).rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        if line.endswith("|") and not line.endswith("||"):
            pending += line + " "
            continue
        logical = pending + line
        pending = ""
        if _EARLY_READER.search(logical):
            found.append((start, logical.strip()))
    if pending and _EARLY_READER.search(pending):
        found.append((start, pending.strip()))
    return found


def pipefail_scripts() -> list[Path]:
    candidates = [p for p in sorted((ROOT / "scripts").rglob("*")) if p.is_file()]
    candidates.append(ROOT / ".ci" / "run")
    scripts = []
    for path in candidates:
        text = path.read_text(errors="replace")
        if "bash" in text.partition("\n")[0] and _PIPEFAIL.search(text):
            scripts.append(path)
    return scripts


@pytest.mark.parametrize(
    "line",
    [
        "rg --version | head -n 1",
        "v=$(rg --version | head -1)",
        "cmd |& head",
        "cmd | /usr/bin/head -c 10",
        "cmd | grep -q x",
        "cmd | grep -Eq 'a'",
        "cmd | grep -m1 x",
        "cmd | grep --quiet x",
        "cmd | grep -l x",
        "cmd | LC_ALL=C grep -q x",
        "cmd | sed 1q",
        "cmd | sed -n '1{p;q}'",
        "cmd | awk 'NR == 1 { print; exit }'",
        "cmd \\\n  | head -n 1",
        "cmd |\n  head -n 1",
    ],
)
def test_detector_finds_early_readers(line: str) -> None:
    assert [number for number, _ in early_reader_pipes(line)] == [1]


def test_detector_finds_the_line_that_failed_system_deps() -> None:
    # scripts/system-deps ended with this line and failed about one run in eight.
    original = "rg --version | head -n 1"
    text = SYSTEM_DEPS.read_text()
    before = text.count("\n") + 1
    assert early_reader_pipes(text + original + "\n") == [(before, original)]


@pytest.mark.parametrize(
    "line",
    [
        "command -v rg >/dev/null || want+=(ripgrep)",
        "found=$(ls -d /x/*/bin 2>/dev/null | sort -V | tail -1 || true)",
        "git ls-files -z | tar --null -T - -cf - | tar -xf - -C dir",
        "cmd | grep -c x",
        "cmd | grep -v quiet",
        "cmd | sed 's/quote/x/'",
        "cmd | awk '{ print $1 }'",
        "# rg --version | head -n 1",
        "rg_version=$(rg --version)  # not `rg --version | head -n 1`",
        "echo 'a # b' | sort",
    ],
)
def test_detector_passes_full_readers(line: str) -> None:
    assert early_reader_pipes(line) == []


def test_no_early_reader_pipes_under_pipefail() -> None:
    scripts = pipefail_scripts()
    names = {str(p.relative_to(ROOT)) for p in scripts}
    assert {"scripts/system-deps", "scripts/setup", ".ci/run"} <= names, names
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line}"
        for path in scripts
        for number, line in early_reader_pipes(path.read_text())
    ]
    assert not found, (
        "under set -o pipefail, a reader that may exit before its input ends fails the script "
        "by chance (the writer's broken pipe); capture the output first, then cut it:\n"
        + "\n".join(found)
    )
