"""OpenTelemetry traces: our own tracer provider (never the SDK's process-global one, which can be set only once),
built from the standard OTEL_* variables when OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set, or
installed by `tracing_install` (tests, embedders). Without one `tracer()` is None and no span is made at all.

A run is the root of its own trace, and its trace id is the run id's UUID (its root span id the UUID's low 64 bits),
so the IDE shows a run's trace id, and another agent's run links to the run that messaged it, with nothing stored.
Spans leave through the SDK's BatchSpanProcessor, behind a bound: a span that would overflow its queue is dropped
and counted (agents_ide_trace_spans_dropped_total), as is a batch the collector refused; a step never waits."""

import os
import threading
import uuid
from collections.abc import Sequence
from contextvars import ContextVar

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import SpanContext, TraceFlags, Tracer

from core.telemetry import metrics

SCOPE = "agents_ide"
_DEFAULT_QUEUE = 2048  # the SDK's default (OTEL_BSP_MAX_QUEUE_SIZE overrides it)
_forced: ContextVar[tuple[int, int] | None] = ContextVar("telemetry_forced_ids", default=None)
_lock = threading.Lock()
_setup_lock = threading.Lock()  # one thread sets tracing up from the settings; the others wait for it
_state: dict = {"configured": False, "provider": None, "tracer": None, "capture_content": False}


def run_ids(run_id: str) -> tuple[int, int] | None:
    """The trace id and root span id of a run's trace, from its `run-<uuid>` id (None for an id of another form)."""
    try:
        value = uuid.UUID(run_id.removeprefix("run-")).int
    except ValueError:
        return None
    return value, (value & 0xFFFFFFFFFFFFFFFF) or 1


def trace_id_hex(run_id: str) -> str:
    """A run's trace id as trace UIs show it (32 hex digits), "" for an id of another form."""
    found = run_ids(run_id)
    return f"{found[0]:032x}" if found else ""


def run_span_context(run_id: str) -> SpanContext | None:
    """The span context of a run's root span (for links from other agents' runs)."""
    found = run_ids(run_id)
    if found is None:
        return None
    return SpanContext(found[0], found[1], is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))


class _RunIds(IdGenerator):
    """Random ids, except a run's root span: its trace and span ids come from the run id (`forced`)."""

    def __init__(self):
        self.random = RandomIdGenerator()

    def generate_trace_id(self) -> int:
        forced = _forced.get()
        return forced[0] if forced else self.random.generate_trace_id()

    def generate_span_id(self) -> int:
        forced = _forced.get()
        return forced[1] if forced else self.random.generate_span_id()

    def is_trace_id_random(self) -> bool:
        return True  # a UUID4's low 56 bits are random


def forced(run_id: str):
    """Set the ids the next root span gets (a run's); returns the token to reset them with."""
    return _forced.set(run_ids(run_id))


def forced_reset(token) -> None:
    _forced.reset(token)


class _Counted(SpanExporter):
    """The exporter, counting what it could not deliver and telling the bound what left the queue."""

    def __init__(self, exporter: SpanExporter, bound: "_Bounded"):
        self.exporter, self.bound = exporter, bound

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.exporter.export(spans)
        finally:
            self.bound.left(len(spans))
        if result is not SpanExportResult.SUCCESS:
            metrics.SPANS_DROPPED.labels("export_failed").inc(len(spans))
        return result

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


class _Bounded(SpanProcessor):
    """BatchSpanProcessor behind a count of the spans it holds: beyond `limit` a span is dropped here and counted
    (the SDK's own queue would drop it silently)."""

    def __init__(self, exporter: SpanExporter, limit: int):
        self.limit, self.held, self.lock = limit, 0, threading.Lock()
        self.batch = BatchSpanProcessor(
            _Counted(exporter, self), max_queue_size=limit, max_export_batch_size=min(limit, 512)
        )

    def left(self, count: int) -> None:
        with self.lock:
            self.held = max(0, self.held - count)

    def on_start(self, span, parent_context=None) -> None:
        self.batch.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        with self.lock:
            full = self.held >= self.limit
            if not full:
                self.held += 1
        if full:
            metrics.SPANS_DROPPED.labels("queue_full").inc()
            return
        self.batch.on_end(span)

    def shutdown(self) -> None:
        self.batch.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.batch.force_flush(timeout_millis)


def provider_build(exporter: SpanExporter | None = None, *, max_queue_size: int | None = None) -> TracerProvider:
    """A tracer provider exporting in batches through `exporter` (default: OTLP over HTTP, configured by the
    standard OTEL_EXPORTER_OTLP_* variables), with the run-derived ids; the resource from OTEL_SERVICE_NAME and
    OTEL_RESOURCE_ATTRIBUTES (service.name defaults to agents-ide); sampling from OTEL_TRACES_SAMPLER."""
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # only when tracing

        exporter = OTLPSpanExporter()
    limit = max_queue_size or int(os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE") or _DEFAULT_QUEUE)
    named = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "agents-ide"}
    provider = TracerProvider(resource=Resource.create(named), id_generator=_RunIds())
    provider.add_span_processor(_Bounded(exporter, limit))
    return provider


def tracing_install(provider: TracerProvider | None, *, capture_content: bool | None = None) -> TracerProvider | None:
    """Trace with `provider` from now on (None: stop tracing); returns the provider it replaces (not shut down).
    `capture_content`: put prompts and completions on model-call spans (default: the setting)."""
    from django.conf import settings  # read when tracing is set up, never at import

    with _lock:
        before = _state["provider"]
        _state.update(
            configured=True,
            provider=provider,
            tracer=provider.get_tracer(SCOPE) if provider is not None else None,
            capture_content=settings.OTEL_CAPTURE_MESSAGE_CONTENT if capture_content is None else capture_content,
        )
    return before


def tracer() -> Tracer | None:
    """The tracer, or None when tracing is off. The first call sets tracing up from the settings."""
    if not _state["configured"]:
        from django.conf import settings  # read when first traced, never at import

        with _setup_lock:
            if not _state["configured"]:
                tracing_install(provider_build() if settings.OTEL_TRACES_ENABLED else None)
    return _state["tracer"]


def capture_content() -> bool:
    return _state["capture_content"]
