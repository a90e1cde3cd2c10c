"""Fixtures of the telemetry tests: a local collector, and the secret a night must not leak."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.telemetry.collector import Collector
from tests.telemetry.nights import SECRET, SECRET_NAME


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector().start()
    yield c
    c.stop()


@pytest.fixture(autouse=True)
def _planted_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret-looking variable in the night's environment; no standard OTLP variable."""
    monkeypatch.setenv(SECRET_NAME, SECRET)
    for name in (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    ):
        monkeypatch.delenv(name, raising=False)
