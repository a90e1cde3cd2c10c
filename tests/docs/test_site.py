"""The docs site builds with ``mkdocs build --strict``, as CI builds it; the strict build does
fail on a broken link; and the built start page renders in headless Chromium with its title
and the navigation's sections, a screenshot kept (in $OVERNIGHT_SCREENSHOTS when set)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.docs.pages import DOCS, ROOT, mkdocs_build
from tests.helpers.browser import browse, chromium_binary, png_size, screenshot_folder

CONFIG = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = mkdocs_build(ROOT / "mkdocs.yml", out)
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def test_the_site_builds_strict_with_every_page_of_the_nav(site: Path) -> None:
    pages = sorted(p.relative_to(DOCS).with_suffix(".html") for p in DOCS.rglob("*.md"))
    assert len(pages) > 30
    for page in pages:
        assert (site / page).is_file(), page
    assert (site / "night.schema.json").read_bytes() == (DOCS / "night.schema.json").read_bytes()


def test_the_strict_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(DOCS, copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    page = copy / "docs" / "guides" / "audit.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [gone](no-such-page.md).\n")
    built = mkdocs_build(copy / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    assert "no-such-page.md" in built.stdout + built.stderr


def nav_sections() -> list[str]:
    """The titles of the navigation's top level, from mkdocs.yml."""
    return [next(iter(item)) for item in CONFIG["nav"]]


def test_the_start_page_renders_with_its_title_and_the_navigation(
    site: Path, tmp_path: Path
) -> None:
    chromium = chromium_binary()
    start = (site / "index.html").as_uri()
    seen = browse(chromium, tmp_path / "profile", "--dump-dom", start)
    assert seen.returncode == 0, seen.stderr[-2000:]
    dom = seen.stdout
    assert re.search(r"<title>\s*overnight\s*</title>", dom)
    assert CONFIG["site_name"] == "overnight"
    primary = dom[dom.index('class="md-nav md-nav--primary"') :]
    titles = re.findall(r'<span class="md-ellipsis">\s*([^<]*?)\s*</span>', primary)
    assert nav_sections() == ["Home", "Start", "Guides", "Concepts", "Reference", "Contributing"]
    for section in nav_sections():
        assert section in titles, (section, titles[:20])
    assert 'href="start/install.html"' in primary and 'href="reference/night-toml.html"' in primary
    assert seen.console() == []  # the scripts ran without an error, search index included

    shot = screenshot_folder(tmp_path) / "docs-start-page.png"
    shot.unlink(missing_ok=True)
    taken = browse(
        chromium, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,900", start
    )
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert png_size(shot) == (1280, 900)
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
