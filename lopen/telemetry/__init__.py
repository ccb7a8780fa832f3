"""OpenTelemetry for Lopen (O1): traces and metrics derived from the event log.

Every action is an event with its time, so spans and metrics are *folds of events*, the same
whether they are exported live from the bus during a run or rebuilt later from the store:

- ``ids``       deterministic trace/span ids; ``traceparent(project, session, invocation)``
- ``settings``  the standard ``OTEL_*`` switches over the ``otel`` settings; ``copilot_telemetry``
- ``spans``     ``SpanBuilder`` / ``build_spans``: events → span records (GenAI conventions)
- ``metrics``   ``MetricsFold``: events → token/duration histograms, counters, budget gauge
- ``otlp``      records → the SDK's ``ReadableSpan``/``MetricsData`` → OTLP/HTTP or a JSON-lines file
- ``live``      ``attach(store, project, settings)``: the bus observer a run composes
- ``history``   ``export_session``: what ``lopen trace`` runs
- ``context``   ``remote_parent``: the gateway hands Lopen's span to the Copilot CLI

Only ``otlp`` (and ``context``, when given a traceparent) imports OpenTelemetry, and only when
something is exported: with no ``OTEL_*`` variable set, nothing of it is loaded.
See docs/observability.md.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "ExportSettings": "settings",
    "Telemetry": "live",
    "attach": "live",
    "copilot_telemetry": "settings",
    "resolve": "settings",
    "trace_id": "ids",
    "traceparent": "ids",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Load a submodule on first use: importing ``lopen.telemetry.context`` (the gateway does) loads
    nothing else."""
    if name in _EXPORTS:
        return getattr(import_module(f"lopen.telemetry.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
