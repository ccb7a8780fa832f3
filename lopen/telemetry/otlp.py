"""From Lopen's span and metric records to OTLP: the one module that imports OpenTelemetry.

``Span`` records become the SDK's ``ReadableSpan`` (built directly with Lopen's ids and the events'
times, never through a ``Tracer``) and ``Metric`` records become ``MetricsData``; both go to the
official OTLP/HTTP exporters (``OtlpHttpSink``) or, as OTLP JSON lines (the format the OpenTelemetry
Collector's ``otlpjsonfile`` receiver reads), to a file (``OtlpFileSink``).

A sink raises ``ExportFailed`` with a one-line reason instead of logging: the exporters' own log
records are captured here (never printed), so a caller can say it once, its own way.

Import this module only when something is exported: it costs about 0.1 s.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterable, Sequence
from typing import IO, Any

from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Gauge,
    Histogram,
    HistogramDataPoint,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.metrics.export import Metric as OtelMetric
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from lopen import __version__
from lopen.telemetry.metrics import HistogramPoint, Metric
from lopen.telemetry.settings import ExportSettings
from lopen.telemetry.spans import Span

__all__ = ["BATCH", "ExportFailed", "OtlpFileSink", "OtlpHttpSink", "Sink", "metrics_data", "readable_spans"]

BATCH = 512  # spans per export request
SCOPE = InstrumentationScope("lopen", __version__)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
_UNSET = Status(StatusCode.UNSET)


class ExportFailed(Exception):
    """An export did not reach its destination; ``str()`` is a one-line reason. ``refused``: the
    collector answered, with an HTTP error (e.g. Jaeger's 404 for metrics: it takes traces only)."""

    def __init__(self, reason: str, *, refused: bool = False) -> None:
        super().__init__(reason)
        self.refused = refused


def resource(service_name: str, instance: str) -> Resource:
    """``service.name``, ``service.version`` and ``service.instance.id`` over ``OTEL_RESOURCE_ATTRIBUTES``.

    The instance is the project, not the SDK's random per-process id: a session exported live and
    again by ``lopen trace`` must land in the same metric series (each session is its own series).
    """
    attributes = {"service.name": service_name, "service.version": __version__, "service.instance.id": instance}
    created = Resource.create(attributes)
    return _Resource(created.attributes, created.schema_url)


class _Resource(Resource):
    """A resource that hashes once: the OTLP encoder groups spans by resource, hashing it for every
    span (a JSON dump of its attributes each time) — a quarter of ``lopen trace``'s encoding time."""

    def __init__(self, attributes: Any, schema_url: str | None = None) -> None:
        super().__init__(attributes, schema_url)
        self._hash = Resource.__hash__(self)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return Resource.__eq__(self, other)


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def readable_spans(spans: Iterable[Span], where: Resource) -> list[ReadableSpan]:
    """The SDK's spans for ``spans``, with their own ids, parents and times."""
    out = []
    for span in spans:
        context = SpanContext(span.trace_id, span.span_id, is_remote=False, trace_flags=_SAMPLED)
        parent = SpanContext(span.trace_id, span.parent_id, is_remote=False, trace_flags=_SAMPLED)
        out.append(
            ReadableSpan(
                name=span.name,
                context=context,
                parent=parent if span.parent_id else None,
                resource=where,
                attributes=span.attributes,
                events=[Event(e.name, e.attributes, _ns(e.at)) for e in span.events],
                links=[Link(SpanContext(t, s, is_remote=True, trace_flags=_SAMPLED)) for t, s in span.links],
                kind=_KINDS[span.kind],
                status=Status(StatusCode.ERROR, span.status_message) if span.status == "error" else _UNSET,
                start_time=_ns(span.start),
                end_time=_ns(span.end),
                instrumentation_scope=SCOPE,
            )
        )
    return out


def metrics_data(metrics: Sequence[Metric], where: Resource) -> MetricsData:
    """The SDK's ``MetricsData`` for ``metrics`` (cumulative; points keep their own times)."""
    converted = []
    cumulative = AggregationTemporality.CUMULATIVE
    for metric in metrics:
        data: Any
        if metric.kind == "histogram":
            points = [
                HistogramDataPoint(
                    attributes=p.attributes,
                    start_time_unix_nano=_ns(p.start),
                    time_unix_nano=_ns(p.time),
                    count=p.count,
                    sum=p.sum,
                    bucket_counts=p.bucket_counts,
                    explicit_bounds=metric.bounds,
                    min=p.min,
                    max=p.max,
                )
                for p in metric.points
                if isinstance(p, HistogramPoint)
            ]
            data = Histogram(data_points=points, aggregation_temporality=cumulative)
        else:
            numbers = [
                NumberDataPoint(
                    attributes=p.attributes,
                    start_time_unix_nano=_ns(p.start),
                    time_unix_nano=_ns(p.time),
                    value=p.value,
                )
                for p in metric.points
                if not isinstance(p, HistogramPoint)
            ]
            if metric.kind == "gauge":
                data = Gauge(data_points=numbers)
            else:
                data = Sum(data_points=numbers, aggregation_temporality=cumulative, is_monotonic=True)
        converted.append(OtelMetric(name=metric.name, description=metric.description, unit=metric.unit, data=data))
    scope = ScopeMetrics(scope=SCOPE, metrics=converted, schema_url="")
    return MetricsData(resource_metrics=[ResourceMetrics(resource=where, scope_metrics=[scope], schema_url="")])


class Sink:
    """Where spans and metrics go. ``export_*`` raise ``ExportFailed``."""

    def __init__(self, service_name: str, instance: str) -> None:
        self.resource = resource(service_name, instance or "lopen")

    def export_spans(self, spans: Sequence[Span]) -> None:
        raise NotImplementedError

    def export_metrics(self, metrics: Sequence[Metric]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release connections or files."""


class _Captured(logging.Handler):
    """Keeps what the exporters say (since ``clear``) instead of printing it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages = [*self.messages[-9:], record.getMessage()]

    def clear(self) -> None:
        self.messages = []

    @property
    def text(self) -> str:
        return " ".join(self.messages)


_captured: _Captured | None = None


def _capture_exporter_logs() -> _Captured:
    global _captured
    if _captured is None:
        _captured = _Captured()
        logger = logging.getLogger("opentelemetry.exporter")
        logger.addHandler(_captured)
        logger.propagate = False  # Lopen says it once, in its own words
    return _captured


def _reason(message: str) -> str:
    """One line from what the exporter logged: the cause, not its retry chatter."""
    text = " ".join(message.split())
    if "Connection refused" in text:
        return "connection refused"
    if "NameResolutionError" in text or "Name or service not known" in text:
        return "cannot resolve the host name"
    if "Read timed out" in text or "ConnectTimeout" in text:
        return "no answer in time"
    if "code: " in text:  # "Failed to export spans batch code: 400, reason: Bad Request"
        return "the collector answered HTTP " + text.split("code: ", 1)[1].split(" Failed", 1)[0]
    if "Transient error " in text:  # retried until the timeout
        return "the collector kept answering " + text.split("Transient error ", 1)[1].split(" encountered", 1)[0]
    return (text[:200] + "…" if len(text) > 200 else text) or "the collector did not accept the data"


def _refused(message: str) -> bool:
    """The collector answered with a client error: sending the same again will not help."""
    return "code: 4" in message


class OtlpHttpSink(Sink):
    """The official OTLP/HTTP (protobuf) exporters, with short timeouts."""

    def __init__(self, export: ExportSettings, *, instance: str = "", timeout: float | None = None) -> None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        super().__init__(export.service_name, instance)
        self.destination = export.endpoint
        self._log = _capture_exporter_logs()
        wait = export.timeout if timeout is None else timeout
        self._spans = OTLPSpanExporter(endpoint=export.traces, timeout=wait)
        self._metrics = OTLPMetricExporter(endpoint=export.metrics, timeout=wait)

    def export_spans(self, spans: Sequence[Span]) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        for start in range(0, len(spans), BATCH):
            self._log.clear()
            result = self._spans.export(readable_spans(spans[start : start + BATCH], self.resource))
            if result is not SpanExportResult.SUCCESS:
                raise ExportFailed(_reason(self._log.text), refused=_refused(self._log.text))

    def export_metrics(self, metrics: Sequence[Metric]) -> None:
        from opentelemetry.sdk.metrics.export import MetricExportResult

        if not metrics:
            return
        self._log.clear()
        result = self._metrics.export(metrics_data(metrics, self.resource))
        if result is not MetricExportResult.SUCCESS:
            raise ExportFailed(_reason(self._log.text), refused=_refused(self._log.text))

    def close(self) -> None:
        self._spans.shutdown()
        self._metrics.shutdown(timeout_millis=1000)


class OtlpFileSink(Sink):
    """OTLP JSON lines: one ``ExportTraceServiceRequest`` or ``ExportMetricsServiceRequest`` per line,
    with hex trace and span ids (the OTLP/JSON encoding, as the Collector's file exporter writes it)."""

    def __init__(self, stream: IO[str], service_name: str = "lopen", destination: str = "", instance: str = "") -> None:
        super().__init__(service_name, instance)
        self.stream = stream
        self.destination = destination

    def export_spans(self, spans: Sequence[Span]) -> None:
        for start in range(0, len(spans), BATCH):
            request = encode_spans(readable_spans(spans[start : start + BATCH], self.resource))
            data = _to_dict(request)
            for resource_spans in data.get("resourceSpans", []):
                for scope_spans in resource_spans.get("scopeSpans", []):
                    for span in scope_spans.get("spans", []):
                        for key in ("traceId", "spanId", "parentSpanId"):
                            if span.get(key):
                                span[key] = base64.b64decode(span[key]).hex()
            self._write(data)

    def export_metrics(self, metrics: Sequence[Metric]) -> None:
        if metrics:
            self._write(_to_dict(encode_metrics(metrics_data(metrics, self.resource))))

    def _write(self, data: dict[str, Any]) -> None:
        try:
            self.stream.write(json.dumps(data, separators=(",", ":")) + "\n")
        except BrokenPipeError:
            raise  # the reader stopped reading (`| head`): not an export failure
        except OSError as exc:
            raise ExportFailed(f"cannot write {self.destination or 'the file'}: {exc.strerror or exc}") from exc

    def close(self) -> None:
        self.stream.flush()


def _to_dict(message: Any) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(message, use_integers_for_enums=True)
