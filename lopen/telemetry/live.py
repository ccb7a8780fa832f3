"""Live export: an observer on the store's bus that exports spans and metrics as the run goes.

::

    handle = attach(store, project, settings)   # best before the session's first event
    ...                                         # the run appends events; spans leave as they end
    handle.close()                              # before store.close(): ends what is open, sends the
                                                # rest (waits 5 s at most)

``attach`` returns a handle that does nothing (and imports nothing) when export is off. When it is
on, the bus callback only appends each batch of ``Recorded`` to a bounded deque — it runs on the
appending thread and neither waits nor wakes anyone. One daemon thread looks once per period
(``OTEL_BSP_SCHEDULE_DELAY``, default 1 s, and at once on close), folds the batches into spans and
metrics (``SpanBuilder``, ``MetricsFold``: the same folds ``lopen trace`` uses, so both give the
same tree) and hands what ended to the OTLP exporter, with a short timeout.

Each append of this process is measured too (``EventStore.observe_appends``): the observer, also on
the appending thread, only files the measurement under the batch's first ``seq``; the fold makes it
a ``store append`` span when it meets that event (live only: ``lopen trace`` has no measurements).

Never in the way: when the collector cannot be reached (or the exporter falls far behind) Lopen
says so in one warning line and stops exporting for the rest of the run; the events are all in the
store, and ``lopen trace <session>`` exports them later.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from lopen.telemetry import ids
from lopen.telemetry.settings import ExportSettings, resolve

if TYPE_CHECKING:
    from events.bus import Subscription
    from events.recorded import Recorded
    from events.store import Appended, EventStore
    from lopen.config import Settings
    from lopen.telemetry.otlp import Sink

__all__ = ["QUEUE_LIMIT", "Telemetry", "attach"]

QUEUE_LIMIT = 100_000  # batches waiting for the exporter thread; more are dropped (with one warning)
CLOSE_WAIT = 5.0  # seconds close() waits for the last export
FLUSH_EVERY = 1.0  # seconds between exports during a run (OTEL_BSP_SCHEDULE_DELAY, in ms, sets it)
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
        self,
        store: EventStore,
        project: str,
        export: ExportSettings,
        sink: Sink,
        settings: Settings,
        warn: Warn,
        flush_every: float = FLUSH_EVERY,
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
        self.read_stream = store.read_stream
        self.seen: set[str] = set()  # sessions met so far
        self.pending: collections.deque[list[Recorded]] = collections.deque()  # appends never block on it
        self.appends: dict[int, Appended] = {}  # measured appends of this process, by first seq
        self.flush_every = max(flush_every, 0.05)
        self.dropped = 0
        self.failed = False
        self.metrics_on = True
        self.exported_spans = 0
        self._closed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="lopen-telemetry", daemon=True)
        self._thread.start()
        self._subscription: Subscription | None = None
        self._unobserve: Callable[[], None] | None = None

    def follow(self, store: EventStore, after: int | None) -> None:
        self._unobserve = store.observe_appends(self._on_append)  # before the bus delivers the batch
        self._subscription = store.subscribe(self._on_batch, after=after, batch=True)

    def traceparent(self, session_id: str, invocation_id: str) -> str:
        return ids.traceparent(self.project, session_id, invocation_id)

    def copilot_telemetry(self) -> dict[str, Any] | None:
        from lopen.telemetry.settings import copilot_telemetry

        return copilot_telemetry(self.export)

    # -- the appending thread: never waits ---------------------------------------------------------

    def _on_batch(self, batch: list[Recorded]) -> None:
        if len(self.pending) >= QUEUE_LIMIT:  # the exporter thread fell far behind: drop, say so at close
            self.dropped += len(batch)
        else:
            self.pending.append(batch)  # no lock, no wake-up: the exporter thread looks once per period

    def _on_append(self, appended: Appended) -> None:
        first = appended.records[0]
        if first.event.project == self.project and len(self.appends) < QUEUE_LIMIT:
            self.appends[first.seq] = appended  # one dict store (atomic): the fold takes it out

    # -- the exporter thread ---------------------------------------------------------------------------

    def _work(self) -> None:
        """Once per ``flush_every`` (and at once on close): fold what the bus handed over, export the
        spans that ended and the metrics. The appending thread never waits for this one."""
        while True:
            closing = self._stop.wait(self.flush_every)
            spans: list[Any] = []
            changed = False
            while self.pending and not self.failed:
                mine = [r for r in self.pending.popleft() if r.event.project == self.project]
                for rec in mine:
                    session_id = rec.event.session_id
                    if session_id and session_id not in self.seen:
                        self.seen.add(session_id)
                        found, backfilled = self._backfill(rec)
                        spans += found
                        changed = backfilled or changed
                spans += self.spans.feed(mine, self.appends)
                changed = self.metrics.feed(mine) or changed
            if closing and not self.failed:
                spans += self.spans.finish()
                changed = True
            if spans or changed:
                self._send(spans, with_metrics=changed)
            if closing:
                return

    def _backfill(self, first: Recorded) -> tuple[list[Any], bool]:
        """A session first seen mid-way (attached late, or resumed from an earlier run): fold its
        earlier events first, so the live export equals ``lopen trace``. Its metrics count from the
        session's start; its spans from the current run's start (earlier runs were exported by the
        process that ran them)."""
        from events import catalogue as ev

        if type(first.event) is ev.SessionStarted or first.version <= 1:
            return [], False  # a session's first event: nothing came before it
        session_id = first.event.session_id
        earlier = [
            r for r in self.read_stream(first.stream_id, 0, first.version - 1) if r.event.session_id == session_id
        ]
        if not earlier:
            return [], False
        changed = self.metrics.feed(earlier)
        opens = [i for i, r in enumerate(earlier) if type(r.event) in (ev.SessionStarted, ev.SessionResumed)]
        run = earlier[opens[-1] if opens else 0 :]
        ended = any(type(r.event) in (ev.SessionPaused, ev.SessionCompleted, ev.SessionFailed) for r in run)
        if type(first.event) is ev.SessionResumed or ended:
            return [], changed
        return self.spans.feed(run), changed

    def _send(self, spans: list[Any], *, with_metrics: bool) -> None:
        from lopen.telemetry.otlp import ExportFailed

        try:
            if spans:
                self.sink.export_spans(spans)
                self.exported_spans += len(spans)
        except ExportFailed as exc:
            return self._give_up(str(exc))
        except Exception as exc:  # an exporter bug must not reach the run
            return self._give_up(f"{type(exc).__name__}: {exc}")
        if not with_metrics or not self.metrics_on:
            return None
        try:
            self.sink.export_metrics(self.metrics.snapshot())
        except ExportFailed as exc:
            if not exc.refused:
                return self._give_up(str(exc))
            self.metrics_on = False  # e.g. Jaeger: traces only
            self.warn(f"telemetry: {self._where()} does not take metrics ({exc}); spans still go there")
        except Exception as exc:
            return self._give_up(f"{type(exc).__name__}: {exc}")
        return None

    def _where(self) -> str:
        return self.export.endpoint if self.export else "the collector"

    def _give_up(self, reason: str) -> None:
        """Say it once; export nothing more in this run."""
        self.failed = True
        self.warn(
            f"telemetry: cannot export to {self._where()} ({reason}); "
            "this run goes on without exporting — `lopen trace <session>` can export it later"
        )

    def close(self, timeout: float = CLOSE_WAIT) -> None:
        if self._closed:
            return
        self._closed = True
        if self._unobserve is not None:
            self._unobserve()
        if self._subscription is not None:
            self._subscription.cancel()
        self._stop.set()
        self._thread.join(timeout)
        if self.dropped and not self.failed:
            self.warn(
                f"telemetry: {self.dropped} events were not exported live (the exporter fell behind); "
                "`lopen trace <session>` exports them from the store"
            )
        with contextlib.suppress(Exception):
            self.sink.close()


def _schedule_delay(env: Mapping[str, str]) -> float:
    """``OTEL_BSP_SCHEDULE_DELAY`` (milliseconds) as seconds; ``FLUSH_EVERY`` when unset or invalid."""
    try:
        return max(0.0, float(env["OTEL_BSP_SCHEDULE_DELAY"]) / 1000)
    except (KeyError, ValueError):
        return FLUSH_EVERY


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

    Events appended from now on are followed (``after``: from that store position instead). A session
    met mid-way has its earlier events read back first, so attaching after ``SessionStarted``, or to
    a resumed session, still exports what ``lopen trace`` would. ``close()`` the handle when the run
    ends, before closing the store. ``warn`` prints one line (default: ``warning: …`` on stderr).

    When the ``OTEL_*`` variables and the ``otel`` settings turn export off, this imports nothing
    and returns an inert handle (``enabled`` False, ``traceparent`` "", ``copilot_telemetry`` None).
    """
    say = warn or _stderr
    env = os.environ if environ is None else environ
    resolution = resolve(settings.otel, env)
    if resolution.problem:
        say(f"telemetry: {resolution.problem}; nothing is exported")
    if resolution.export is None:
        return Telemetry(project)
    try:
        from lopen.telemetry.otlp import OtlpHttpSink

        sink = OtlpHttpSink(resolution.export, instance=project)
    except ImportError as exc:
        say(f"telemetry: the OpenTelemetry packages are missing ({exc.name}); reinstall lopen to export")
        return Telemetry(project)
    live = _Live(store, project, resolution.export, sink, settings, say, _schedule_delay(env))
    live.follow(store, after)
    return live
