"""Whether a night exports spans, and the objects that do it.

Without the ``otel`` extra a ``[telemetry]`` section is a ``ConfigError`` naming the install
command; an ``OTEL_EXPORTER_OTLP_*`` variable alone (set for other programs) then exports
nothing and changes nothing.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from overnight.config.spec import ModelSpec
from overnight.config.telemetry import ENDPOINT_VARIABLES, TelemetrySpec
from overnight.core.errors import ConfigError
from overnight.telemetry.content import ContentTap

if TYPE_CHECKING:
    from overnight.telemetry.spans import NightSpans

log = logging.getLogger(__name__)

INSTALL = "pip install 'overnight[otel]'"

#: What the extra brings; all of it is needed.
SDK_MODULES = (
    "opentelemetry.sdk.trace",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
)

Listener = Callable[[dict[str, Any]], None]


def section_given(telemetry: TelemetrySpec, *, written: bool) -> bool:
    """Whether the spec itself asks for telemetry (more than an environment variable).
    ``written``: the spec has a ``[telemetry]`` table, even one that sets nothing."""
    t = telemetry
    if t.otlp_endpoint is not None or t != TelemetrySpec():
        return True
    # a section written in night.toml sets only some fields; spec.json (a resume) sets all
    return written and set(t.model_fields_set) != set(TelemetrySpec.model_fields)


def sdk_installed() -> bool:
    try:
        for name in SDK_MODULES:
            importlib.import_module(name)
    except ImportError:
        return False
    return True


def exports(telemetry: TelemetrySpec) -> bool:
    """Whether this night sends spans: an endpoint, and the SDK to send with."""
    return telemetry.endpoint() is not None and sdk_installed()


def check_telemetry(telemetry: TelemetrySpec, *, written: bool) -> None:
    """A ``ConfigError`` (nothing written yet) for telemetry the spec asks for and this
    installation cannot do, or an endpoint that is no URL. ``written``: the spec has a
    ``[telemetry]`` table (``section_given``)."""
    t = telemetry
    if not t.enabled:
        return
    asked = section_given(t, written=written)
    if not asked and t.endpoint() is None:
        return
    installed = sdk_installed()
    if not installed and not asked:
        return  # a variable set for other programs: nothing to export with, nothing asked
    if not installed:
        raise ConfigError(
            "telemetry",
            "exporting the night needs the OpenTelemetry SDK and its OTLP/HTTP exporter, "
            "which are not installed",
            f"{INSTALL}, or remove the [telemetry] section",
        )
    endpoint = t.endpoint()
    if endpoint is None:
        if t.otlp_endpoint is None and asked:
            raise ConfigError(
                "telemetry.otlp_endpoint",
                "[telemetry] is set but names no collector, and no "
                f"{' or '.join(ENDPOINT_VARIABLES)} is set",
                'set otlp_endpoint = "http://localhost:4318", or enabled = false',
            )
        return
    parts = urlsplit(endpoint)
    if t.otlp_endpoint is None and (parts.scheme not in ("http", "https") or not parts.netloc):
        variable = next(v for v in ENDPOINT_VARIABLES if os.environ.get(v, "").strip())
        raise ConfigError(
            variable,
            f"{os.environ[variable]!r} is not an http:// or https:// URL",
            "set it to the collector's URL, e.g. http://localhost:4318",
        )


def content_tap(telemetry: TelemetrySpec) -> ContentTap | None:
    """Where prompts and tool results are caught, when the night exports them."""
    return ContentTap() if telemetry.content and exports(telemetry) else None


def open_spans(
    telemetry: TelemetrySpec,
    *,
    model: ModelSpec | None,
    run_id: str,
    branch: str,
    resumes: int,
    goal: str,
    tap: ContentTap | None,
) -> NightSpans | None:
    """The night's spans, begun now; None when nothing is exported. ``model``: the night's
    ``[model]``, whose provider the spans name."""
    endpoint = telemetry.endpoint()
    if endpoint is None or not sdk_installed():
        return None
    from overnight.telemetry.spans import NightSpans, Settings

    settings = Settings(
        endpoint=endpoint,
        content=telemetry.content,
        service_name=telemetry.service_name,
        export_timeout_s=telemetry.export_timeout_s,
        provider=model.provider if model is not None else "none",
    )
    try:
        return NightSpans(
            settings, run_id=run_id, branch=branch, resumes=resumes, goal=goal, tap=tap
        )
    except Exception:  # an exporter that cannot be set up is no reason to lose the night
        log.warning("the night's spans cannot be exported", exc_info=True)
        return None


def listening(listener: Listener | None, spans: NightSpans | None) -> Listener | None:
    """``listener``, with the spans told of every record first."""
    if spans is None:
        return listener
    observe = spans.observe

    def both(record: dict[str, Any]) -> None:
        observe(record)
        if listener is not None:
            listener(record)

    return both
