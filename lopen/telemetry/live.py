"""Live export: an observer on the store's bus that exports spans and metrics as the run goes.

::

    handle = attach(store, project, settings)   # before the session's first event is appended
    ...                                         # the run appends events; spans leave as they end
    handle.close()                              # ends what is open, sends the rest (bounded wait)

``attach`` returns a handle that does nothing (and imports nothing) when export is off. When it is
on, the bus callback only puts each batch of ``Recorded`` on a bounded queue — it runs on the
appending thread and never waits. One daemon thread folds the batches into spans and metrics
(``SpanBuilder``, ``MetricsFold``: the same folds ``lopen trace`` uses, so both give the same tree)
and hands them to the OTLP exporter with a short timeout.

Never in the way: when the collector cannot be reached (or the queue overflows) Lopen says so in
one warning line and stops exporting for the rest of the run; the events are all in the store, and
``lopen trace <session>`` exports them later.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from lopen.telemetry import ids
from lopen.telemetry.settings import ExportSettings, resolve

if TYPE_CHECKING:
    from events.bus import Subscription
    from events.recorded import Recorded
    from events.store import EventStore
    from lopen.config import Settings
    from lopen.telemetry.otlp import Sink

__all__ = ["QUEUE_LIMIT", "Telemetry", "attach"]

QUEUE_LIMIT = 10_000  # batches waiting for the exporter thread; more are dropped (with one warning)
CLOSE_WAIT = 5.0  # seconds close() waits for the last export
Warn = Callable[[str], None]


def _stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


class Telemetry:
    """The handle ``attach`` returns. Off: every method is a cheap no-op."""

    enabled = False
    export: ExportSettings | None = None

    def __init__(self, project: str = "") -> None:
        self.project = project

    def traceparent(self, session_id: str, invocation_id: str) -> str:
        """The W3C traceparent of an invocation's span, for ``InvocationRequest.traceparent``; "" when off
        (the gateway then touches no OpenTelemetry context at all)."""
        return ""

    def copilot_telemetry(self) -> dict[str, Any] | None:
        """The SDK ``TelemetryConfig`` for ``GatewayConfig.telemetry``; None when off."""
        return None

    def close(self, timeout: float = CLOSE_WAIT) -> None:
        """Stop following the bus; end what is open and export it (waiting at most ``timeout``)."""


class _Live(Telemetry):
    enabled = True

    def __init__(
        self, store: EventStore, project: str, export: ExportSettings, sink: Sink, settings: Settings, warn: Warn
    ) -> None:
        from lopen.telemetry.metrics import MetricsFold, module_usage_before
        from lopen.telemetry.spans import SpanBuilder

        super().__init__(project)
        self.export = export
        self.sink = sink
        self.warn = warn
        self.spans = SpanBuilder(capture_content=export.capture_content)
        budget = settings.budget
        self.metrics = MetricsFold(
            (budget.token_budget_per_module, float(budget.premium_budget_per_module)),
            module_usage_before(store.read_stream),
        )
        self.queue: queue.Queue[list[Recorded] | None] = queue.Queue(QUEUE_LIMIT)
        self.dropped = 0
        self.failed = False
        self.exported_spans = 0
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="lopen-telemetry", daemon=True)
        self._thread.start()
        self._subscription: Subscription | None = None

    def follow(self, store: EventStore, after: int | None) -> None:
        self._subscription = store.subscribe(self._on_batch, after=after, batch=True)

    def traceparent(self, session_id: str, invocation_id: str) -> str:
        return ids.traceparent(self.project, session_id, invocation_id)

    def copilot_telemetry(self) -> dict[str, Any] | None:
        from lopen.telemetry.settings import copilot_telemetry

        return copilot_telemetry(self.export)

    # -- the appending thread: never waits ---------------------------------------------------------

    def _on_batch(self, batch: list[Recorded]) -> None:
        try:
            self.queue.put_nowait(batch)
        except queue.Full:
            self.dropped += len(batch)

    # -- the exporter thread ---------------------------------------------------------------------------

    def _work(self) -> None:
        done = False
        while not done:
            batch = self.queue.get()
            spans = []
            changed = False
            while True:  # fold everything already waiting, then export once
                if batch is None:
                    done = True
                    spans += self.spans.finish()
                    changed = True
                    break
                mine = [r for r in batch if r.event.project == self.project]
                spans += self.spans.feed(mine)
                changed = self.metrics.feed(mine) or changed
                try:
                    batch = self.queue.get_nowait()
                except queue.Empty:
                    break
            if spans or (done and changed):
                self._send(spans, with_metrics=changed or done)

    def _send(self, spans: list[Any], *, with_metrics: bool) -> None:
        if self.failed:
            return
        from lopen.telemetry.otlp import ExportFailed

        try:
            if spans:
                self.sink.export_spans(spans)
                self.exported_spans += len(spans)
            if with_metrics:
                self.sink.export_metrics(self.metrics.snapshot())
        except ExportFailed as exc:
            self._give_up(str(exc))
        except Exception as exc:  # an exporter bug must not reach the run
            self._give_up(f"{type(exc).__name__}: {exc}")

    def _give_up(self, reason: str) -> None:
        self.failed = True
        self.warn(
            f"telemetry: cannot export to {self.export.endpoint if self.export else '?'} ({reason}); "
            "this run goes on without exporting — `lopen trace <session>` can export it later"
        )

    def close(self, timeout: float = CLOSE_WAIT) -> None:
        if self._closed:
            return
        self._closed = True
        if self._subscription is not None:
            self._subscription.cancel()
        with contextlib.suppress(queue.Full):
            self.queue.put(None, timeout=timeout)
        self._thread.join(timeout)
        if self.dropped and not self.failed:
            self.warn(
                f"telemetry: {self.dropped} events were not exported live (the exporter fell behind); "
                "`lopen trace <session>` exports them from the store"
            )
        with contextlib.suppress(Exception):
            self.sink.close()


def attach(
    store: EventStore,
    project: str,
    settings: Settings,
    *,
    environ: Mapping[str, str] | None = None,
    warn: Warn | None = None,
    after: int | None = None,
) -> Telemetry:
    """Export the spans and metrics of what ``store`` records for ``project`` from now on.

    Call it before the session's first event is appended (``after`` = the store position to follow
    from, default its end), and ``close()`` the handle when the run ends. ``warn`` prints one line
    (default: ``warning: …`` on stderr). When the ``OTEL_*`` variables and the ``otel`` settings
    turn export off this imports nothing and returns an inert handle.
    """
    say = warn or _stderr
    resolution = resolve(settings.otel, os.environ if environ is None else environ)
    if resolution.problem:
        say(f"telemetry: {resolution.problem}; nothing is exported")
    if resolution.export is None:
        return Telemetry(project)
    try:
        from lopen.telemetry.otlp import OtlpHttpSink

        sink = OtlpHttpSink(resolution.export)
    except ImportError as exc:
        say(f"telemetry: the OpenTelemetry packages are missing ({exc.name}); reinstall lopen to export")
        return Telemetry(project)
    live = _Live(store, project, resolution.export, sink, settings, say)
    live.follow(store, after)
    return live
