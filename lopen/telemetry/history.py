"""Traces from history: export a past session from the store (``lopen trace``).

The events of a session (``events.selection.session_records``) go through the same folds as the live
export (``SpanBuilder``, ``MetricsFold``), so a session exported after the fact — made with
telemetry off, or on another machine sharing a PostgreSQL store — gives the spans and metrics a live
export of it gave or would have given: same tree, same ids, the events' own times.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING

import msgspec

from events.recorded import Recorded
from lopen.telemetry.metrics import MetricsFold, Usage, module_usage_before
from lopen.telemetry.spans import Span, SpanBuilder

if TYPE_CHECKING:
    from events.store import EventStore
    from lopen.telemetry.otlp import Sink

__all__ = ["Exported", "export_records", "export_session"]

CHUNK = 1000  # events folded between two looks at the span buffer
SEND_AT = 2048  # spans buffered before an export request


class Exported(msgspec.Struct, frozen=True):
    """What one export sent, and how long it took (reading, folding and exporting)."""

    events: int
    spans: int
    points: int
    seconds: float
    metrics_refused: str = ""  # why the destination took the spans but not the metrics

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("inf")


def _chunks(records: Iterable[Recorded]) -> Iterator[list[Recorded]]:
    iterator = iter(records)
    while chunk := list(islice(iterator, CHUNK)):
        yield chunk


def export_records(
    records: Iterable[Recorded],
    sink: Sink,
    *,
    capture_content: bool = False,
    budget: Usage = (0, 0.0),
    metrics: MetricsFold | None = None,
) -> Exported:
    """Fold ``records`` (one session's, in order) into spans and metrics and send them to ``sink``."""
    begun = time.perf_counter()
    builder = SpanBuilder(capture_content=capture_content)
    fold = metrics or MetricsFold(budget)
    buffer: list[Span] = []
    events = spans = 0
    for chunk in _chunks(records):
        events += len(chunk)
        buffer += builder.feed(chunk)
        fold.feed(chunk)
        if len(buffer) >= SEND_AT:
            sink.export_spans(buffer)
            spans += len(buffer)
            buffer = []
    buffer += builder.finish()
    sink.export_spans(buffer)
    spans += len(buffer)
    snapshot = fold.snapshot()
    refused = ""
    try:
        sink.export_metrics(snapshot)
    except Exception as exc:
        if not getattr(exc, "refused", False):  # ExportFailed(refused=True): e.g. Jaeger takes traces only
            raise
        refused = str(exc)
    points = 0 if refused else sum(len(m.points) for m in snapshot)
    seconds = time.perf_counter() - begun
    return Exported(events=events, spans=spans, points=points, seconds=seconds, metrics_refused=refused)


def export_session(
    store: EventStore,
    project: str,
    session_id: str,
    sink: Sink,
    *,
    capture_content: bool = False,
    budget: Usage = (0, 0.0),
) -> Exported:
    """Export one stored session (its projections must be current: ``store.projections.catch_up()``)."""
    from events.selection import session_records

    fold = MetricsFold(budget, module_usage_before(store.read_stream))
    return export_records(
        session_records(store, project, session_id), sink, capture_content=capture_content, metrics=fold
    )
