"""The night as OpenTelemetry spans, built from its trace records as they are written.

One span for the night; one per task attempt under it; one per model call and one per tool
call under the attempt they happened in (the harness's own calls outside a task, planning,
drift, the summary and the goal predicate, under the night). A decision, a retry or a warning
is an event on the span it happened in.

A span ends when its record arrives (the record is written as the call returns) and starts
that long before, as the night's clock measured it, never before its parent. A tool call
whose server may join the trace asks for its span's W3C trace context before the call
(``tool_call_context``): the span id is chosen then, and the span made from the call's record
gets it. Spans are sent
by a background exporter with a short timeout: a collector that is down, refuses or hangs
costs the night nothing but the bounded wait at its end, and never changes what it does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace as otel
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from overnight.store.result import TerminalResult
from overnight.telemetry import attributes as attrs
from overnight.telemetry.content import ContentTap
from overnight.version import __version__

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    endpoint: str
    content: bool
    service_name: str
    export_timeout_s: float
    provider: str
    """The model provider's name (``gen_ai.provider.name``)."""


class _Ids(RandomIdGenerator):
    """Random ids, except the one span id set aside for the span being started."""

    def __init__(self) -> None:
        self.next_span_id: int | None = None

    def generate_span_id(self) -> int:
        chosen, self.next_span_id = self.next_span_id, None
        return chosen if chosen is not None else super().generate_span_id()


@dataclass
class Attempt:
    task: str
    span: Span
    start_ns: int


class NightSpans:
    """Spans of one night's process (a resume is a night of its own, with its own trace id)."""

    def __init__(
        self,
        settings: Settings,
        *,
        run_id: str,
        branch: str,
        resumes: int,
        goal: str,
        tap: ContentTap | None = None,
    ) -> None:
        self.settings = settings
        self.tap = tap
        timeout = settings.export_timeout_s
        self._processor = BatchSpanProcessor(
            OTLPSpanExporter(endpoint=settings.endpoint, timeout=timeout),
            export_timeout_millis=timeout * 1000,
        )
        resource = Resource.create(
            {"service.name": settings.service_name, "service.version": __version__}
        )
        # Not at interpreter exit: an unreachable collector would hold the process there.
        self._ids = _Ids()
        self._reserved: dict[str, int] = {}
        """Per tool name, the span id its next call's span was promised."""
        self._provider = TracerProvider(
            resource=resource, shutdown_on_exit=False, id_generator=self._ids
        )
        self._provider.add_span_processor(self._processor)
        self._tracer = self._provider.get_tracer("overnight", __version__)
        self._lock = threading.Lock()
        self.start_ns = time.time_ns()
        night: attrs.Attributes = {
            "overnight.run_id": run_id,
            "overnight.branch": branch,
            "overnight.resumes": resumes,
        }
        if settings.content:
            night["overnight.goal"] = attrs.clip(goal)
        self.night = self._tracer.start_span(
            "night", attributes=night, start_time=self.start_ns, kind=otel.SpanKind.INTERNAL
        )
        self.attempt: Attempt | None = None
        self.closed = False

    # -- records ---------------------------------------------------------------------------

    def tool_call_context(self, tool: str) -> dict[str, str]:
        """The W3C trace context (``traceparent``, and ``tracestate`` when there is one) of
        the span the coming call of ``tool`` will be: its span id is chosen now and given to
        that span when the call's record arrives. Empty once closed, or if anything fails."""
        try:
            with self._lock:
                if self.closed:
                    return {}
                night = self.night.get_span_context()
                span_id = RandomIdGenerator().generate_span_id()
                self._reserved[tool] = span_id
            promised = SpanContext(
                trace_id=night.trace_id,
                span_id=span_id,
                is_remote=False,
                trace_flags=night.trace_flags,
                trace_state=night.trace_state,
            )
            carrier: dict[str, str] = {}
            TraceContextTextMapPropagator().inject(
                carrier, context=otel.set_span_in_context(NonRecordingSpan(promised))
            )
            return carrier
        except Exception:
            log.debug("no trace context for a tool call", exc_info=True)
            return {}

    def observe(self, record: Mapping[str, Any]) -> None:
        """Take one trace record. Never raises: telemetry must not change the night."""
        try:
            with self._lock:
                if not self.closed:
                    self._take(record, time.time_ns())
        except Exception:  # whatever went wrong, the night goes on
            log.debug("a trace record could not become a span", exc_info=True)

    def _take(self, record: Mapping[str, Any], now: int) -> None:
        kind = record.get("kind")
        content = self.settings.content
        if kind == "task":
            self._task_event(record, now)
        elif kind == "model_call":
            self._model_call(record, now)
        elif kind == "tool_call":
            self._tool_call(record, now)
        elif kind == "decision":
            self._decision(record, now)
        else:
            name, fields = attrs.record_event(record, content)
            self._parent_of(record).add_event(name, fields, timestamp=now)

    def _task_event(self, record: Mapping[str, Any], now: int) -> None:
        task = str(record.get("task", ""))
        if record.get("event") == "started":
            self._end_attempt(now)
            attempt = record.get("attempt")
            fields: attrs.Attributes = {"overnight.task.id": task}
            if isinstance(attempt, int):
                fields["overnight.task.attempt"] = attempt
            span = self._tracer.start_span(
                f"task {task}",
                context=otel.set_span_in_context(self.night),
                attributes=fields,
                start_time=now,
            )
            self.attempt = Attempt(task, span, now)
            return
        span = self._parent_of(record)
        if record.get("event") == "verified" and record.get("outcome") is not None:
            span.set_attribute("overnight.verify.outcome", str(record["outcome"]))
        _, fields = attrs.record_event(record, self.settings.content)
        span.add_event(f"task {record.get('event')}", fields, timestamp=now)

    def _model_call(self, record: Mapping[str, Any], now: int) -> None:
        fields = attrs.model_call(record, self.settings.provider, self.settings.content)
        if self.attempt is not None:
            fields["overnight.task.id"] = self.attempt.task
        prompt = self.tap.take_prompt() if self.tap is not None else None
        if prompt is not None and self.settings.content:
            fields.update(attrs.request_content(prompt.system, prompt.messages))
        name = f"chat {record.get('model', '')}".strip()
        span = self._child(name, record, now, fields, kind=otel.SpanKind.CLIENT)
        if record.get("error"):
            span.set_status(Status(StatusCode.ERROR, self._text(record.get("error"))))
        span.end(end_time=now)

    def _tool_call(self, record: Mapping[str, Any], now: int) -> None:
        tool = str(record.get("tool", ""))
        parent = self._parent_of(record)
        if tool == "executor":  # the agent's whole turn: the attempt span is it
            parent.set_attribute("overnight.executor.status", str(record.get("status", "")))
            if self.settings.content and record.get("summary"):
                parent.set_attribute("overnight.executor.summary", str(record["summary"]))
            return
        fields = attrs.tool_call(record, self.settings.content)
        exchange = self.tap.take_tool(tool) if self.tap is not None else None
        if exchange is not None and self.settings.content:
            fields.update(attrs.tool_content(exchange.arguments, exchange.result))
        if tool == "verify" and parent is not self.night:
            for key in ("exit_code", "timed_out"):
                if record.get(key) is not None:
                    parent.set_attribute(f"overnight.verify.{key}", record[key])
        if tool == "predicate" and record.get("met") is not None:
            self.night.set_attribute("overnight.goal_met", bool(record["met"]))
        self._ids.next_span_id = self._reserved.pop(tool, None)
        try:
            span = self._child(f"execute_tool {tool}", record, now, fields)
        finally:
            self._ids.next_span_id = None
        if record.get("error") is True or record.get("refused"):
            span.set_status(Status(StatusCode.ERROR, self._text(record.get("refused"))))
        span.end(end_time=now)

    def _decision(self, record: Mapping[str, Any], now: int) -> None:
        decision = record.get("decision")
        span = self._parent_of(record)
        name, fields = attrs.record_event(record, self.settings.content)
        span.add_event(name, fields, timestamp=now)
        if decision == "stop" and record.get("reason"):
            self.night.set_attribute("overnight.stop_decision", str(record["reason"]))
        if self.attempt is None or span is not self.attempt.span:
            return
        if decision == "task_finished":
            outcome = str(record.get("outcome", ""))
            span.set_attribute("overnight.task.outcome", outcome)
            for key in ("command_exit_code", "command_timed_out"):
                if record.get(key) is not None:
                    span.set_attribute(f"overnight.{key}", record[key])
            if outcome == "done":
                span.set_status(Status(StatusCode.OK))
            self._end_attempt(now)
        elif decision == "out_of_time":
            span.set_attribute("overnight.task.outcome", "out_of_time")
            self._end_attempt(now)

    # -- the tree --------------------------------------------------------------------------

    def _parent_of(self, record: Mapping[str, Any]) -> Span:
        """The open attempt when the record belongs to it (or names no task), else the night."""
        task = record.get("task")
        if self.attempt is not None and (task is None or task == self.attempt.task):
            return self.attempt.span
        return self.night

    def _child(
        self,
        name: str,
        record: Mapping[str, Any],
        now: int,
        fields: attrs.Attributes,
        kind: otel.SpanKind = otel.SpanKind.INTERNAL,
    ) -> Span:
        parent = self._parent_of(record)
        floor = self.start_ns
        if self.attempt is not None and parent is self.attempt.span:
            floor = self.attempt.start_ns
        start = max(floor, now - _duration_ns(record))
        return self._tracer.start_span(
            name,
            context=otel.set_span_in_context(parent),
            attributes=fields,
            start_time=min(start, now),
            kind=kind,
        )

    def _end_attempt(self, now: int) -> None:
        if self.attempt is not None:
            self.attempt.span.end(end_time=now)
            self.attempt = None

    def _text(self, value: Any) -> str | None:
        """An error's text as a status description, with content only."""
        if not self.settings.content or not value:
            return None
        return attrs.clip(str(value), 1000)

    # -- the end ---------------------------------------------------------------------------

    def close(self, result: TerminalResult | None) -> None:
        """End every open span with the night's ending, and send what is left: waits at most
        about twice the export timeout, whatever the collector does. Never raises."""
        try:
            with self._lock:
                if self.closed:
                    return
                self.closed = True
                now = time.time_ns()
                self._end_attempt(now)
                self._ending(result)
                self.night.end(end_time=now)
        except Exception:
            log.debug("the night span could not be ended", exc_info=True)
        done = threading.Thread(target=self._shutdown, name="overnight-telemetry", daemon=True)
        done.start()
        done.join(2 * self.settings.export_timeout_s + 0.5)

    def _ending(self, result: TerminalResult | None) -> None:
        span = self.night
        if result is None:
            span.set_attribute("overnight.ending", "none")
            span.set_status(Status(StatusCode.ERROR, "the night ended without a result"))
            return
        span.set_attributes(
            {
                "overnight.ending": result.ending,
                "overnight.stop_reason": result.stop_reason,
                "overnight.exit_code": result.exit_code,
                "process.exit.code": result.exit_code,
                "overnight.status": result.status,
                "overnight.resumable": result.resumable,
                "overnight.tasks.verified": len(result.verified),
                "overnight.cost_usd": float(result.spend.total_usd),
            }
        )
        if result.status == "FAILURE" or result.exit_code == 4:
            span.set_status(Status(StatusCode.ERROR, result.stop_reason))
        elif result.status == "SUCCESS":
            span.set_status(Status(StatusCode.OK))

    def _shutdown(self) -> None:
        try:
            self._processor.shutdown()  # type: ignore[no-untyped-call]
        except Exception:
            log.debug("the span exporter did not shut down cleanly", exc_info=True)


def _duration_ns(record: Mapping[str, Any]) -> int:
    """How long the call took, on the night's clock: from its start (``t_start``) to its
    record (``t``), or its own ``seconds``."""
    t, started = record.get("t"), record.get("t_start")
    seconds: Any = None
    if isinstance(t, int | float) and isinstance(started, int | float):
        seconds = t - started
    elif isinstance(record.get("seconds"), int | float):
        seconds = record["seconds"]
    if seconds is None or seconds <= 0:
        return 0
    return int(seconds * 1e9)
