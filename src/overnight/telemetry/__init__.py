"""OpenTelemetry export of a night (``[telemetry]``, the ``otel`` extra).

Only ``overnight.telemetry.spans`` imports the OpenTelemetry SDK, and only when a night exports;
without the extra the rest of overnight never imports it.
"""
