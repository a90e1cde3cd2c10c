"""The HTML report in a real browser: headless Chromium loads it, builds the plots and logs
nothing to the console; screenshots are kept in $OVERNIGHT_SCREENSHOTS when it is set (for a
person to look at), else under the test's temporary directory.

Skipped when Chromium is not installed, except under ``CI=true``, where that is a failure
(.ci/run installs it). Every Chromium is bounded by a timeout and its whole process group is
killed afterwards, so no browser process outlives its test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from overnight.cli.main import main
from tests.helpers.browser import browse, chromium_binary, png_size, screenshot_folder
from tests.report.runs import EVIL_TITLE


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_binary()


def write_report(run_dir: Path, out: Path) -> Path:
    assert main(["report", str(run_dir), "--html", "--out", str(out)]) == 0
    return out


def test_the_page_loads_with_the_ending_and_the_plots_and_a_quiet_console(
    chromium: str, full_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = write_report(full_run, tmp_path / "report.html")
    capsys.readouterr()
    seen = browse(chromium, tmp_path / "profile", "--dump-dom", report.as_uri())
    assert seen.returncode == 0, seen.stderr[-2000:]
    dom = seen.stdout
    assert '<span class="ending">QUEUE_EMPTY_GOAL_UNMET</span>' in dom
    assert "<dt>exit code</dt><dd>3</dd>" in dom
    assert dom.count("<svg") >= 5  # two gauges, the spend chart, its zoom, the drift chart
    for plot in ('class="chart spend-chart"', 'class="chart drift-chart"', "<polyline"):
        assert plot in dom, plot
    # The hostile title is text in the built DOM, never an element.
    assert "<script" not in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom and EVIL_TITLE not in dom
    # The report has no script, so any console line at all is the browser complaining (a
    # blocked load, a policy violation, an error).
    assert seen.console() == []


@pytest.mark.parametrize(
    ("night", "name"),
    [("full_run", "report-full-night.png"), ("budget_run", "report-budget-exhausted.png")],
)
def test_screenshot_is_kept_as_an_artifact(
    chromium: str,
    night: str,
    name: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = write_report(request.getfixturevalue(night), tmp_path / "report.html")
    capsys.readouterr()
    shot = screenshot_folder(tmp_path) / name
    shot.unlink(missing_ok=True)
    seen = browse(
        chromium,
        tmp_path / "profile",
        f"--screenshot={shot}",
        "--window-size=1280,2400",
        report.as_uri(),
    )
    assert seen.returncode == 0, seen.stderr[-2000:]
    assert png_size(shot) == (1280, 2400)
    assert shot.stat().st_size > 30_000  # a rendered page, not a blank one
    assert seen.console() == []


def test_the_console_check_sees_what_a_page_logs(chromium: str, tmp_path: Path) -> None:
    """The check above is not vacuous: this Chromium does report console output on stderr."""
    page = tmp_path / "noisy.html"
    page.write_text(
        "<!DOCTYPE html><title>noisy</title><script>console.error('boom-1234')</script>",
        encoding="utf-8",
    )
    seen = browse(chromium, tmp_path / "profile", "--dump-dom", page.as_uri())
    assert seen.returncode == 0, seen.stderr[-2000:]
    assert any("boom-1234" in line for line in seen.console())
