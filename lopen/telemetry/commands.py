"""Traces of the commands that change state: ``lopen revert``, ``lopen spec approve``, an MCP client's
``pause_run``… — one trace per command, exported when it ends.

A run's trace is derived from its session's events (``lopen.telemetry.spans``); a command is short
and mostly not part of a session, so its span is *measured*: it starts when the command starts, ends
when it returns (status ``ERROR`` and ``error.type`` when it raises), and names who asked
(``lopen.actor``: ``cli:<user>``, ``mcp:<client>``, ``tui:<user>``). Each store append the command
makes (``EventStore.observe_appends``) is a ``store append`` span under it, and a command another one
runs (``lopen do`` approving its spec) is a child span in the same trace.

The command's span is a root, or — when ``TRACEPARENT`` holds a W3C trace context (a CI job, a
script that traces its own steps) — a child of that span, in that trace.

Nothing here imports OpenTelemetry until ``finish`` exports (``lopen.telemetry.otlp``), and the
caller (``lopen.app.tracing``) makes a ``CommandTrace`` only when export is on.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from lopen.telemetry.ids import parse_traceparent
from lopen.telemetry.spans import Attributes, Span, append_span

if TYPE_CHECKING:
    from events.store import Appended
    from lopen.telemetry.otlp import Sink
    from lopen.telemetry.settings import ExportSettings

__all__ = ["CommandTrace"]

Warn = Callable[[str], None]


def _stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def _random_id(bits: int) -> int:
    return int.from_bytes(os.urandom(bits // 8), "big") or 1


class CommandTrace:
    """One command's spans: ``enter`` opens a (child) command span, ``leave`` ends it, ``on_append``
    files a store append under the innermost open one, and ``finish`` exports them all."""

    def __init__(
        self,
        export: ExportSettings,
        *,
        project: str = "",
        environ: Mapping[str, str] | None = None,
        warn: Warn | None = None,
        sink: Sink | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        parent = parse_traceparent(env.get("TRACEPARENT", ""))
        self.trace_id, self.parent_id = (parent[0], parent[1]) if parent else (_random_id(128), 0)
        self.export = export
        self.project = project
        self.warn = warn or _stderr
        self.sink = sink
        self.open: list[Span] = []
        self.done: list[Span] = []
        self._lock = threading.Lock()

    def enter(self, name: str, actor: str, attributes: Attributes | None = None) -> Span:
        """Open the span of command ``name`` asked by ``actor``: under the open one, else the root."""
        face = actor.split(":", 1)[0]
        base: Attributes = {"lopen.command": name, "lopen.actor": actor, "lopen.face": face}
        span = Span(
            trace_id=self.trace_id,
            span_id=_random_id(64),
            parent_id=self.open[-1].span_id if self.open else self.parent_id,
            name=name,
            start=time.time(),
            attributes={**base, **{k: v for k, v in (attributes or {}).items() if v not in ("", None)}},
            events=[],
        )
        with self._lock:
            self.open.append(span)
        return span

    def leave(self, span: Span, error: BaseException | None = None) -> None:
        """End ``span`` (failed when ``error`` is given)."""
        span.end = time.time()
        if error is not None:
            span.attributes["error.type"] = type(error).__name__
            span.fail(_first_line(error))
        with self._lock:
            if span in self.open:
                self.open.remove(span)
            self.done.append(span)

    def on_append(self, appended: Appended) -> None:
        """The store observer: a ``store append`` span under the innermost open command."""
        with self._lock:
            if not self.open:
                return
            parent = self.open[-1]
            base = {k: v for k, v in parent.attributes.items() if k in ("lopen.project", "lopen.module")}
            first = appended.records[0].event
            if first.session_id:
                base["lopen.session"] = first.session_id
            self.done.append(append_span(self.trace_id, parent.span_id, appended, base))

    def finish(self) -> int:
        """Export what ended (one request, the export's timeout); a failure is one warning. Returns the
        number of spans sent."""
        with self._lock:
            spans, self.done = self.done, []
        if not spans:
            return 0
        if self.project:
            for span in spans:
                span.attributes.setdefault("lopen.project", self.project)
        try:
            from lopen.telemetry.otlp import ExportFailed, OtlpHttpSink
        except ImportError as exc:
            self.warn(f"telemetry: the OpenTelemetry packages are missing ({exc.name}); reinstall lopen to export")
            return 0
        try:
            sink = self.sink or OtlpHttpSink(self.export, instance=self.project)
            try:
                sink.export_spans(spans)
            finally:
                sink.close()
        except ExportFailed as exc:
            self.warn(f"telemetry: cannot export to {self.export.endpoint} ({exc}); this command's trace is not sent")
            return 0
        except Exception as exc:  # an exporter bug must not fail a command that did its work
            self.warn(f"telemetry: cannot export to {self.export.endpoint} ({type(exc).__name__}: {exc})")
            return 0
        return len(spans)

    def traceparent(self) -> str:
        """The W3C traceparent of the innermost open command span ("" when none is open)."""
        with self._lock:
            span = self.open[-1] if self.open else None
        return f"00-{self.trace_id:032x}-{span.span_id:016x}-01" if span else ""


def _first_line(error: BaseException) -> str:
    what: Any = getattr(error, "what", None)
    text = str(what or error or type(error).__name__)
    return text.splitlines()[0] if text else type(error).__name__
