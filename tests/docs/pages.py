"""The docs as the tests read them: the README and the pages under docs/, their fenced blocks,
and the site mkdocs builds from them."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

#: A fenced block: its fence, its language word (possibly empty), its body, its closing fence
#: at the same indent.
FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.S | re.M
)


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: where it stands, its language, its text."""

    page: Path
    line: int
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """The README and every Markdown page of the site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def blocks(page: Path, lang: str | None = None) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        if lang is None or m.group("lang") == lang:
            line = text.count("\n", 0, m.start()) + 1
            found.append(Block(page, line, m.group("lang"), m.group("body")))
    return found


def all_blocks(lang: str) -> list[Block]:
    return [b for page in pages() for b in blocks(page, lang)]


def prose(page: Path) -> str:
    """The page's text outside its fenced blocks."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


def headings(text: str) -> list[str]:
    """The ATX headings of Markdown text outside fenced blocks, without their ``#`` marks
    or a trailing ``{#anchor}``."""
    found = []
    for line in FENCE.sub("", text).splitlines():
        m = re.match(r"#{1,6} (.*?)\s*(\{#[^}]*\})?\s*$", line)
        if m:
            found.append(m.group(1))
    return found


def require_mkdocs() -> None:
    """mkdocs-material (the docs extra) must be installed: skip without it, but fail under
    CI=true, where .ci/run installs it."""
    if importlib.util.find_spec("mkdocs") and importlib.util.find_spec("material"):
        return
    if os.environ.get("CI") == "true":
        pytest.fail("mkdocs-material is not installed; under CI=true it must be (see .ci/run)")
    pytest.skip("mkdocs-material is not installed (scripts/setup --docs)")


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``site``, as CI runs it."""
    require_mkdocs()
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
