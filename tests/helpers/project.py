"""A small real project to start nights on from the command line: a package with a planted
bug, its tests, and the `overnight` CLI run as a process of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.nights import cli_env, git, make_repo

#: The docs site's pages (mkdocs.yml): where the examples a test runs as written live.
DOCS = Path(__file__).resolve().parents[2] / "docs"
#: The page of the scripted model's complete example (its night.toml and turns.toml).
SCRIPTED_PAGE = "guides/scripted-model.md"

GOAL = "Make every test pass without editing the tests."

CALC = {
    "calc/__init__.py": "",
    "calc/ops.py": "def add(a, b):\n    return a - b\n",
    "tests/test_ops.py": (
        "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
    ),
}


def calc_repo(path: Path, extra: dict[str, str] | None = None) -> Path:
    """``calc``: ``add`` subtracts, and its one test says so; committed on main."""
    return make_repo(path, {**CALC, **(extra or {})})


def overnight(
    *args: str, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own, with the test's environment (its $OVERNIGHT_HOME), no
    model key."""
    env = cli_env()
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"):
        env.pop(key, None)
    return subprocess.run(
        [sys.executable, "-m", "overnight", *args],
        env=env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def home() -> Path:
    return Path(os.environ["OVERNIGHT_HOME"])


def branches(repo: Path) -> list[str]:
    return git(repo, "branch", "--format=%(refname:short)").split()


def worktrees(repo: Path) -> int:
    return len(git(repo, "worktree", "list", "--porcelain").split("\n\n"))


def doc_block(page: str, after: str, lang: str = "toml") -> str:
    """The first fenced ``lang`` block of the docs page ``page`` (under docs/) after the line
    ``after``."""
    text = (DOCS / page).read_text(encoding="utf-8")
    start = text.index(after)
    found = re.search(rf"```{lang}\n(.*?)```", text[start:], re.DOTALL)
    assert found is not None, f"no {lang} block after {after!r} in docs/{page}"
    return found.group(1)
