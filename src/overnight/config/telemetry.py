"""The ``[telemetry]`` section: where the night's spans are exported (OpenTelemetry, OTLP/HTTP)."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: The standard variables read when the spec names no endpoint (the traces one wins).
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")

#: The OTLP/HTTP path of spans, appended to a base endpoint.
TRACES_PATH = "/v1/traces"


def _check_url(value: str, name: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{name} must be an http:// or https:// URL, e.g. http://localhost:4318")
    return value


class TelemetrySpec(BaseModel):
    """``[telemetry]``: where the night's OpenTelemetry spans go, and what they carry."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    otlp_endpoint: str | None = None
    """The OTLP/HTTP collector, e.g. ``http://localhost:4318`` (spans go to ``/v1/traces``
    under it; a URL already ending in ``/v1/traces`` is used as it is). Unset: the
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` environment
    variable; with neither, nothing is exported."""
    enabled: bool = True
    """False exports nothing, even when an ``OTEL_EXPORTER_OTLP_*`` variable is set."""
    content: bool = False
    """Also export what was said: prompts, model answers, tool arguments and results,
    summaries and error texts (secret values are redacted, as in the trace). Off, spans
    carry names, counts, tokens, costs, exit codes and outcomes only."""
    service_name: str = Field(default="overnight", min_length=1, max_length=200)
    """The ``service.name`` of the exported resource."""
    export_timeout_s: float = Field(default=2.0, gt=0, le=60)
    """Seconds one export may take (retries included) before its spans are dropped. A
    collector that is down, refusing or slow never changes the night; at the end at most
    about twice this is spent flushing."""

    @field_validator("otlp_endpoint")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else _check_url(value.strip(), "otlp_endpoint")

    def endpoint(self) -> str | None:
        """The full URL spans are POSTed to, or None when nothing is to be exported."""
        if not self.enabled:
            return None
        if self.otlp_endpoint is not None:
            return traces_url(self.otlp_endpoint)
        traces = os.environ.get(ENDPOINT_VARIABLES[0], "").strip()
        if traces:
            return traces  # the signal's own variable is the full URL
        base = os.environ.get(ENDPOINT_VARIABLES[1], "").strip()
        return traces_url(base) if base else None


def traces_url(base: str) -> str:
    """``base`` with the spans path appended, unless it already ends with it."""
    trimmed = base.rstrip("/")
    if trimmed.endswith(TRACES_PATH):
        return trimmed
    return trimmed + TRACES_PATH
