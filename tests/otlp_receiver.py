"""A real OTLP/HTTP receiver for the tests: a loopback HTTP server that decodes what it is sent with
the official ``opentelemetry-proto`` messages (``ExportTraceServiceRequest``,
``ExportMetricsServiceRequest``), in ``application/x-protobuf`` or OTLP ``application/json``.

::

    with OtlpReceiver() as receiver:          # receiver.url = "http://127.0.0.1:<port>"
        ...export to receiver.url...
        receiver.spans()                      # flattened: one ReceivedSpan per span, all requests
        receiver.metrics("lopen.commits")     # the Metric messages of that name
        receiver.wait_for(lambda r: …, timeout=30)  # a condition variable, not a sleep

``status`` makes it answer every request with that HTTP status (e.g. 503) instead of 200;
``metrics_status`` only the metrics requests (Jaeger answers 404: it takes traces only).
"""

from __future__ import annotations

import base64
import http.server
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def attributes_of(pairs: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in pairs}


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str  # hex
    span_id: str
    parent_id: str  # "" for a root
    name: str
    kind: int
    start: int  # ns
    end: int
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]]
    status: int  # 0 unset, 1 ok, 2 error
    status_message: str
    service: str
    resource: dict[str, Any] = field(default_factory=dict)
    links: list[tuple[str, str]] = field(default_factory=list)  # (trace id, span id), hex


def _hex_ids_to_base64(data: Any) -> Any:
    """OTLP/JSON writes ids in hex, protobuf's JSON mapping reads bytes as base64."""
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):  # also in links
                out[key] = base64.b64encode(bytes.fromhex(value)).decode()
            else:
                out[key] = _hex_ids_to_base64(value)
        return out
    if isinstance(data, list):
        return [_hex_ids_to_base64(v) for v in data]
    return data


def decode(kind: str, body: bytes, content_type: str) -> Any:
    message = ExportTraceServiceRequest() if kind == "traces" else ExportMetricsServiceRequest()
    if "json" in content_type:
        json_format.ParseDict(_hex_ids_to_base64(json.loads(body)), message, ignore_unknown_fields=True)
    else:
        message.ParseFromString(body)
    return message


class OtlpReceiver:
    def __init__(self, status: int = 200, metrics_status: int | None = None) -> None:
        self.status = status
        self.metrics_status = status if metrics_status is None else metrics_status
        self.traces: list[ExportTraceServiceRequest] = []
        self.metric_requests: list[ExportMetricsServiceRequest] = []
        self.content_types: list[str] = []
        self._changed = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                kind = self.path.rstrip("/").rsplit("/", 1)[-1]
                content_type = self.headers.get("Content-Type", "")
                status = {"traces": receiver.status, "metrics": receiver.metrics_status}.get(kind, 404)
                if status == 200:
                    message = decode(kind, body, content_type)
                    with receiver._changed:
                        receiver.content_types.append(content_type)
                        (receiver.traces if kind == "traces" else receiver.metric_requests).append(message)
                        receiver._changed.notify_all()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="otlp-receiver", daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, condition: Callable[[OtlpReceiver], bool], timeout: float = 30.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: condition(self), timeout)

    def spans(self) -> list[ReceivedSpan]:
        out = []
        for request in list(self.traces):
            for resource_spans in request.resource_spans:
                resource = attributes_of(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for s in scope_spans.spans:
                        out.append(
                            ReceivedSpan(
                                trace_id=s.trace_id.hex(),
                                span_id=s.span_id.hex(),
                                parent_id=s.parent_span_id.hex(),
                                name=s.name,
                                kind=s.kind,
                                start=s.start_time_unix_nano,
                                end=s.end_time_unix_nano,
                                attributes=attributes_of(s.attributes),
                                events=[(e.name, e.time_unix_nano, attributes_of(e.attributes)) for e in s.events],
                                status=s.status.code,
                                status_message=s.status.message,
                                service=resource.get("service.name", ""),
                                resource=resource,
                                links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                            )
                        )
        return out

    def metrics(self, name: str | None = None) -> list[Any]:
        out = []
        for request in list(self.metric_requests):
            for resource_metrics in request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    out += [m for m in scope_metrics.metrics if name is None or m.name == name]
        return out
