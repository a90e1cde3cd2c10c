"""``[telemetry]``: the endpoint from the spec or the standard variables, the spec's checks,
and the extra: without it a ``[telemetry]`` section is refused before anything is written,
and nothing else of overnight ever imports OpenTelemetry."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from overnight.config.telemetry import TelemetrySpec, traces_url
from overnight.core.errors import ConfigError
from tests.helpers.nights import cli_env, make_spec, run_night, spec_data, write_spec
from tests.telemetry.collector import Collector
from tests.telemetry.nights import night_repo, night_spec, scripted_model


def test_the_variable_is_the_fallback_when_the_spec_names_no_endpoint(
    tmp_path: Path, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    spec = night_spec(night_repo(tmp_path))  # no [telemetry] at all
    _, result = run_night(spec, tmp_path / "run", model=scripted_model())
    assert result.ending == "GOAL_MET"
    assert set(collector.paths) == {"/v1/traces"}
    (night,) = [s for s in collector.spans() if s.name == "night"]
    assert night.attrs["overnight.ending"] == "GOAL_MET"


def test_the_spec_endpoint_wins_over_the_variable(
    tmp_path: Path, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = Collector().start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", other.url)
        spec = night_spec(night_repo(tmp_path), {"otlp_endpoint": collector.url})
        run_night(spec, tmp_path / "run", model=scripted_model())
        assert collector.spans()
        assert other.posts == 0
    finally:
        other.stop()


def test_enabled_false_exports_nothing_even_with_the_variable(
    tmp_path: Path, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    spec = night_spec(night_repo(tmp_path), {"enabled": False})
    _, result = run_night(spec, tmp_path / "run", model=scripted_model())
    assert result.ending == "GOAL_MET"
    assert collector.posts == 0


def test_endpoints_resolve_to_the_traces_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert traces_url("http://h:4318") == "http://h:4318/v1/traces"
    assert traces_url("http://h:4318/") == "http://h:4318/v1/traces"
    assert traces_url("http://h:4318/v1/traces") == "http://h:4318/v1/traces"
    assert traces_url("https://h/otlp") == "https://h/otlp/v1/traces"
    assert TelemetrySpec().endpoint() is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318")
    assert TelemetrySpec().endpoint() == "http://base:4318/v1/traces"
    # the signal's own variable is a full URL, and wins
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/custom")
    assert TelemetrySpec().endpoint() == "http://t:1/custom"
    assert TelemetrySpec(otlp_endpoint="http://s:2").endpoint() == "http://s:2/v1/traces"
    assert TelemetrySpec(otlp_endpoint="http://s:2", enabled=False).endpoint() is None


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"endpoint": "http://localhost:4318"}, "telemetry.endpoint"),  # a typo
        ({"otlp_endpoint": "localhost:4318"}, "telemetry.otlp_endpoint"),
        ({"otlp_endpoint": "ftp://h/x"}, "telemetry.otlp_endpoint"),
        ({"export_timeout_s": 0}, "telemetry.export_timeout_s"),
    ],
)
def test_a_bad_section_is_a_config_error_naming_the_field(
    repo: Path, section: dict[str, object], field: str
) -> None:
    with pytest.raises(ConfigError) as err:
        make_spec(repo, telemetry=section)
    assert err.value.field == field


def test_a_section_without_any_endpoint_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    spec = night_spec(night_repo(tmp_path), {"content": True})
    with pytest.raises(ConfigError) as err:
        run_night(spec, tmp_path / "run", model=scripted_model())
    assert err.value.field == "telemetry.otlp_endpoint"
    assert not (tmp_path / "run").exists()


def test_a_variable_that_is_no_url_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")
    spec = night_spec(night_repo(tmp_path))
    with pytest.raises(ConfigError) as err:
        run_night(spec, tmp_path / "run", model=scripted_model())
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in err.value.field
    assert not (tmp_path / "run").exists()


#: Runs the CLI as if the ``otel`` extra were not installed, and says whether any
#: OpenTelemetry module was imported.
WITHOUT_EXTRA = textwrap.dedent(
    """
    import runpy, sys

    class NoOtel:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoOtel())
    sys.argv = ["overnight", *sys.argv[1:]]
    try:
        runpy.run_module("overnight", run_name="__main__")
    finally:
        imported = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
        print("OTEL-IMPORTED:", imported, file=sys.stderr)
    """
)


def command_night(tmp_path: Path, **sections: object) -> Path:
    repo = night_repo(tmp_path)
    data = spec_data(
        repo,
        model=False,
        predicate="test -f made.txt",
        tasks=[{"id": "make", "command": "touch made.txt", "verify": "test -f made.txt"}],
        **sections,
    )
    return write_spec(tmp_path / "night.toml", data)


def run_without_extra(
    tmp_path: Path, spec: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            WITHOUT_EXTRA,
            "run",
            str(spec),
            "--quiet",
            "--run-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        env={**cli_env(), **(env or {})},
        timeout=300,
    )


def test_without_the_extra_a_telemetry_section_is_a_config_error(tmp_path: Path) -> None:
    spec = command_night(tmp_path, telemetry={"otlp_endpoint": "http://127.0.0.1:9"})
    done = run_without_extra(tmp_path, spec)
    assert done.returncode == 64, done.stderr
    assert "pip install 'overnight[otel]'" in done.stderr
    assert "telemetry" in done.stderr
    assert not (tmp_path / "run").exists()


def test_without_the_extra_a_night_without_telemetry_runs_and_never_imports_it(
    tmp_path: Path,
) -> None:
    spec = command_night(tmp_path)
    # a variable set for other programs (even one that is no URL) does not make a night
    # without the extra fail
    done = run_without_extra(tmp_path, spec, {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"})
    assert done.returncode == 0, done.stderr
    assert "OTEL-IMPORTED: []" in done.stderr


def test_a_night_without_telemetry_imports_no_opentelemetry(tmp_path: Path) -> None:
    """With the extra installed too: only a night that exports loads the SDK."""
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from tests.helpers.nights import make_repo, make_spec, run_night
        root = Path({str(tmp_path)!r})
        repo = make_repo(root / "repo")
        spec = make_spec(repo, model=False, predicate="test -f x",
                         tasks=[{{"id": "x", "command": "touch x", "verify": "test -f x"}}])
        _, result = run_night(spec, root / "run")
        print(result.ending, sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
        env={**cli_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": ""},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["GOAL_MET", "[]"]
