"""``lopen trace``: export a past session as OpenTelemetry (spans and metrics, OTLP).

The session is read back from the event store and folded into the same spans and metrics a live
export gives (``lopen.telemetry.history``): one trace, the events' own times, the same ids. It works
for any session in the store — made with telemetry off, or on another machine sharing PostgreSQL.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lopen.errors import LopenError

if TYPE_CHECKING:
    from lopen.app.context import Project

TRACE_TIMEOUT = 5.0  # seconds per export request (retries included): nobody's run waits on it


def export_trace(project: Project, session_id: str, endpoint: str | None = None, file: Path | None = None) -> Any:
    """Export the session to ``endpoint`` (else the configured one), or to ``file`` (``-``: stdout).
    Returns (what was exported, where to). A closed stdout raises ``BrokenPipeError`` for the face."""
    from lopen.app.queries import module_of_session
    from lopen.telemetry.settings import capture_content, resolve, service_name

    module_of_session(session_id)  # a malformed id is refused before the store is opened
    if endpoint and file:
        raise LopenError(
            "--endpoint and --file both given", "a trace goes to one place", "keep one of them (or run twice)"
        )
    settings = project.settings()
    export = None
    if file is None:
        resolution = resolve(settings.otel, endpoint=endpoint or "")
        if resolution.problem:
            raise LopenError(f"cannot export session {session_id}", resolution.problem, "pass --endpoint http://…")
        if resolution.export is None:
            why = (
                "telemetry is disabled (OTEL_SDK_DISABLED or otel.disabled)"
                if resolution.disabled
                else "no --endpoint or --file was given, and no OTEL_EXPORTER_OTLP_ENDPOINT or otel.endpoint is set"
            )
            raise LopenError(
                f"nowhere to export session {session_id}",
                why,
                "pass --endpoint http://localhost:4318 (a collector or Jaeger; see docs/observability.md) "
                "or --file trace.jsonl",
            )
        export = resolution.export

    from lopen.telemetry.history import export_session
    from lopen.telemetry.otlp import ExportFailed, OtlpFileSink, OtlpHttpSink

    with project.store(read_only=True) as (store, _):
        views = store.projections
        if views.sessions.get(session_id) is None:
            raise LopenError(
                f"no session {session_id}",
                f"the event store at {store.location} has no events for it in this project",
                "see `lopen session list`",
            )
        budget = (settings.budget.token_budget_per_module, float(settings.budget.premium_budget_per_module))
        project, name = views.project, service_name(settings.otel)
        if export is not None:
            sink = OtlpHttpSink(export, instance=project, timeout=TRACE_TIMEOUT)
            destination = export.endpoint
        elif str(file) == "-":
            sink = OtlpFileSink(sys.stdout, name, "stdout", instance=project)
            destination = "stdout"
        else:
            try:
                stream = open(file, "w", encoding="utf-8")  # noqa: SIM115 - closed below, after the export
            except OSError as exc:
                raise LopenError(f"cannot write {file}", exc.strerror or str(exc), "choose a writable path") from None
            sink = OtlpFileSink(stream, name, str(file), instance=project)
            destination = str(file)
        try:
            done = export_session(
                store,
                project,
                session_id,
                sink,
                capture_content=capture_content(settings.otel),
                budget=budget,
            )
        except ExportFailed as exc:
            raise LopenError(
                f"could not export session {session_id} to {destination}",
                str(exc),
                "start a collector there (docs/observability.md shows Jaeger in one command), "
                "or write the trace to a file with --file trace.jsonl",
            ) from None
        finally:
            sink.close()
            if file is not None and str(file) != "-":
                stream.close()
    return done, destination
